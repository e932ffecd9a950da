package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/netdrift/netdrift/lab/labenv"
	"github.com/netdrift/netdrift/lab/scenarios"
)

// prom is a client of the lab Prometheus through the runner's host-loopback forward.
func (d *demoRun) prom() *scenarios.Prom {
	return &scenarios.Prom{Base: "http://" + d.promAddr, HTTP: &http.Client{Timeout: 15 * time.Second}}
}

// waitAlert waits until name is firing (for a label value, if given) and prints it as
// Prometheus' /api/v1/alerts reports it.
func (d *demoRun) waitAlert(ctx context.Context, name, label, value string, timeout time.Duration) error {
	var raw []byte
	var found bool
	start := time.Now()
	err := poll(ctx, timeout, func() (bool, string) {
		as, b, err := d.prom().Alerts(ctx)
		if err != nil {
			return false, err.Error()
		}
		raw = b
		for _, a := range scenarios.Named(as, name, "firing") {
			if label == "" || a.Labels[label] == value {
				found = true
			}
		}
		return found, fmt.Sprintf("%s not firing", name)
	})
	if err != nil {
		return err
	}
	fmt.Printf("\n$ curl -s %s/api/v1/alerts   # %s, firing after %s of waiting\n", d.promURL(), name, time.Since(start).Round(time.Second))
	fmt.Println(alertExcerpt(raw, name, label, value))
	return nil
}

// alertExcerpt is the JSON of the named alerts within Prometheus' answer, indented.
func alertExcerpt(raw []byte, name, label, value string) string {
	var env struct {
		Data struct {
			Alerts []json.RawMessage `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return string(raw)
	}
	var out []string
	for _, a := range env.Data.Alerts {
		var probe scenarios.PromAlert
		if json.Unmarshal(a, &probe) != nil || probe.Labels["alertname"] != name || (label != "" && probe.Labels[label] != value) {
			continue
		}
		var b bytes.Buffer
		_ = json.Indent(&b, a, "  ", "  ")
		out = append(out, "  "+b.String())
	}
	return "{\"status\":\"success\",\"data\":{\"alerts\":[ ...\n" + strings.Join(out, ",\n") + "\n... ]}}"
}

func (d *demoRun) promURL() string { return "http://" + d.promAddr }

// firingNow prints every active alert, one line each.
func (d *demoRun) firingNow(ctx context.Context) {
	as, _, err := d.prom().Alerts(ctx)
	if err != nil {
		fmt.Printf("    (prometheus: %v)\n", err)
		return
	}
	fmt.Printf("    active alerts in Prometheus (%s%s/alerts):\n", d.promURL(), uiPath)
	for _, a := range as {
		var lbl []string
		for _, k := range []string{"node", "namespace", "service", "kind"} {
			if v := a.Labels[k]; v != "" {
				lbl = append(lbl, k+"="+v)
			}
		}
		fmt.Printf("      %-8s %-32s %s\n", a.State, a.Labels["alertname"], strings.Join(lbl, " "))
	}
}

// screenshot renders url with headless Chromium (Debian's package) into path.
func screenshot(ctx context.Context, path, u string, height int) error {
	tmp, err := os.MkdirTemp("", "netdrift-chromium")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--hide-scrollbars", "--user-data-dir="+tmp, fmt.Sprintf("--window-size=1400,%d", height), "--virtual-time-budget=10000",
		"--screenshot="+path, u)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("chromium: %v: %s", err, lastLines(string(out), 5))
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		return fmt.Errorf("chromium wrote no screenshot to %s", path)
	}
	return nil
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// uiPath is where Debian's prometheus serves its web UI (the classic one: its / redirects
// to /classic/graph).
const uiPath = "/classic"

// shootAlerts takes the alerts page while the alerts fire, and the firing alerts with
// their labels (ALERTS in the console tab).
func (d *demoRun) shootAlerts(ctx context.Context) {
	if d.shots == "" {
		return
	}
	firing := url.Values{"g0.expr": {`ALERTS{alertstate="firing"}`}, "g0.tab": {"1"}}
	for name, u := range map[string]string{
		"alerts.png":        d.promURL() + uiPath + "/alerts",
		"alerts-firing.png": d.promURL() + uiPath + "/graph?" + firing.Encode(),
	} {
		p := filepath.Join(d.shots, name)
		if err := screenshot(ctx, p, u, 1000); err != nil {
			fmt.Printf("    (screenshot: %v)\n", err)
			continue
		}
		d.taken = append(d.taken, p)
	}
}

// shootPanels graphs each dashboard panel's queries in Prometheus' own UI (all nodes,
// $__rate_interval = 1m) over the demo's time.
func (d *demoRun) shootPanels(ctx context.Context) error {
	if d.shots == "" {
		return nil
	}
	qs, err := scenarios.DashboardQueries(filepath.Join(labenv.ModuleDir(), "..", "deploy", "grafana-dashboard.json"))
	if err != nil {
		return err
	}
	var order []string
	byPanel := map[string][]string{}
	for _, q := range qs {
		if _, ok := byPanel[q.Panel]; !ok {
			order = append(order, q.Panel)
		}
		byPanel[q.Panel] = append(byPanel[q.Panel], scenarios.Substitute(q.Expr, "1m"))
	}
	rng := time.Since(d.started).Round(time.Minute) + time.Minute
	for i, panel := range order {
		v := url.Values{}
		for j, e := range byPanel[panel] {
			g := fmt.Sprintf("g%d.", j)
			v.Set(g+"expr", e)
			v.Set(g+"tab", "0")
			v.Set(g+"range_input", fmt.Sprintf("%dm", int(rng.Minutes())))
			v.Set(g+"stacked", "0")
		}
		p := filepath.Join(d.shots, fmt.Sprintf("panel-%02d-%s.png", i+1, slug(panel)))
		// Each graph of Prometheus' page is about 680 pixels high.
		if err := screenshot(ctx, p, d.promURL()+uiPath+"/graph?"+v.Encode(), 320+680*len(byPanel[panel])); err != nil {
			return fmt.Errorf("panel %q: %w", panel, err)
		}
		d.taken = append(d.taken, p)
	}
	return nil
}

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
