package api_test

import (
	"encoding/json"
	"testing"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/rst"
)

// TestRSTEventOf: an event keeps the watched side's namespace (the pod's,
// or a VIP's service's) and the service's bare name beside it; an event of
// no known service has neither service nor, for an unknown address, namespace.
func TestRSTEventOf(t *testing.T) {
	web := model.ServiceName{Namespace: "shop", Name: "web"}
	for _, c := range []struct {
		name string
		rec  rst.Record
		want string
	}{
		{"pod", rst.Record{Namespace: "shop", Pod: "web-1", Service: web},
			`{"namespace":"shop","pod":"web-1","service":"web"}`},
		{"vip", rst.Record{Service: model.ServiceName{Namespace: "kube-system", Name: "kube-dns"}},
			`{"namespace":"kube-system","service":"kube-dns"}`},
		{"pod of no service", rst.Record{Namespace: "shop", Pod: "orphan-1"}, `{"namespace":"shop","pod":"orphan-1"}`},
		{"unknown address", rst.Record{}, `{}`},
	} {
		ev := api.RSTEventOf(c.rec)
		b, err := json.Marshal(struct {
			Namespace string `json:"namespace,omitempty"`
			Pod       string `json:"pod,omitempty"`
			Service   string `json:"service,omitempty"`
		}{ev.Namespace, ev.Pod, ev.Service})
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, b, err, c.want)
		}
	}
}
