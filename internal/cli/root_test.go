package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// commandNames are every command of the netdrift front end NewRoot builds.
func commandNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, c := range NewRoot("netdrift", Env{}).Commands() {
		names = append(names, c.Name())
	}
	for _, want := range []string{"status", "drift", "explain", "lag", "rsts", "diff", "snapshot", "trace-rsts", "version"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Fatalf("no command %s among %v", want, names)
		}
	}
	return names
}

// TestHelpOnStdout: --help and -h of the program and of every command
// print on stdout and exit 0, with nothing on stderr; the usage lines
// carry no backquote-made placeholders such as "iptables -S".
func TestHelpOnStdout(t *testing.T) {
	for _, args := range append([][]string{{"--help"}, {"-h"}, {"help"}}, helpArgs(commandNames(t))...) {
		var out, errb bytes.Buffer
		if code := run(Env{}, args, &out, &errb); code != ExitOK || errb.Len() != 0 {
			t.Errorf("netdrift %s: exit %d, stderr %q", strings.Join(args, " "), code, errb.String())
		}
		if !strings.Contains(out.String(), "Usage:") {
			t.Errorf("netdrift %s: no usage on stdout: %q", strings.Join(args, " "), out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if garbled.MatchString(line) || strings.Contains(line, "`") {
				t.Errorf("netdrift %s: a flag's placeholder is more than a word: %q", strings.Join(args, " "), line)
			}
		}
	}
}

// garbled is a flag line whose value placeholder is several words (pflag
// takes a usage's first backquoted text as the placeholder): the flag, a
// word, one space, and more text before the usage's column.
var garbled = regexp.MustCompile(`^\s+(-\w, )?--[a-z0-9-]+ \S+ \S`)

func helpArgs(names []string) [][]string {
	var out [][]string
	for _, n := range names {
		out = append(out, []string{n, "--help"}, []string{n, "-h"})
	}
	return out
}

// TestUsageErrors: an unknown flag or command, a single-dash long flag, or
// a bare program name exit 2 with one line on stderr naming the problem and
// the help to read, and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--bogus"}, "netdrift status: unknown flag: --bogus (see 'netdrift status --help')"},
		{[]string{"drift", "-agent", "http://x"}, "netdrift drift: unknown shorthand flag: 'a' in -agent"},
		{[]string{"diff", "-o"}, "flag needs an argument"},
		{[]string{"statuss"}, `netdrift: unknown command "statuss" for "netdrift" did you mean: status (see 'netdrift --help')`},
		{[]string{"version", "-o", "wide"}, `-o must be table, json or yaml, not "wide"`},
	} {
		var out, errb bytes.Buffer
		code := run(Env{}, c.args, &out, &errb)
		if code != ExitError || out.Len() != 0 {
			t.Errorf("netdrift %s: exit %d, stdout %q", strings.Join(c.args, " "), code, out.String())
		}
		if !strings.Contains(errb.String(), c.want) || strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("netdrift %s: stderr %q, want one line with %q", strings.Join(c.args, " "), errb.String(), c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := run(Env{}, nil, &out, &errb); code != ExitError || out.Len() != 0 || !strings.Contains(errb.String(), "Usage:") {
		t.Errorf("netdrift alone: exit %d, stdout %q, stderr %q; want 2 and the usage on stderr", code, out.String(), errb.String())
	}
}

// TestYAMLIsJSON: -o yaml and -o json of every query command are the same
// document, with apiVersion netdrift.io/v1 and the command's kind.
func TestYAMLIsJSON(t *testing.T) {
	url := fixedAgent(t)
	for _, c := range []struct {
		args []string
		kind string
	}{
		{[]string{"status"}, "Status"}, {[]string{"drift"}, "Drift"}, {[]string{"explain", "shop/web"}, "ServiceView"},
		{[]string{"lag"}, "Lag"}, {[]string{"rsts"}, "RSTReport"}, {[]string{"version"}, "Version"},
	} {
		docs := map[string]map[string]any{}
		for _, format := range []string{"json", "yaml"} {
			var out, errb bytes.Buffer
			args := append(append([]string{}, c.args...), "-o", format)
			if c.kind != "Version" {
				args = append(args, "--agent", url)
			}
			if code := run(Env{}, args, &out, &errb); code > ExitFindings {
				t.Fatalf("netdrift %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
			}
			j := out.Bytes()
			if format == "yaml" {
				var err error
				if j, err = yaml.YAMLToJSON(j); err != nil {
					t.Fatalf("netdrift %s: %v", strings.Join(args, " "), err)
				}
			}
			var doc map[string]any
			if err := json.Unmarshal(j, &doc); err != nil {
				t.Fatalf("netdrift %s: %v: %s", strings.Join(args, " "), err, out.String())
			}
			if doc["apiVersion"] != "netdrift.io/v1" || doc["kind"] != c.kind {
				t.Errorf("netdrift %s: apiVersion %v kind %v, want netdrift.io/v1 %s", strings.Join(args, " "), doc["apiVersion"], doc["kind"], c.kind)
			}
			docs[format] = doc
		}
		if !reflect.DeepEqual(docs["json"], docs["yaml"]) {
			t.Errorf("netdrift %s: -o yaml is not -o json:\n%v\n%v", c.args[0], docs["yaml"], docs["json"])
		}
	}
}

// TestVersion: every member of version -o json is set, the linker's
// values win, and the table names them.
func TestVersion(t *testing.T) {
	env := Env{Version: BuildVersion("v1.2.3", "abc1234", "2026-12-05T14:00:00Z")}
	var out, errb bytes.Buffer
	if code := run(env, []string{"version", "-o", "json"}, &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v map[string]string
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"apiVersion", "kind", "version", "commit", "go_version", "build_date", "platform"} {
		if v[k] == "" {
			t.Errorf("version -o json: %s empty: %s", k, out.String())
		}
	}
	if v["version"] != "v1.2.3" || v["commit"] != "abc1234" || !strings.HasPrefix(v["go_version"], "go") {
		t.Errorf("version -o json: %v", v)
	}
	if b := BuildVersion("", "", ""); b.Version == "" || b.Commit == "" || b.BuildDate == "" {
		t.Errorf("no linker values: %+v has empty members", b)
	}
	out.Reset()
	if code := run(env, []string{"version"}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "abc1234") {
		t.Errorf("version: exit %d, %q", code, out.String())
	}
}

// TestCompletion: the completion scripts are generated, and -o, --mode
// complete their values.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := run(Env{}, []string{"completion", shell}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "netdrift") || out.Len() < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, out.Len(), errb.String())
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"status", "-o", ""}, []string{"table", "wide", "json", "yaml"}},
		{[]string{"trace-rsts", "--mode", ""}, []string{"auto", "tracepoint", "tp_btf", "fentry"}},
		{[]string{"version", "--output", "y"}, []string{"yaml"}},
	} {
		var out, errb bytes.Buffer
		run(Env{}, append([]string{"__complete"}, c.args...), &out, &errb)
		got := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(got) == 0 || !reflect.DeepEqual(got[:len(got)-1], c.want) {
			t.Errorf("complete %v: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestNodeNeedsReach: --node without the plugin's Reach is refused (exit
// 2, naming the plugin); with it, the command asks the URL Reach gives and
// releases it after.
func TestNodeNeedsReach(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(Env{}, []string{"drift", "--node", "worker-a"}, &out, &errb)
	want := "--node needs the kubectl plugin: kubectl netdrift drift --node NODE (or use --agent URL)"
	if code != ExitError || !strings.Contains(errb.String(), want) {
		t.Errorf("no Reach: exit %d, stderr %q, want 2 and %q", code, errb.String(), want)
	}
	url := fixedAgent(t)
	var asked []string
	released := 0
	env := Env{Reach: func(_ context.Context, node string) (string, func(), error) {
		asked = append(asked, node)
		return url, func() { released++ }, nil
	}}
	out.Reset()
	errb.Reset()
	if code := run(env, []string{"status", "--node", "worker-a", "-o", "json"}, &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), `"kind": "Status"`) || len(asked) != 1 || asked[0] != "worker-a" || released != 1 {
		t.Errorf("Reach: exit %d, asked %v, released %d, stderr %q", code, asked, released, errb.String())
	}
	env.Reach = func(context.Context, string) (string, func(), error) { return "", nil, errors.New("no such node") }
	errb.Reset()
	if code := run(env, []string{"lag", "--node", "worker-z"}, &out, &errb); code != ExitError ||
		!strings.Contains(errb.String(), "reaching the agent of node worker-z: no such node") {
		t.Errorf("Reach failing: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run(env, []string{"lag", "--node", "worker-z", "--agent", url}, &out, &errb); code != ExitError ||
		!strings.Contains(errb.String(), "give one") {
		t.Errorf("--node with --agent: exit %d, stderr %q", code, errb.String())
	}
}

// TestPluginRootName: the kubectl plugin's root, built under the name
// "kubectl netdrift", names itself so in usage lines and errors.
func TestPluginRootName(t *testing.T) {
	var out, errb bytes.Buffer
	root := NewRoot("kubectl netdrift", Env{})
	if code := Execute(context.Background(), root, []string{"status", "--help"}, &out, &errb); code != ExitOK ||
		!strings.Contains(out.String(), "kubectl netdrift status [flags]") {
		t.Errorf("status --help: exit %d: %s", code, out.String())
	}
	root = NewRoot("kubectl netdrift", Env{})
	if code := Execute(context.Background(), root, []string{"status", "--bogus"}, &out, &errb); code != ExitError ||
		!strings.HasPrefix(errb.String(), "kubectl netdrift status: unknown flag: --bogus (see 'kubectl netdrift status --help')") {
		t.Errorf("status --bogus: exit %d, stderr %q", code, errb.String())
	}
}

// TestWideIsATable: -o wide of every query command is a table with the
// default table's exit status and first line (the wide-only columns are
// the renderers').
func TestWideIsATable(t *testing.T) {
	url := fixedAgent(t)
	for _, args := range [][]string{{"status"}, {"drift"}, {"explain", "shop/web"}, {"lag"}, {"rsts"}} {
		var table, wide, errb bytes.Buffer
		tcode := run(Env{}, append(args, "--agent", url), &table, &errb)
		wcode := run(Env{}, append(args, "--agent", url, "-o", "wide"), &wide, &errb)
		first := strings.SplitN(table.String(), "\n", 2)[0]
		if wcode != tcode || first == "" || !strings.HasPrefix(wide.String(), first) || errb.Len() != 0 {
			t.Errorf("netdrift %s -o wide: exit %d (table %d), stderr %q, output %.80q", args[0], wcode, tcode, errb.String(), wide.String())
		}
	}
}
