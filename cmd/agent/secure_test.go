package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/netdrift/netdrift/internal/agent"
	"github.com/netdrift/netdrift/internal/agent/agenttest"
	"github.com/netdrift/netdrift/internal/api"
)

// nodeIP stands for the node's address: a loopback address other than
// 127.0.0.1 (which the certificate names anyway), so the test shows the
// Node's address reached the certificate.
const nodeIP = "127.0.0.2"

// fakeCluster is an API server that knows node n1 at nodeIP, accepts the
// token "t0k3n" and lets its user GET everything.
func fakeCluster() *fake.Clientset {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}}})
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		tr.Status.Authenticated = tr.Spec.Token == "t0k3n"
		tr.Status.User = authenticationv1.UserInfo{Username: "responder"}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = sar.Spec.User == "responder"
		return true, sar, nil
	})
	return cs
}

// TestSecureEndpointVerifiedByNodeIP: the agent's secure endpoint with its
// self-signed certificate, served on the node's address; the CLI verifies
// it with --agent-ca-file and sends --agent-token, and without the CA
// fails saying what to pass.
func TestSecureEndpointVerifiedByNodeIP(t *testing.T) {
	ln, err := net.Listen("tcp", nodeIP+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", nodeIP, err)
	}
	log := slog.New(slog.DiscardHandler)
	st := agenttest.State()
	apiHandler := api.NewHandler(func() agent.State { return st }, prometheus.NewRegistry(), api.Providers{})
	h, tlsCfg, err := secureHandler(context.Background(), agentFlags{nodeName: "n1"}, fakeCluster(), apiHandler, log)
	if err != nil {
		t.Fatal(err)
	}
	leaf := tlsCfg.Certificates[0].Leaf
	if !slices.ContainsFunc(leaf.IPAddresses, func(ip net.IP) bool { return ip.String() == nodeIP }) {
		t.Fatalf("certificate IP SANs %v lack the Node's InternalIP %s", leaf.IPAddresses, nodeIP)
	}
	// The no-CA case's refused handshake is expected: not logged.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ErrorLog: stdlog.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(tls.NewListener(ln, tlsCfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	ca := filepath.Join(t.TempDir(), "agent-ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String()
	for _, c := range []struct {
		name    string
		args    []string
		code    int
		stdout  string
		stderr  string
		nothing bool // on stdout
	}{
		{"verified", []string{"--agent-ca-file", ca, "--agent-token", "t0k3n"}, 0, `"kind": "Status"`, "", false},
		{"no CA", []string{"--agent-token", "t0k3n"}, 2, "", "certificate signed by unknown authority (pass --agent-ca-file", true},
		{"bad token", []string{"--agent-ca-file", ca, "--agent-token", "wrong"}, 2, "", "401 Unauthorized", true},
		{"insecure", []string{"--agent-insecure-skip-tls-verify", "--agent-token", "t0k3n"}, 0, `"kind": "Status"`, "warning: --agent-insecure-skip-tls-verify", false},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"status", "-o", "json", "--agent", url}, c.args...)
		code := run(args, &out, &errb)
		if code != c.code || !strings.Contains(out.String(), c.stdout) || !strings.Contains(errb.String(), c.stderr) || c.nothing && out.Len() > 0 {
			t.Errorf("%s: exit %d, stdout %.80q, stderr %q; want exit %d, %q on stdout, %q on stderr", c.name, code, out.String(), errb.String(), c.code, c.stdout, c.stderr)
		}
	}
}

// TestTokenNotSentInTheClear: a token for a plain-http agent on another
// host is refused before anything is sent.
func TestTokenNotSentInTheClear(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"status", "--agent", "http://192.0.2.7:9760", "--agent-token", "t"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "in the clear") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
