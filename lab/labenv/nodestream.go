package labenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
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

// startNodestreams starts lab/cmd/nodestream in every node's namespace and
// waits until each accepts TLS connections.
func (l *Lab) startNodestreams(ctx context.Context) error {
	for i := 1; i <= l.opts.Nodes; i++ {
		args := []string{filepath.Join(l.opts.BinDir, "nodestream"),
			"--listen=" + kubeletAddr(i), "--dial-ip=" + nodeIP(i).String()}
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

func (l *Lab) waitNodestream(ctx context.Context, i int, timeout time.Duration) error {
	dial := DialContextIn(nodeNS(l.opts.Name, i))
	deadline := time.Now().Add(timeout)
	for {
		p := l.proc(nodestreamName(i))
		if p == nil || !p.Alive() {
			return fmt.Errorf("nodestream on %s exited; see %s", nodeName(i), l.LogPath(nodestreamName(i)))
		}
		c, err := dial(ctx, "tcp", kubeletAddr(i))
		if err == nil {
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a readiness probe of the lab's own server
			err = tc.HandshakeContext(ctx)
			tc.Close()
			if err == nil {
				return nil
			}
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
