package bench

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// nodeHeartbeatPatch is a strategic merge patch of a Node's status that
// moves its Ready condition's heartbeat to at: what a kubelet's periodic
// status report changes when nothing else did.
func nodeHeartbeatPatch(at time.Time) []byte {
	return fmt.Appendf(nil, `{"status":{"conditions":[{"type":"Ready","lastHeartbeatTime":%q}]}}`,
		at.UTC().Format(time.RFC3339))
}

// churnNodes patches one node's status heartbeat after the other, rate per
// second, until ctx is done, and returns how many patches were made and
// how many failed. Every Node watcher receives every patch; kube-proxy's
// Node watch selects its own node only.
func churnNodes(ctx context.Context, cs kubernetes.Interface, nodes []string, rate float64) (made, failed int) {
	if rate <= 0 || len(nodes) == 0 {
		return 0, 0
	}
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for k := 0; ; k++ {
		if wait := time.Until(start.Add(time.Duration(k) * interval)); wait > 0 {
			select {
			case <-ctx.Done():
				return made, failed
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			return made, failed
		}
		// Heartbeats are whole seconds: count up from now so every patch
		// changes the object.
		at := start.Add(time.Duration(k) * time.Second)
		_, err := cs.CoreV1().Nodes().Patch(ctx, nodes[k%len(nodes)], types.StrategicMergePatchType,
			nodeHeartbeatPatch(at), metav1.PatchOptions{}, "status")
		if ctx.Err() != nil { // cut by the window's end: not counted
			return made, failed
		}
		made++
		if err != nil {
			failed++
		}
	}
}
