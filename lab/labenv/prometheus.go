package labenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PrometheusPort is where the lab's Prometheus listens on the router's
// bridge address.
const PrometheusPort = 9090

// kubeProxyMetricsPort is kube-proxy's default metrics port; the lab binds
// it on every address of the node namespace so the router can scrape it.
const kubeProxyMetricsPort = 10249

// DefaultRulesFile is the rules file deploy/ ships, which the lab's
// Prometheus loads unmodified.
func DefaultRulesFile() string {
	return filepath.Join(ModuleDir(), "..", "deploy", "prometheus", "netdrift.rules.yml")
}

func (o *Options) prometheusDefaults() error {
	if !o.Prometheus {
		return nil
	}
	if o.PrometheusBin == "" {
		o.PrometheusBin = "prometheus"
	}
	p, err := exec.LookPath(o.PrometheusBin)
	if err != nil {
		return fmt.Errorf("prometheus: %w (install the Debian package prometheus: make deps)", err)
	}
	o.PrometheusBin = p
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = 2 * time.Second
	}
	if o.ScrapeInterval < time.Second || o.ScrapeInterval%time.Second != 0 {
		return fmt.Errorf("scrape interval %s: want whole seconds, at least 1s", o.ScrapeInterval)
	}
	if o.RuleFiles == nil {
		o.RuleFiles = []string{DefaultRulesFile()}
	}
	for i, f := range o.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("rules file: %w", err)
		}
		o.RuleFiles[i] = abs
	}
	return nil
}

// prometheusConfig scrapes every node's agent (job netdrift) and kube-proxy
// (job kube-proxy), each target labelled with its node as the ServiceMonitor
// of deploy/ labels it, and evaluates the rule files as often as it scrapes.
func (l *Lab) prometheusConfig() string {
	iv := l.opts.ScrapeInterval.String()
	var b strings.Builder
	fmt.Fprintf(&b, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\n  evaluation_interval: %s\n", iv, iv, iv)
	b.WriteString("rule_files:\n")
	for _, f := range l.opts.RuleFiles {
		fmt.Fprintf(&b, "  - %s\n", strconv.Quote(f))
	}
	b.WriteString("scrape_configs:\n")
	job := func(name string, port int) {
		fmt.Fprintf(&b, "  - job_name: %s\n    static_configs:\n", name)
		for i := 1; i <= l.opts.Nodes; i++ {
			fmt.Fprintf(&b, "      - targets: [%q]\n        labels: {node: %q}\n",
				net.JoinHostPort(nodeIP(i).String(), strconv.Itoa(port)), nodeName(i))
		}
	}
	if l.opts.Agent != "" {
		job("netdrift", AgentPort)
	}
	job("kube-proxy", kubeProxyMetricsPort)
	return b.String()
}

// startPrometheus writes the configuration and starts Prometheus in the
// router namespace (its own data directory under the lab's), then waits
// until it is ready.
func (l *Lab) startPrometheus(ctx context.Context) error {
	dir := filepath.Join(l.opts.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(l.prometheusConfig()), 0o644); err != nil {
		return err
	}
	if _, err := l.start("prometheus", routerNS(l.opts.Name), []string{l.opts.PrometheusBin,
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + l.prometheusAddr(),
		"--log.level=warn",
	}); err != nil {
		return err
	}
	c := l.PrometheusHTTPClient()
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, l.PrometheusURL()+"/-/ready", nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if p := l.proc("prometheus"); p != nil && !p.Alive() {
			return fmt.Errorf("prometheus exited; see %s", p.Log)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("prometheus not ready: %v (log %s)", err, filepath.Join(l.opts.Dir, "logs", "prometheus.log"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *Lab) prometheusAddr() string {
	return net.JoinHostPort(routerIP, strconv.Itoa(PrometheusPort))
}

// PrometheusURL is the lab Prometheus' address on the lab bridge (reach it
// with PrometheusHTTPClient, or from the host through ServeHostPrometheus).
func (l *Lab) PrometheusURL() string { return "http://" + l.prometheusAddr() }

// PrometheusHTTPClient is an HTTP client whose connections are opened in
// the router namespace.
func (l *Lab) PrometheusHTTPClient() *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext: DialContextIn(routerNS(l.opts.Name)), DisableKeepAlives: true}}
}

// ScrapeInterval is the lab Prometheus' scrape and rule evaluation interval.
func (l *Lab) ScrapeInterval() time.Duration { return l.opts.ScrapeInterval }

// StopAgent terminates node's netdrift agent (SIGTERM, SIGKILL after 5 s);
// StartAgent starts it again.
func (l *Lab) StopAgent(node string) error {
	i, err := l.index(node)
	if err != nil {
		return err
	}
	p := l.proc(agentName(i))
	if p == nil {
		return fmt.Errorf("no agent on %q", node)
	}
	p.stop(5 * time.Second)
	return nil
}
