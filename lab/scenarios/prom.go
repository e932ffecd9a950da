package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Prom is a client of Prometheus' HTTP API (v1) as the lab's Prometheus
// serves it.
type Prom struct {
	Base string
	HTTP *http.Client
}

// PromAlert is an alert of /api/v1/alerts.
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// PromSeries is a series of a query result (vector or matrix).
type PromSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`  // vector: [time, "value"]
	Values [][]any           `json:"values"` // matrix
}

func (p *Prom) get(ctx context.Context, path string, q url.Values, data any) ([]byte, error) {
	u := p.Base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return nil, fmt.Errorf("%s: %s", path, env.Error)
	}
	return body, json.Unmarshal(env.Data, data)
}

// Alerts returns the active (pending and firing) alerts and the raw JSON
// Prometheus answered.
func (p *Prom) Alerts(ctx context.Context) ([]PromAlert, []byte, error) {
	var d struct {
		Alerts []PromAlert `json:"alerts"`
	}
	raw, err := p.get(ctx, "/api/v1/alerts", nil, &d)
	return d.Alerts, raw, err
}

// Query runs an instant query.
func (p *Prom) Query(ctx context.Context, expr string) ([]PromSeries, error) {
	var d struct {
		Result []PromSeries `json:"result"`
	}
	_, err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &d)
	return d.Result, err
}

// QueryRange runs a range query from start to end.
func (p *Prom) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]PromSeries, error) {
	var d struct {
		Result []PromSeries `json:"result"`
	}
	_, err := p.get(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}, &d)
	return d.Result, err
}

// Named returns the alerts called name in the given state ("" = any).
func Named(as []PromAlert, name, state string) []PromAlert {
	var out []PromAlert
	for _, a := range as {
		if a.Labels["alertname"] == name && (state == "" || a.State == state) {
			out = append(out, a)
		}
	}
	return out
}
