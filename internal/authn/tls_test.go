package authn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// peerCert serves cfg on loopback and returns the certificate a client is shown.
func peerCert(t *testing.T, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // closed below
	t.Cleanup(func() { srv.Close() })
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func TestSelfSignedIsServedAndVerifiesForItsHosts(t *testing.T) {
	now := time.Now()
	cfg, err := ServerTLSConfig(TLSOptions{Hosts: []string{"node-a", "10.0.0.1", "127.0.0.1"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x", cfg.MinVersion)
	}
	cert := peerCert(t, cfg)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, host := range []string{"node-a", "10.0.0.1", "127.0.0.1"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "node-b", Roots: pool}); err == nil {
		t.Error("certificate verifies for a host it does not name")
	}
	if !cert.NotBefore.Before(now) || cert.NotAfter.Before(now.Add(364*24*time.Hour)) {
		t.Errorf("validity %s .. %s", cert.NotBefore, cert.NotAfter)
	}
}

func writePair(t *testing.T, dir, host string) (string, string) {
	t.Helper()
	c, err := SelfSigned([]string{host}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCertificateFilesAreReloadedWhenRotated(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writePair(t, dir, "first.example")
	clk := &clock{t: time.Now()}
	cfg, err := ServerTLSConfig(TLSOptions{CertFile: certFile, KeyFile: keyFile, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if got := peerCert(t, cfg).DNSNames; len(got) != 1 || got[0] != "first.example" {
		t.Fatalf("served %v", got)
	}
	writePair(t, dir, "second.example")
	future := time.Now().Add(time.Minute) // mtimes differ even on coarse filesystems
	must(t, os.Chtimes(certFile, future, future))
	must(t, os.Chtimes(keyFile, future, future))
	if got := peerCert(t, cfg).DNSNames[0]; got != "first.example" {
		t.Fatalf("reloaded before the interval: %s", got)
	}
	clk.add(31 * time.Second)
	if got := peerCert(t, cfg).DNSNames[0]; got != "second.example" {
		t.Fatalf("after rotation served %s, want second.example", got)
	}
	// A broken rotation keeps the last good pair.
	must(t, os.WriteFile(keyFile, []byte("not a key"), 0o600))
	later := future.Add(time.Minute)
	must(t, os.Chtimes(keyFile, later, later))
	clk.add(31 * time.Second)
	if got := peerCert(t, cfg).DNSNames[0]; got != "second.example" {
		t.Fatalf("after a broken rotation served %s", got)
	}
}

func TestTLSOptionErrors(t *testing.T) {
	if _, err := ServerTLSConfig(TLSOptions{CertFile: "/x.crt"}); err == nil {
		t.Error("certificate without key accepted")
	}
	if _, err := ServerTLSConfig(TLSOptions{CertFile: "/nonexistent/x.crt", KeyFile: "/nonexistent/x.key"}); err == nil {
		t.Error("missing files accepted")
	}
	dir := t.TempDir()
	certFile, _ := writePair(t, dir, "a")
	bad := filepath.Join(dir, "bad.key")
	must(t, os.WriteFile(bad, []byte("garbage"), 0o600))
	if _, err := ServerTLSConfig(TLSOptions{CertFile: certFile, KeyFile: bad}); err == nil {
		t.Error("garbage key accepted")
	}
}
