package clusterfile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/textmatch"
)

const (
	svcItem   = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"demo"},"spec":{"clusterIP":"10.96.0.10","ports":[{"port":80}]}}`
	epItem    = `{"apiVersion":"v1","kind":"Endpoints","metadata":{"name":"web","namespace":"demo"},"subsets":[{"addresses":[{"ip":"10.244.1.10"}]}]}`
	sliceItem = `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1","namespace":"demo","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[]}`
	nodeItem  = `{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-a"}}`
)

func list(items ...string) string {
	return `{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[` + strings.Join(items, ",") + `]}`
}

// writeFiles writes each content to its own file and returns the paths.
func writeFiles(t *testing.T, contents ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for i, c := range contents {
		p := filepath.Join(dir, "c"+string(rune('0'+i))+".json")
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// TestCheckRefusals: every cluster-file mistake of issue 35 item 2 is
// refused with its own message; complete files pass.
func TestCheckRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string
		want  string // "" accepted
	}{
		{"complete", []string{list(svcItem, sliceItem, nodeItem)}, ""},
		{"slices_in_a_second_file", []string{list(svcItem, nodeItem), list(sliceItem)}, ""},
		{"svc_ep_and_slices", []string{list(svcItem, epItem, sliceItem, nodeItem)}, ""},
		{"services_only", []string{list(svcItem, nodeItem)}, "holds 1 Services but no EndpointSlices: run `kubectl get services,endpointslices,nodes -A -o json`"},
		{"legacy_endpoints", []string{list(svcItem, epItem, nodeItem)}, "holds 1 legacy Endpoints objects (`kubectl get svc,ep`?) and no EndpointSlices"},
		{"legacy_endpoints_yaml", []string{"apiVersion: v1\nkind: List\nitems:\n- " + svcItem + "\n- " + epItem + "\n"}, "legacy Endpoints"},
		{"single_object", []string{svcItem}, "is a single Service object, not the cluster's List (`kubectl get svc NAME -o json`?)"},
		{"empty_list", []string{list()}, "holds no Services and no EndpointSlices (an empty List?"},
		{"two_empty_lists", []string{list(), list()}, "hold no Services and no EndpointSlices"},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths := writeFiles(t, c.files...)
			cs, err := LoadFiles(paths...)
			if err != nil {
				t.Fatal(err)
			}
			err = Check(cs, paths)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused a complete file: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Fatalf("refusal is not one line: %q", err)
			}
		})
	}
}

func TestCheckNode(t *testing.T) {
	cs, err := Load([]byte(list(nodeItem, `{"apiVersion":"v1","kind":"Node","metadata":{"name":"worker-b"}}`,
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"ip-10-0-3-17.ec2.internal"}}`)), "f")
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{
		"worker-a":                  "",
		"worker-aa":                 "did you mean worker-a or worker-b?",
		"wroker-b":                  "did you mean worker-b?",
		"ip-10-0-3-71.ec2.internal": "did you mean ip-10-0-3-17.ec2.internal?",
		"master":                    "--node master is not among the cluster's 3 Nodes (kubectl get nodes lists them)",
	} {
		err := CheckNode(cs, node)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", node, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", node, err, want)
		}
	}
	empty, _ := Load([]byte(list(svcItem)), "f")
	if err := CheckNode(empty, "worker-a"); err == nil || !strings.Contains(err.Error(), "hold no Nodes") {
		t.Errorf("no Nodes: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"node-a", "node-a", 0}, {"node-a", "node-aa", 1}, {"wroker", "worker", 2}, {"kitten", "sitting", 3}} {
		if got := textmatch.Distance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// TestReadInputLimit: a file over the limit is refused before it is read,
// an endless pipe once the limit is reached, both naming the limit and the
// variable that raises it; a device is refused before any read; the
// variable is checked.
func TestReadInputLimit(t *testing.T) {
	t.Setenv(MaxInputEnv, "1")
	p := writeFiles(t, strings.Repeat("x", 1<<20+1))[0]
	if _, err := ReadInput(p, "--cluster"); err == nil || !strings.Contains(err.Error(), "larger than 1 MiB") ||
		!strings.Contains(err.Error(), MaxInputEnv+"=<MiB>") {
		t.Fatalf("file over the limit: %v", err)
	}
	ok := writeFiles(t, strings.Repeat("x", 1<<20))[0]
	if b, err := ReadInput(ok, "--cluster"); err != nil || len(b) != 1<<20 {
		t.Fatalf("file at the limit: %d bytes, %v", len(b), err)
	}
	start := time.Now()
	if _, err := ReadInput("/dev/zero", "--iptables-save"); err == nil ||
		err.Error() != "--iptables-save /dev/zero is a device, not a capture file: give the file the capture was saved to" {
		t.Fatalf("/dev/zero: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("/dev/zero took %v to refuse", d)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() { // endless, until the reader is closed
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				w.Close()
				return
			}
		}
	}()
	pipe := "/proc/self/fd/" + strconv.Itoa(int(r.Fd()))
	if _, err := ReadInput(pipe, "--nft-json"); err == nil || !strings.Contains(err.Error(), "--nft-json "+pipe+": larger than 1 MiB") {
		t.Fatalf("endless pipe: %v", err)
	}
	t.Setenv(MaxInputEnv, "lots")
	if _, err := ReadInput(ok, "--cluster"); err == nil || !strings.Contains(err.Error(), MaxInputEnv) {
		t.Fatalf("bad %s: %v", MaxInputEnv, err)
	}
}
