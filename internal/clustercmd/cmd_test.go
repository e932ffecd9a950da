package clustercmd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/netdrift/netdrift/internal/report"
)

// apiServer answers the two LISTs the commands make, and records the
// requests' paths and queries.
func apiServer(t *testing.T, nodes []string, reports []report.NodeReport, seen *[]string) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*seen = append(*seen, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/nodes":
			items := []map[string]any{}
			for _, n := range nodes {
				items = append(items, map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": map[string]any{"name": n}})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": map[string]any{}, "items": items})
		case "/apis/netdrift.io/v1alpha1/nodereports":
			_ = json.NewEncoder(w).Encode(report.NodeReportList{Items: reports})
		default:
			http.NotFound(w, r)
		}
	}))
}

func runCmd(t *testing.T, srv *httptest.Server, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand(Options{RESTConfig: func() (*rest.Config, error) { return &rest.Config{Host: srv.URL}, nil }, PluginVersion: "dev"})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestClusterDriftCommand(t *testing.T) {
	fresh := func(r report.NodeReport) report.NodeReport {
		r.Report.Heartbeat.Time = time.Now()
		return r
	}
	var seen []string
	srv := apiServer(t, []string{"node-1", "node-2"}, []report.NodeReport{
		fresh(nr("node-1", "v", 0, true)),
		fresh(nr("node-2", "v", 0, true, stale("default/web", "10.244.1.5:8080"))),
	}, &seen)
	defer srv.Close()
	out, err := runCmd(t, srv, "drift", "--backend", "10.244.1.5", "-l", "pool=a")
	if ExitCode(err) != ExitFindings {
		t.Fatalf("exit %d (%v), want %d; output:\n%s", ExitCode(err), err, ExitFindings, out)
	}
	if !strings.Contains(out, "node-2  stale_backend") || strings.Contains(out, "node-1  stale") ||
		!strings.Contains(out, "1 of 2 nodes with rules that still DNAT to 10.244.1.5; 1 clean; 0 unknown") {
		t.Errorf("output:\n%s", out)
	}
	if len(seen) != 2 || !strings.Contains(seen[0], "labelSelector=pool%3Da") || !strings.Contains(seen[1], "resourceVersion=0") {
		t.Errorf("requests %v: want one node LIST with the selector and one NodeReport LIST", seen)
	}
	out, err = runCmd(t, srv, "drift", "--backend", "10.244.1.6", "-o", "json")
	var d ClusterDrift
	if ExitCode(err) != ExitOK || json.Unmarshal([]byte(out), &d) != nil || d.Kind != "ClusterDrift" || d.Summary.Clean != 2 {
		t.Errorf("exit %d, json %s", ExitCode(err), out)
	}
}

func TestClusterStatusAndLagCommands(t *testing.T) {
	r := nr("node-1", "v1", 0, true)
	r.Report.Heartbeat.Time = time.Now()
	r.Report.Lag = report.Lag{Samples: 3, ByKind: map[string]report.Percentiles{"all": {Count: 3, P50: 0.2, P90: 0.5, P99: 0.9, Max: 0.9}}}
	var seen []string
	srv := apiServer(t, []string{"node-1", "node-2"}, []report.NodeReport{r}, &seen)
	defer srv.Close()
	out, err := runCmd(t, srv, "status", "-o", "yaml")
	if ExitCode(err) != ExitFindings || !strings.Contains(out, "kind: ClusterStatus") || !strings.Contains(out, "missing: 1") {
		t.Errorf("status -o yaml: exit %d (node-2 has no agent: want 1):\n%s", ExitCode(err), out)
	}
	out, err = runCmd(t, srv, "lag")
	if ExitCode(err) != ExitOK || !strings.Contains(out, "node-1  ok     3        200ms  500ms  900ms") || !strings.Contains(out, "no lag samples: node-2") {
		t.Errorf("lag: exit %d:\n%s", ExitCode(err), out)
	}
}

func TestClusterCommandRefusesBadInputBeforeAnyRequest(t *testing.T) {
	var seen []string
	srv := apiServer(t, nil, nil, &seen)
	defer srv.Close()
	for _, args := range [][]string{{"drift", "--backend", "web"}, {"status", "-o", "wide"}} {
		if _, err := runCmd(t, srv, args...); ExitCode(err) != ExitError || IsAnswer(err) {
			t.Errorf("%v: exit %d (%v), want an error", args, ExitCode(err), err)
		}
	}
	if len(seen) != 0 {
		t.Errorf("requests made: %v", seen)
	}
}

func TestClusterStatusWithoutCRD(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/nodes" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{},"items":[]}`))
			return
		}
		seen = append(seen, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	_, err := runCmd(t, srv, "status")
	if err == nil || !strings.Contains(err.Error(), "serves no nodereports.netdrift.io") {
		t.Fatalf("got %v", err)
	}
}
