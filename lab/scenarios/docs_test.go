package scenarios

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
)

// The lines of docs/install.md and docs/runbook.md the docs scenario runs,
// as the pages show them (docShellLines: continuations joined, comments cut).
const (
	docHelmInstall = "helm install netdrift deploy/helm/netdrift --namespace netdrift --create-namespace --set image.repository=registry.example/netdrift --set image.tag=0.1.0"
	docLabelNS     = "kubectl label ns netdrift pod-security.kubernetes.io/enforce=privileged"
	docRollout     = "kubectl -n netdrift rollout status ds/netdrift"
	docApplyK      = "kubectl apply -k overlay/"
	docApplyF      = "kubectl apply -f deploy/daemonset.yaml"
	docApplyRules  = "kubectl apply -f deploy/prometheus-rules.yaml"
	docHelmCilium  = "helm install netdrift deploy/helm/netdrift -n netdrift --create-namespace --set cilium.enabled=true"
	docPodVar      = "POD=$(kubectl -n netdrift get pods -l app.kubernetes.io/component=agent --field-selector spec.nodeName=$NODE -o name)"
	docExecStatus  = "kubectl -n netdrift exec $POD -c agent -- netdrift status"
	docExecExplain = "kubectl -n netdrift exec $POD -c agent -- netdrift explain shop/cart"
	docSynQuery    = "kubectl netdrift status|drift|lag|rsts --node NODE [-o json]"
	docSynExplain  = "kubectl netdrift explain NAMESPACE/NAME --node NODE"
	docSynCluster  = "kubectl netdrift cluster status|lag [-l NODE-SELECTOR] [-o table|json|yaml]"
	docSynDrift    = "kubectl netdrift cluster drift [--backend IP[:PORT]] [--service NS/NAME] [-l NODE-SELECTOR]"
	docGetReports  = "kubectl get nodereports"
	docReportsJQ   = `kubectl get nodereports -o json | jq -r '.items[] | select(any(.report.findings[]?; .backend == "10.244.2.7:8080")) | .metadata.name'`
	docGetDS       = "kubectl -n netdrift get ds netdrift"
	docGetPods     = "kubectl -n netdrift get pods -o wide"
	docLogsPrev    = "kubectl -n netdrift logs POD --previous"
	docDescribe    = "kubectl -n netdrift describe pod POD"

	// The removals install.md gives in its text (inline code).
	docHelmUninstall = "helm uninstall netdrift -n netdrift"
	docKubectlDelete = "kubectl delete -f deploy/prometheus-rules.yaml -f deploy/daemonset.yaml"
)

// docsScenarioLines: the page and line of every command above (the
// removals are checked where they run).
var docsScenarioLines = func() map[string]bool {
	m := map[string]bool{}
	for _, s := range []string{docHelmInstall, docLabelNS, docRollout, docApplyK, docApplyF, docApplyRules, docHelmCilium,
		docPodVar, docExecStatus, docExecExplain, docSynQuery, docSynExplain, docSynCluster, docSynDrift, docGetReports, docReportsJQ} {
		m[docLine{Page: "install.md", Text: s}.key()] = true
	}
	for _, s := range []string{docGetDS, docGetPods, docLogsPrev, docDescribe} {
		m[docLine{Page: "runbook.md", Text: s}.key()] = true
	}
	return m
}()

// docShell runs documented lines as a reader would: `sh -c LINE` in the
// router namespace (where a laptop's shell stands: it reaches only the API
// server) with the lab's kubeconfig, from a directory holding the
// repository's deploy/ and the page's overlay/, with kubectl (upstream,
// built in the lab module), helm (the repository's pinned one), jq (the
// Debian package) and kubectl-netdrift on PATH.
type docShell struct {
	t     *testing.T
	l     *labenv.Lab
	dir   string
	env   []string
	pages map[string]string
	lines map[string][]docLine // by key: a line may be shown more than once
	ran   map[string]bool
}

type docResult struct {
	cmd       string
	out, serr string
	code      int
}

func newDocShell(t *testing.T, l *labenv.Lab) *docShell {
	t.Helper()
	d := &docShell{t: t, l: l, pages: map[string]string{}, lines: map[string][]docLine{}, ran: map[string]bool{}}
	for _, p := range docPages {
		b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "docs", p))
		if err != nil {
			t.Fatal(err)
		}
		d.pages[p] = string(b)
		for _, dl := range docShellLines(p, string(b)) {
			d.lines[dl.key()] = append(d.lines[dl.key()], dl)
		}
	}
	d.dir = docWorkDir(t, d.pages["install.md"])
	d.env = []string{"PATH=" + docTools(t) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + t.TempDir(), "KUBECONFIG=" + l.Kubeconfig(), "LANG=C.UTF-8"}
	return d
}

// docTools links the tools the pages use into one directory for PATH.
func docTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	helm, err := helmBinary()
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{"kubectl": filepath.Join(labenv.DefaultBinDir(), "kubectl"), "helm": helm, "kubectl-netdrift": pluginBinary(t)}
	if tools["jq"], err = exec.LookPath("jq"); err != nil {
		t.Fatal("jq not found: `make lab-deps` installs it (Debian package jq)")
	}
	for name, p := range tools {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v (run `make lab-bins` for kubectl)", name, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// docWorkDir is the reader's working directory: deploy/ (a link to the
// repository's) and overlay/kustomization.yaml as install.md writes it.
func docWorkDir(t *testing.T, install string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(labenv.ModuleDir(), "..", "deploy"), filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	overlay := docYAMLBlock(install, "# overlay/kustomization.yaml")
	if overlay == "" {
		t.Fatal("install.md: no yaml block starting with # overlay/kustomization.yaml")
	}
	if err := os.MkdirAll(filepath.Join(dir, "overlay"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay", "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// docYAMLBlock returns the yaml block of md whose first line is first,
// without the block's indentation.
func docYAMLBlock(md, first string) string {
	lines := strings.Split(md, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "```yaml" || i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != first {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var b strings.Builder
		for _, y := range lines[i+1:] {
			if strings.TrimSpace(y) == "```" {
				return b.String()
			}
			b.WriteString(strings.TrimPrefix(y, strings.Repeat(" ", indent)) + "\n")
		}
	}
	return ""
}

// run runs page's line text with each placeholder of fill (placeholder,
// value, ...) replaced.
func (d *docShell) run(page, text string, fill ...string) docResult {
	d.t.Helper()
	return d.runIn(page, text, "", "", nil, fill...)
}

// runIn runs page's line text after the shell lines prelude (a block's
// earlier lines, run in the same shell), followed by after (the test's
// own look at what it left, e.g. a variable), with extra environment.
func (d *docShell) runIn(page, text, prelude, after string, env []string, fill ...string) docResult {
	d.t.Helper()
	where := d.mark(page, text)
	cmd := text
	for i := 0; i+1 < len(fill); i += 2 {
		if !strings.Contains(cmd, fill[i]) {
			d.t.Fatalf("%s: placeholder %q not in %q", where, fill[i], text)
		}
		cmd = strings.ReplaceAll(cmd, fill[i], fill[i+1])
	}
	r := d.shell(prelude+"\n"+cmd+after, env)
	r.cmd = cmd
	d.t.Logf("%s $ %s\n(exit %d)\n%s%s", where, cmd, r.code, clip(r.out), clip(r.serr))
	return r
}

// runAs runs args, one of the commands a synopsis line of page stands
// for (its notation: alternatives, optional parts, placeholders).
func (d *docShell) runAs(page, synopsis, args string) docResult {
	d.t.Helper()
	where := d.mark(page, synopsis)
	r := d.shell(args, nil)
	r.cmd = args
	d.t.Logf("%s (%s) $ %s\n(exit %d)\n%s%s", where, synopsis, args, r.code, clip(r.out), clip(r.serr))
	return r
}

// mark records that page's line text runs and returns where the page
// shows it ("install.md:54,108"); it fails if the page no longer does.
func (d *docShell) mark(page, text string) string {
	d.t.Helper()
	key := docLine{Page: page, Text: text}.key()
	dls := d.lines[key]
	if len(dls) == 0 {
		d.t.Fatalf("%s no longer shows %q", page, text)
	}
	d.ran[key] = true
	var at []string
	for _, dl := range dls {
		at = append(at, strconv.Itoa(dl.Line))
	}
	return page + ":" + strings.Join(at, ",")
}

// runInline runs a command page gives in its text (as inline code).
func (d *docShell) runInline(page, text string) docResult {
	d.t.Helper()
	if !strings.Contains(d.pages[page], "`"+text+"`") {
		d.t.Fatalf("%s no longer shows `%s`", page, text)
	}
	r := d.shell(text, nil)
	r.cmd = text
	d.t.Logf("%s (text) $ %s\n(exit %d)\n%s%s", page, text, r.code, clip(r.out), clip(r.serr))
	return r
}

func (d *docShell) shell(script string, env []string) docResult {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "ip", "netns", "exec", d.l.RouterNetNS(), "sh", "-c", script)
	c.Dir = d.dir
	c.Env = append(append([]string{}, d.env...), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	var out, serr bytes.Buffer
	c.Stdout, c.Stderr = &out, &serr
	err := c.Run()
	r := docResult{out: out.String(), serr: serr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		d.t.Fatalf("sh -c %q: %v", script, err)
	}
	if ctx.Err() != nil {
		d.t.Fatalf("sh -c %q: not done within 3 minutes", script)
	}
	return r
}

// expect fails unless r exited with code and its output holds every want.
func (d *docShell) expect(r docResult, code int, wants ...string) bool {
	d.t.Helper()
	ok := r.code == code
	if !ok {
		d.t.Errorf("%s: exit %d, want %d", r.cmd, r.code, code)
	}
	for _, w := range wants {
		if !strings.Contains(r.out+r.serr, w) {
			d.t.Errorf("%s: output lacks %q", r.cmd, w)
			ok = false
		}
	}
	return ok
}

// mustExpect is expect for a step the rest depends on.
func (d *docShell) mustExpect(r docResult, code int, wants ...string) {
	d.t.Helper()
	if !d.expect(r, code, wants...) {
		d.t.FailNow()
	}
}

// checkAllRun fails for each line of the pages that the docs scenario
// should have run and did not.
func (d *docShell) checkAllRun() {
	d.t.Helper()
	n := 0
	for k, dls := range d.lines {
		if docsScenarioLines[k] && !d.ran[k] {
			d.t.Errorf("%s:%d: %q was not run", dls[0].Page, dls[0].Line, dls[0].Text)
		}
		if d.ran[k] {
			n += len(dls)
		}
	}
	d.t.Logf("ran %d documented command lines of %v", n, docPages)
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n[...]\n" + s[len(s)-2000:]
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
