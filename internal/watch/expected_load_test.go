package watch

import (
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// loadListFile reads a fixture cluster file (a v1 List as `kubectl get -o
// json` prints it) with encoding/json. The cluster-file loader itself lives in
// internal/clusterfile, which imports this package; this test-only reader
// keeps watch's tests free of that import.
func loadListFile(t testing.TB, path string) *ClusterState {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	cs := &ClusterState{}
	for _, raw := range list.Items {
		var head struct{ Kind string }
		if err := json.Unmarshal(raw, &head); err != nil {
			t.Fatal(err)
		}
		switch head.Kind {
		case "Service":
			cs.Services = append(cs.Services, decodeItem[corev1.Service](t, raw))
		case "EndpointSlice":
			cs.EndpointSlices = append(cs.EndpointSlices, decodeItem[discoveryv1.EndpointSlice](t, raw))
		case "Node":
			cs.Nodes = append(cs.Nodes, decodeItem[corev1.Node](t, raw))
		case "Pod":
			cs.Pods = append(cs.Pods, decodeItem[corev1.Pod](t, raw))
		}
	}
	return cs
}

func decodeItem[T any](t testing.TB, raw []byte) *T {
	t.Helper()
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
	return v
}
