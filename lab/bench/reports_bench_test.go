package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/lab/labenv"
)

var nodeReportsGVR = schema.GroupVersionResource{Group: "netdrift.io", Version: "v1alpha1", Resource: "nodereports"}

const (
	simNodes    = 5000
	simHB       = 2 * time.Minute  // --node-report-heartbeat's default
	simMin      = 60 * time.Second // --node-report-min-interval's default
	simWorkers  = 16
	phaseLength = 60 * time.Second
)

// TestBenchReports (make bench-reports; root): a one-node lab without agents, the NodeReport
// CRD, 5,000 simulated reports created, then written at the policy's rates of a rollout
// (healthy: 5 % of the nodes with changing findings; worst: every node's findings change),
// then as fast as 16 writers go; LISTs of all 5,000 after the healthy and the worst phase;
// and, as the yardstick, 5,000 Node Leases renewed at the worst case's rate. The API
// server's and etcd's CPU and RSS over each window from /proc.
func TestBenchReports(t *testing.T) {
	if os.Getenv("NETDRIFT_BENCH_REPORTS") != "1" {
		t.Skip("set NETDRIFT_BENCH_REPORTS=1 (make bench-reports)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("make bench-reports needs root (the lab's network namespaces)")
	}
	l := startReportsLab(t)
	cfg := l.RESTConfig()
	cfg.QPS, cfg.Burst = 1e6, 1e6 // the agents' writes are not one client's: no client-side limit
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, dyn)
	api, etcd := procPID(t, l, "kube-apiserver"), procPID(t, l, "etcd")
	w := &simWriter{dyn: dyn, revs: make([]int, simNodes)}
	var rows, lists []string
	run := func(name string, rate float64, d time.Duration, n int, write func(int) error) {
		p := measureWrites(t, api, etcd, func() phaseResult { return w.run(rate, d, n, write) })
		rows = append(rows, p.row(name, rate))
		t.Log(rows[len(rows)-1])
	}
	healthy, worst := WriteLoad(simNodes, simNodes/20, simHB, simMin), WriteLoad(simNodes, simNodes, simHB, simMin)
	run("create 5,000 reports (16 writers, no pacing)", 0, 0, simNodes, w.report(false))
	run("healthy rollout: 5 % of the nodes' findings change", healthy, phaseLength, 0, w.report(false))
	lists = append(lists, listAll(t, cfg, api, "healthy: 1 node in 20 lists 1-20 findings")...)
	run("worst case: every node's findings change", worst, phaseLength, 0, w.report(true))
	run("capacity: worst-case reports (16 writers, no pacing)", 0, 20*time.Second, 0, w.report(true))
	lists = append(lists, listAll(t, cfg, api, "worst: every node lists 1-20 findings")...)
	// The kubelets' Node Lease renewals (an Update of the whole Lease) at the worst case's
	// rate: the yardstick of docs/architecture.md, measured on the same server.
	lw := newLeaseWriter(t, l)
	run("create 5,000 Leases (16 writers, no pacing)", 0, 0, simNodes, lw.create)
	run("Lease renewals at the worst case's rate", worst, phaseLength, 0, lw.renew)
	out := "| phase | target writes/s | achieved writes/s | errors | write p50 / p99 | kube-apiserver CPU (per write) | etcd CPU | kube-apiserver RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		strings.Join(rows, "\n") + "\n\n| LIST of all 5,000 reports | latency: median of 5 (min, max) | bytes | kube-apiserver CPU per LIST | kube-apiserver RSS (peak) |\n| --- | --- | --- | --- | --- |\n" +
		strings.Join(lists, "\n") + "\n"
	t.Log("\n" + out)
	if p := os.Getenv("BENCH_REPORTS_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func startReportsLab(t *testing.T) *labenv.Lab {
	prefix := os.Getenv("NETDRIFT_LAB_PREFIX")
	if prefix == "" {
		prefix = "bench"
	}
	name := prefix + "rep"
	dir := labenv.DefaultDir(name)
	if left := labenv.Leftovers(name, dir); len(left) > 0 {
		if err := labenv.Down(name, dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := labenv.EnsureBinaries(labenv.DefaultBinDir(), os.Stderr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := labenv.Start(ctx, labenv.Options{Name: name, Dir: dir, Nodes: 1, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("lab stop: %v", err)
		}
	})
	return l
}

func installCRD(t *testing.T, dyn dynamic.Interface) {
	b, err := os.ReadFile(filepath.Join(labenv.ModuleDir(), "..", "deploy", "crds", "netdrift.io_nodereports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var u unstructured.Unstructured
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crds).Create(context.Background(), &u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := dyn.Resource(nodeReportsGVR).List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("nodereports not served: %v", err)
		}
	}
}

// procPID finds the lab's process by command name.
func procPID(t *testing.T, l *labenv.Lab, comm string) int {
	for _, pid := range l.PIDs() {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return pid
		}
	}
	t.Fatalf("no %s among the lab's processes", comm)
	return 0
}

// simWriter writes simulated reports by Server-Side Apply, as the agents do.
type simWriter struct {
	dyn  dynamic.Interface
	revs []int
	next int
	mu   sync.Mutex
}

type phaseResult struct {
	writes, errors int
	wall           time.Duration
	lat            []time.Duration
	firstErr       string
}

// run calls write for d at rate (0: as fast as the workers go), or n times when n > 0,
// on the nodes in turn.
func (w *simWriter) run(rate float64, d time.Duration, n int, write func(int) error) phaseResult {
	jobs := make(chan int)
	var res phaseResult
	var mu sync.Mutex
	var errs atomic.Int64
	var wg sync.WaitGroup
	for range simWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				err := write(i)
				lat := time.Since(t0)
				mu.Lock()
				res.lat = append(res.lat, lat)
				if err != nil {
					errs.Add(1)
					if res.firstErr == "" {
						res.firstErr = err.Error()
					}
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for k := 0; ; k++ {
		if (n > 0 && k == n) || (n == 0 && time.Since(start) >= d) {
			break
		}
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(k) / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
		}
		w.mu.Lock()
		i := w.next
		w.next = (w.next + 1) % simNodes
		w.mu.Unlock()
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	res.wall = time.Since(start)
	res.writes, res.errors = len(res.lat), int(errs.Load())
	return res
}

// report writes node i's next report revision.
func (w *simWriter) report(allChange bool) func(int) error {
	return func(i int) error {
		w.mu.Lock()
		w.revs[i]++
		rev := w.revs[i]
		w.mu.Unlock()
		body := SimReport(i, rev, SimFindings(i, rev, allChange), time.Now())
		force := true
		_, err := w.dyn.Resource(nodeReportsGVR).Patch(context.Background(), SimNode(i), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "netdrift-agent", Force: &force})
		return err
	}
}

// leaseWriter renews simulated nodes' Leases as kubelets do: an Update of the Lease last
// written, with a new renewTime.
type leaseWriter struct {
	cs     kubernetes.Interface
	mu     sync.Mutex
	leases []*coordinationv1.Lease
}

func newLeaseWriter(t *testing.T, l *labenv.Lab) *leaseWriter {
	cfg := l.RESTConfig()
	cfg.QPS, cfg.Burst = 1e6, 1e6
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &leaseWriter{cs: cs, leases: make([]*coordinationv1.Lease, simNodes)}
}

func (lw *leaseWriter) create(i int) error {
	holder, secs := SimNode(i), int32(40)
	now := metav1.NowMicro()
	got, err := lw.cs.CoordinationV1().Leases("kube-node-lease").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: SimNode(i)},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &now},
	}, metav1.CreateOptions{})
	lw.mu.Lock()
	lw.leases[i] = got
	lw.mu.Unlock()
	return err
}

func (lw *leaseWriter) renew(i int) error {
	lw.mu.Lock()
	cur := lw.leases[i].DeepCopy()
	lw.mu.Unlock()
	now := metav1.NowMicro()
	cur.Spec.RenewTime = &now
	got, err := lw.cs.CoordinationV1().Leases("kube-node-lease").Update(context.Background(), cur, metav1.UpdateOptions{})
	if err == nil {
		lw.mu.Lock()
		lw.leases[i] = got
		lw.mu.Unlock()
	}
	return err
}

type measured struct {
	phaseResult
	apiCPU, etcdCPU time.Duration
	apiRSS          int64
}

func measureWrites(t *testing.T, api, etcd int, f func() phaseResult) measured {
	a0, e0 := mustCPU(t, api), mustCPU(t, etcd)
	r := f()
	a1, e1 := mustCPU(t, api), mustCPU(t, etcd)
	mem, err := ReadMem(api)
	if err != nil {
		t.Fatal(err)
	}
	if r.errors > 0 {
		t.Errorf("%d of %d writes failed; first: %s", r.errors, r.writes, r.firstErr)
	}
	return measured{phaseResult: r, apiCPU: a1.Sub(a0).Self(), etcdCPU: e1.Sub(e0).Self(), apiRSS: mem.RSS}
}

func mustCPU(t *testing.T, pid int) CPU {
	c, err := ReadCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (m measured) row(name string, rate float64) string {
	sort.Slice(m.lat, func(i, j int) bool { return m.lat[i] < m.lat[j] })
	q := func(p float64) time.Duration {
		return m.lat[int(p*float64(len(m.lat)-1))].Round(100 * time.Microsecond)
	}
	target := "—"
	if rate > 0 {
		target = strconv.FormatFloat(rate, 'f', 1, 64)
	}
	pct := func(c time.Duration) string {
		return fmt.Sprintf("%.0f %% of a core", 100*c.Seconds()/m.wall.Seconds())
	}
	perWrite := fmt.Sprintf("%.1f ms", m.apiCPU.Seconds()*1000/float64(m.writes))
	return fmt.Sprintf("| %s | %s | %.1f (%d in %s) | %d | %s / %s | %s (%s) | %s | %d MiB |", name, target,
		float64(m.writes)/m.wall.Seconds(), m.writes, m.wall.Round(100*time.Millisecond), m.errors, q(0.5), q(0.99),
		pct(m.apiCPU), perWrite, pct(m.etcdCPU), m.apiRSS>>20)
}

// listAll LISTs every report five times (JSON, one request, as a responder's query does)
// and once in kubectl's Table form; latency, bytes and the API server's CPU per LIST.
func listAll(t *testing.T, cfg *rest.Config, api int, state string) []string {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{Group: "netdrift.io", Version: "v1alpha1"}
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, form := range []struct{ name, accept string }{
		{"JSON (one request, as a responder's query)", "application/json"},
		{"Table (kubectl get nodereports, unchunked)", "application/json;as=Table;v=v1;g=meta.k8s.io"},
	} {
		var lats []time.Duration
		var size int
		a0 := mustCPU(t, api)
		for range 5 {
			t0 := time.Now()
			body, err := rc.Get().Resource("nodereports").SetHeader("Accept", form.accept).DoRaw(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			lats = append(lats, time.Since(t0))
			size = len(body)
			if n := strings.Count(string(body), `"sim-node-`); n < simNodes {
				t.Fatalf("%s: %d reports in the answer, want %d", form.name, n, simNodes)
			}
		}
		cpu := mustCPU(t, api).Sub(a0).Self() / 5
		mem, err := ReadMem(api)
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
		rows = append(rows, fmt.Sprintf("| %s; %s | %s (%s, %s) | %.1f MiB | %s | %d MiB (%d MiB) |",
			state, form.name, lats[2].Round(time.Millisecond), lats[0].Round(time.Millisecond), lats[4].Round(time.Millisecond),
			float64(size)/(1<<20), cpu.Round(time.Millisecond), mem.RSS>>20, mem.HWM>>20))
	}
	return rows
}
