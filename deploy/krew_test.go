package deploy_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is the part of krew's Plugin manifest (v1alpha2) netdrift uses.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Bin    string `json:"bin"`
}

var (
	krewName    = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	krewSemver  = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	krewSHA256  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	wantTargets = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}
)

// krewProblems checks krew's documented manifest rules (apiVersion and kind,
// a plugin name without the kubectl- prefix matching the file name, a
// v-prefixed semantic version, a short description, and per platform an
// os/arch selector, an https archive URI, a lowercase hex sha256 and a bin
// name) plus netdrift's own: the four release platforms, once each. A
// sha256 may be its platform's @SHA256_os_arch@ placeholder when
// placeholders is true, or when the platform is not in built.
func krewProblems(p krewPlugin, file string, placeholders bool, built map[string]bool) []string {
	var bad []string
	add := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		add("apiVersion/kind %s/%s", p.APIVersion, p.Kind)
	}
	if n := p.Metadata.Name; !krewName.MatchString(n) || strings.HasPrefix(n, "kubectl-") || n+".yaml" != filepath.Base(file) {
		add("name %q: lowercase words joined by '-', no kubectl- prefix, and the file name", n)
	}
	if !krewSemver.MatchString(p.Spec.Version) && !(placeholders && p.Spec.Version == "@VERSION@") {
		add("version %q: want vMAJOR.MINOR.PATCH", p.Spec.Version)
	}
	if d := p.Spec.ShortDescription; d == "" || strings.Contains(d, "\n") || len(d) > 50 {
		add("shortDescription %q: one line, at most 50 characters", d)
	}
	if u, err := url.Parse(p.Spec.Homepage); err != nil || u.Scheme != "https" {
		add("homepage %q", p.Spec.Homepage)
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		target := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		if len(pl.Selector.MatchLabels) != 2 || seen[target] {
			add("platform %d: selector %v: want os and arch, each pair once", i, pl.Selector.MatchLabels)
		}
		seen[target] = true
		archive := "kubectl-netdrift_" + strings.ReplaceAll(target, "/", "_") + ".tar.gz"
		if u, err := url.Parse(pl.URI); err != nil || u.Scheme != "https" || path.Base(u.Path) != archive {
			add("platform %s: uri %q: want https://.../%s", target, pl.URI, archive)
		}
		placeholder := "@SHA256_" + strings.ReplaceAll(target, "/", "_") + "@"
		if !krewSHA256.MatchString(pl.SHA256) && !((placeholders || !built[target]) && pl.SHA256 == placeholder) {
			add("platform %s: sha256 %q: want 64 lowercase hex digits", target, pl.SHA256)
		}
		if pl.Bin != "kubectl-netdrift" {
			add("platform %s: bin %q", target, pl.Bin)
		}
	}
	for _, t := range wantTargets {
		if !seen[t] {
			add("no platform %s", t)
		}
	}
	return bad
}

func readKrew(t *testing.T, file string) krewPlugin {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return p
}

func TestKrewManifestTemplate(t *testing.T) {
	p := readKrew(t, "krew/netdrift.yaml")
	for _, e := range krewProblems(p, "krew/netdrift.yaml", true, nil) {
		t.Error(e)
	}
	// The checks catch what they should.
	broken := p
	broken.Spec.Platforms = append([]krewPlatform{}, p.Spec.Platforms[:3]...)
	broken.Spec.Platforms[0].SHA256 = "ABC"
	broken.Metadata.Name = "kubectl-netdrift"
	if got := krewProblems(broken, "krew/netdrift.yaml", true, nil); len(got) != 3 {
		t.Errorf("a broken manifest: %d problems %v, want 3 (name, sha256, a missing platform)", len(got), got)
	}
}

// make krew-archive builds the linux/amd64 tarball and a manifest whose
// linux/amd64 sha256 is the tarball's and whose bin is in it.
func TestKrewArchive(t *testing.T) {
	bin := t.TempDir()
	cmd := exec.Command("make", "-s", "-C", "..", "krew-archive", "BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make krew-archive: %v\n%s", err, out)
	}
	file := filepath.Join(bin, "krew", "netdrift.yaml")
	p := readKrew(t, file)
	for _, e := range krewProblems(p, file, false, map[string]bool{"linux/amd64": true}) {
		t.Error(e)
	}
	for _, pl := range p.Spec.Platforms {
		if pl.Selector.MatchLabels["os"] != "linux" || pl.Selector.MatchLabels["arch"] != "amd64" {
			continue
		}
		tgz := filepath.Join(bin, "krew", path.Base(pl.URI))
		sum, names, err := tarball(tgz)
		if err != nil {
			t.Fatal(err)
		}
		if sum != pl.SHA256 {
			t.Errorf("manifest sha256 %s, tarball %s", pl.SHA256, sum)
		}
		if strings.Join(names, ",") != pl.Bin {
			t.Errorf("tarball holds %v, want only %s", names, pl.Bin)
		}
		if !strings.Contains(pl.URI, "/"+p.Spec.Version+"/") {
			t.Errorf("uri %s does not name version %s", pl.URI, p.Spec.Version)
		}
	}
}

// tarball returns a .tar.gz's sha256 and the names of its regular files.
func tarball(file string) (string, []string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b)
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", nil, err
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if h.Mode&0o111 == 0 {
				return "", nil, fmt.Errorf("%s: %s is not executable", file, h.Name)
			}
			names = append(names, h.Name)
		}
	}
	return hex.EncodeToString(sum[:]), names, nil
}
