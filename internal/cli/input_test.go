package cli

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

func gzipFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// pipeStdin makes a real pipe, fed with data, the standard input of the
// commands the test runs.
func pipeStdin(t *testing.T, data []byte) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	prev := os.Stdin
	os.Stdin = r
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = w.Write(data)
		w.Close()
	}()
	t.Cleanup(func() {
		os.Stdin = prev
		r.Close()
		<-done
	})
}

// TestDiffInputsStdinAndGzip: diff and snapshot give the same answer for
// a cluster file piped into --cluster - and a gzip'd dump (named like a
// plain one) as for the plain files; two flags given - are refused, exit 2.
func TestDiffInputsStdinAndGzip(t *testing.T) {
	cluster, dump := fixture.Path(t, "stale.cluster.json"), fixture.Path(t, "stale.worker-a.iptables-save")
	run := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code, _ := Run(Env{}, args, &out, &errb)
		return out.String(), errb.String(), code
	}
	want, wantErr, wantCode := run("diff", "--node", "worker-a", "--cluster", cluster, "--iptables-save", dump)
	if wantCode != ExitFindings || !strings.Contains(want, "findings") {
		t.Fatalf("plain files: exit %d, stdout %q, stderr %q", wantCode, want, wantErr)
	}
	gzDump := gzipFile(t, "worker-a.iptables-save", fixture.Read(t, "stale.worker-a.iptables-save"))
	pipeStdin(t, fixture.Read(t, "stale.cluster.json"))
	got, gotErr, code := run("diff", "--node", "worker-a", "--cluster", "-", "--iptables-save", gzDump)
	if code != wantCode || got != want || gotErr != wantErr {
		t.Fatalf("--cluster - and a gzip'd dump: exit %d, stdout\n%s\nstderr %q; want exit %d and\n%s", code, got, gotErr, wantCode, want)
	}

	wantSnap, _, _ := run("snapshot", "--iptables-save", dump)
	pipeStdin(t, fixture.Read(t, "stale.worker-a.iptables-save"))
	if got, errs, code := run("snapshot", "--iptables-save", "-"); code != ExitOK || got != wantSnap {
		t.Fatalf("snapshot --iptables-save -: exit %d, stderr %q, stdout\n%s\nwant\n%s", code, errs, got, wantSnap)
	}

	pipeStdin(t, fixture.Read(t, "stale.cluster.json"))
	out, errs, code := run("diff", "--node", "worker-a", "--cluster", "-", "--iptables-save", "-")
	if code != ExitError || out != "" ||
		errs != "netdrift diff: --iptables-save -: standard input is already the input of --cluster -: at most one flag may be - (save the other input to a file)\n" {
		t.Fatalf("two flags on standard input: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestDiffRefusesEmptyClusterOnStdin: a cluster file refused by the checks
// is read again to name the mistake; on standard input that second read
// gets the same bytes, and the refusal names standard input.
func TestDiffRefusesEmptyClusterOnStdin(t *testing.T) {
	pipeStdin(t, []byte(`{"apiVersion":"v1","kind":"List","items":[]}`))
	var out, errb bytes.Buffer
	code, _ := Run(Env{}, []string{"diff", "--node", "worker-a", "--cluster", "-", "--iptables-save", fixture.Path(t, "worker-a.iptables-save")}, &out, &errb)
	if code != ExitError || out.Len() != 0 || !strings.HasPrefix(errb.String(), "netdrift diff: - (standard input) holds no Services and no EndpointSlices") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
