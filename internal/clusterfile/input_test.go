package clusterfile

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdrift/netdrift/internal/testutil/fixture"
)

// gzipped compresses data as `gzip` does.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeBytes(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// withStdin makes a real pipe the process's standard input for the test,
// fed with data by a writer that closes it at the end.
func withStdin(t *testing.T, data []byte) {
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
		_, _ = w.Write(data) // fails once the reader is closed: a refused input
		w.Close()
	}()
	t.Cleanup(func() {
		os.Stdin = prev
		r.Close()
		<-done
	})
}

// TestReadInputGzip: a gzip'd cluster file and dump are read as the plain
// ones are, whatever their names (by magic bytes); a YAML cluster file too.
func TestReadInputGzip(t *testing.T) {
	plain := fixture.Read(t, "cluster.json")
	gz := writeBytes(t, "cluster.json", gzipped(t, plain)) // a .json name: content decides
	got, err := ReadInput(gz, "--cluster")
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("gzip'd cluster.json: %d bytes (want %d), %v", len(got), len(plain), err)
	}
	want, err := LoadFiles(fixture.Path(t, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := LoadFiles(gz)
	if err != nil || !reflect.DeepEqual(cs, want) {
		t.Fatalf("LoadFiles(gzip'd cluster.json): %v, or not the plain file's objects", err)
	}
	yml := "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\nspec: {clusterIP: 10.96.0.1}\n"
	cs, err = LoadFiles(writeBytes(t, "svc.yaml.gz", gzipped(t, []byte(yml))))
	if err != nil || len(cs.Services) != 1 || cs.Services[0].Spec.ClusterIP != "10.96.0.1" {
		t.Fatalf("gzip'd YAML: %v", err)
	}
	dump := fixture.Read(t, "worker-a.iptables-save")
	got, err = ReadInput(writeBytes(t, "dump", gzipped(t, dump)), "--iptables-save")
	if err != nil || !bytes.Equal(got, dump) {
		t.Fatalf("gzip'd iptables-save: %v", err)
	}
	// Two gzip members (`cat a.gz b.gz`) are one stream, as gunzip reads them.
	two := append(gzipped(t, []byte("first\n")), gzipped(t, []byte("second\n"))...)
	if got, err := ReadInput(writeBytes(t, "two.gz", two), "--iptables-save"); err != nil || string(got) != "first\nsecond\n" {
		t.Fatalf("two gzip members: %q, %v", got, err)
	}
}

// TestReadInputBadCompression: a damaged gzip file and other compressions
// are refused with a message naming the input and what to do.
func TestReadInputBadCompression(t *testing.T) {
	full := gzipped(t, fixture.Read(t, "cluster.json"))
	cut := writeBytes(t, "cut.gz", full[:len(full)/2])
	if _, err := ReadInput(cut, "--cluster"); err == nil || !strings.Contains(err.Error(), "--cluster "+cut+": gzip: ") ||
		!strings.Contains(err.Error(), "truncated or damaged") {
		t.Fatalf("truncated gzip: %v", err)
	}
	zst := writeBytes(t, "dump", []byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	if _, err := ReadInput(zst, "--nft-json"); err == nil ||
		err.Error() != "--nft-json "+zst+" is compressed with zstd: decompress it first (gzip is read as it is)" {
		t.Fatalf("zstd: %v", err)
	}
}

// TestReadInputGzipBomb: the limit applies to the decompressed bytes: a
// small gzip file that inflates past it is refused, naming the limit, and
// reading stops at the limit.
func TestReadInputGzipBomb(t *testing.T) {
	t.Setenv(MaxInputEnv, "1")
	bomb := gzipped(t, make([]byte, 64<<20)) // 64 MiB of zeros, about 64 KiB compressed
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed: not under the limit, the test would prove nothing", len(bomb))
	}
	p := writeBytes(t, "bomb.json", bomb)
	start := time.Now()
	_, err := ReadInput(p, "--cluster")
	if err == nil || err.Error() != "--cluster "+p+": larger than 1 MiB once decompressed, the input limit (not a capture? set "+MaxInputEnv+"=<MiB> to raise it)" {
		t.Fatalf("gzip bomb: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing the bomb took %v: it was inflated past the limit", d)
	}
	at := gzipped(t, bytes.Repeat([]byte("x"), 1<<20)) // exactly the limit once decompressed
	if b, err := ReadInput(writeBytes(t, "at.gz", at), "--cluster"); err != nil || len(b) != 1<<20 {
		t.Fatalf("gzip at the limit: %d bytes, %v", len(b), err)
	}
	withStdin(t, bomb)
	if _, err := ReadInput("-", "--nft-json"); err == nil || !strings.Contains(err.Error(), "--nft-json - (standard input): larger than 1 MiB once decompressed") {
		t.Fatalf("gzip bomb on standard input: %v", err)
	}
}

// TestReadInputStdin: "-" reads standard input (a real pipe), gzip'd or
// not; the same flag reading it again gets the same bytes (Check's second
// read); another flag, or --cluster - twice, is refused.
func TestReadInputStdin(t *testing.T) {
	plain := fixture.Read(t, "cluster.json")
	withStdin(t, gzipped(t, plain))
	cs, err := LoadFiles("-")
	if err != nil || len(cs.EndpointSlices) == 0 {
		t.Fatalf("LoadFiles(-): %v", err)
	}
	if again, err := ReadInput("-", "--cluster"); err != nil || !bytes.Equal(again, plain) {
		t.Fatalf("second read by --cluster: %d bytes, %v", len(again), err)
	}
	_, err = ReadInput("-", "--nft-json")
	if want := "--nft-json -: standard input is already the input of --cluster -: at most one flag may be - (save the other input to a file)"; err == nil || err.Error() != want {
		t.Fatalf("second flag on standard input: %v, want %q", err, want)
	}
	if _, err := LoadFiles("-", fixture.Path(t, "cluster.json"), "-"); err == nil || !strings.Contains(err.Error(), "--cluster - given more than once") {
		t.Fatalf("--cluster - twice: %v", err)
	}

	withStdin(t, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns\n"))
	if _, err := LoadFiles("-"); err == nil || !strings.HasPrefix(err.Error(), "- (standard input): ") {
		t.Fatalf("bad YAML on standard input: %v, want it named", err)
	}
}

// TestReadInputStdinDevice: standard input that is a device (a terminal,
// /dev/null) is refused before reading, saying to pipe the capture in.
func TestReadInputStdinDevice(t *testing.T) {
	dev, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	prev := os.Stdin
	os.Stdin = dev
	defer func() { os.Stdin = prev }()
	if _, err := ReadInput("-", "--cluster"); err == nil || !strings.Contains(err.Error(), "standard input is a terminal or a device") ||
		!strings.Contains(err.Error(), "pipe the capture in") {
		t.Fatalf("device on standard input: %v", err)
	}
}
