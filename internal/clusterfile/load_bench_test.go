package clusterfile

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/internal/watch"
)

// benchClusterFile is benchState as `kubectl get -o json` prints it (a v1
// List, 4-space indent).
func benchClusterFile(b *testing.B, services, perSvc, nodes int) []byte {
	cs := benchState(services, perSvc, nodes)
	var items []any
	for _, o := range cs.Services {
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		items = append(items, o)
	}
	for _, o := range cs.EndpointSlices {
		o.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
		items = append(items, o)
	}
	for _, o := range cs.Nodes {
		o.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		items = append(items, o)
	}
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "    ")
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkLoadCluster: a 1,000-service / 10,000-endpoint cluster file
// loaded by Load (the fast decoding) and by encoding/json alone
// (what Load falls back to on an error).
func BenchmarkLoadCluster(b *testing.B) {
	data := benchClusterFile(b, 1000, 10, 50)
	for _, c := range []struct {
		name string
		load func() (*watch.ClusterState, error)
	}{
		{"fast", func() (*watch.ClusterState, error) { return Load(data, "bench") }},
		{"encoding-json", func() (*watch.ClusterState, error) { return load(data, "bench", stdDecoding) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				cs, err := c.load()
				if err != nil || len(cs.EndpointSlices) != 1000 {
					b.Fatalf("%v", err)
				}
			}
		})
	}
}
