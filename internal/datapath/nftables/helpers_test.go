package nftables

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/testutil/fixture"
	"github.com/netdrift/netdrift/internal/testutil/golden"
)

// nftCluster is the part of a `kubectl get services -o json` List these
// tests need to build model.Hints.
type nftCluster struct {
	Items []struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			ClusterIPs  []string `json:"clusterIPs"`
			ExternalIPs []string `json:"externalIPs"`
			Ports       []struct {
				Name     string `json:"name"`
				Protocol string `json:"protocol"`
				Port     uint16 `json:"port"`
			} `json:"ports"`
		} `json:"spec"`
		Status struct {
			LoadBalancer struct {
				Ingress []struct {
					IP string `json:"ip"`
				} `json:"ingress"`
			} `json:"loadBalancer"`
		} `json:"status"`
	} `json:"items"`
}

// nftOptionsFromCluster builds reader options from a cluster List file.
func nftOptionsFromCluster(t testing.TB, path string) model.Hints {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c nftCluster
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	o := model.Hints{Frontends: map[model.Frontend]model.ServicePort{}}
	for _, it := range c.Items {
		if it.Kind != "Service" {
			continue
		}
		for _, p := range it.Spec.Ports {
			proto := model.Protocol(p.Protocol)
			if proto == "" {
				proto = model.TCP
			}
			sp := model.ServicePort{ServiceName: model.ServiceName{Namespace: it.Metadata.Namespace, Name: it.Metadata.Name}, Port: p.Name, Protocol: proto}
			o.ServicePorts = append(o.ServicePorts, sp)
			add := func(ip string, kind model.FrontendKind) {
				if a, err := netip.ParseAddr(ip); err == nil {
					o.Frontends[model.NewFrontend(a, p.Port, proto, kind)] = sp
				}
			}
			for _, ip := range it.Spec.ClusterIPs {
				add(ip, model.ClusterIP)
			}
			for _, ip := range it.Spec.ExternalIPs {
				add(ip, model.ExternalIP)
			}
			for _, in := range it.Status.LoadBalancer.Ingress {
				add(in.IP, model.LoadBalancer)
			}
		}
	}
	return o
}

// nftRender prints an Observed in a stable, reviewable text form.
func nftRender(obs model.Observed) string {
	var b strings.Builder
	fmt.Fprintf(&b, "datapath %s, %d frontends\n", obs.Datapath, len(obs.Frontends))
	for _, fe := range model.SortedFrontends(obs.Frontends) {
		v := obs.Frontends[fe]
		fmt.Fprintf(&b, "%s %s %s/%s %s %s", fe.Family, fe.Kind, fe, fe.Protocol, v.Service, v.Action)
		for _, be := range v.Backends {
			fmt.Fprintf(&b, " %s", be)
		}
		b.WriteString("\n")
		for _, e := range v.Evidence {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	for _, w := range obs.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}

// nftGolden compares got with testdata/<name>, rewriting it with -update.
func nftGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), []byte(got))
}

// nftLineDiff lists the lines only in want (-) or only in got (+).
func nftLineDiff(want, got string) string {
	w, g := map[string]int{}, map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		w[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		g[l]++
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if g[l] < w[l] {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if w[l] < g[l] {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

func nftReadTestdata(t testing.TB, name string) []byte {
	t.Helper()
	return fixture.Read(t, name)
}
