package labenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// KubeletPort is where each node's nodestream serves the kubelet's
// streaming port-forward endpoint; the Node objects advertise it
// (status.daemonEndpoints.kubeletEndpoint.port) and the API server dials it
// for pods/portforward.
const KubeletPort = 10250

func nodestreamName(i int) string { return "nodestream/" + nodeName(i) }

func kubeletAddr(i int) string {
	return net.JoinHostPort(nodeIP(i).String(), strconv.Itoa(KubeletPort))
}

// The certificates between the API server and the kubelet stand-ins, as in
// a cluster: the API server's client certificate
// (--kubelet-client-certificate), which nodestream requires, and each
// node's serving certificate, which the API server verifies
// (--kubelet-certificate-authority); both signed by the lab CA.

// kubeletClientCert is the API server's kubelet client certificate.
func (l *Lab) kubeletClientCert() (cert, key string) {
	dir := filepath.Dir(l.pki.CACert)
	return filepath.Join(dir, "apiserver-kubelet-client.crt"), filepath.Join(dir, "apiserver-kubelet-client.key")
}

// nodestreamCert is node i's serving certificate.
func (l *Lab) nodestreamCert(i int) (cert, key string) {
	dir := filepath.Dir(l.pki.CACert)
	return filepath.Join(dir, nodeName(i)+"-kubelet.crt"), filepath.Join(dir, nodeName(i)+"-kubelet.key")
}

// writeKubeletPKI signs the API server's kubelet client certificate and
// every node's serving certificate (its node IP).
func (l *Lab) writeKubeletPKI() error {
	ca, caKey, err := readCA(l.pki)
	if err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	cert, key := l.kubeletClientCert()
	client := &x509.Certificate{
		SerialNumber: big.NewInt(100), Subject: pkix.Name{CommonName: "kube-apiserver-kubelet-client"},
		NotBefore: now, NotAfter: ca.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := signLeaf(cert, key, client, ca, caKey); err != nil {
		return err
	}
	for i := 1; i <= l.opts.Nodes; i++ {
		cert, key := l.nodestreamCert(i)
		serving := &x509.Certificate{
			SerialNumber: big.NewInt(int64(100 + i)), Subject: pkix.Name{CommonName: nodeName(i)},
			NotBefore: now, NotAfter: ca.NotAfter, IPAddresses: []net.IP{nodeIP(i)},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		if err := signLeaf(cert, key, serving, ca, caKey); err != nil {
			return err
		}
	}
	return nil
}

func readCA(f pkiFiles) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, nil, err
	}
	kb, err := os.ReadFile(f.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cp, _ := pem.Decode(cb)
	kp, _ := pem.Decode(kb)
	if cp == nil || kp == nil {
		return nil, nil, errors.New("lab CA: not PEM")
	}
	ca, err := x509.ParseCertificate(cp.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kp.Bytes)
	return ca, key, err
}

// startNodestreams starts lab/cmd/nodestream in every node's namespace and
// waits until each serves. Each serves node i's agent container's exec and
// logs (its log file, with the run boundaries noteAgentRun records).
func (l *Lab) startNodestreams(ctx context.Context) error {
	for i := 1; i <= l.opts.Nodes; i++ {
		cert, key := l.nodestreamCert(i)
		args := []string{filepath.Join(l.opts.BinDir, "nodestream"),
			"--listen=" + kubeletAddr(i), "--dial-ip=" + nodeIP(i).String(),
			"--tls-cert-file=" + cert, "--tls-key-file=" + key, "--client-ca-file=" + l.pki.CACert,
			"--agent-log=" + l.LogPath(agentName(i))}
		if l.opts.Agent != "" { // exec in the agent's container: its commands are the lab's netdrift
			args = append(args, "--agent-bin-dir="+filepath.Dir(l.opts.Agent))
		}
		if _, err := l.start(nodestreamName(i), nodeNS(l.opts.Name, i), args); err != nil {
			return err
		}
	}
	for i := 1; i <= l.opts.Nodes; i++ {
		if err := l.waitNodestream(ctx, i, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}

// waitNodestream GETs node i's /healthz as the API server will connect:
// the kubelet client certificate, the node's serving certificate verified.
func (l *Lab) waitNodestream(ctx context.Context, i int, timeout time.Duration) error {
	certFile, keyFile := l.kubeletClientCert()
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if ca, err := os.ReadFile(l.pki.CACert); err != nil || !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("lab CA %s: %v", l.pki.CACert, err)
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext:     DialContextIn(nodeNS(l.opts.Name, i)),
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for {
		p := l.proc(nodestreamName(i))
		if p == nil || !p.Alive() {
			return fmt.Errorf("nodestream on %s exited; see %s", nodeName(i), l.LogPath(nodestreamName(i)))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+kubeletAddr(i)+"/healthz", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/healthz: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nodestream on %s not serving after %s: %v", nodeName(i), timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
