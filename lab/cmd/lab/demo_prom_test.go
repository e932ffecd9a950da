package main

import (
	"strings"
	"testing"
)

func TestAlertExcerpt(t *testing.T) {
	raw := []byte(`{"status":"success","data":{"alerts":[
{"labels":{"alertname":"NetdriftStaleDNAT","node":"node-2"},"state":"firing"},
{"labels":{"alertname":"NetdriftStaleDNAT","node":"node-3"},"state":"pending"},
{"labels":{"alertname":"NetdriftNodeLagging","node":"node-2"},"state":"firing"}]}}`)
	got := alertExcerpt(raw, "NetdriftStaleDNAT", "node", "node-2")
	if !strings.Contains(got, `"node": "node-2"`) || strings.Contains(got, "node-3") || strings.Contains(got, "NodeLagging") {
		t.Errorf("excerpt:\n%s", got)
	}
	if all := alertExcerpt(raw, "NetdriftStaleDNAT", "", ""); !strings.Contains(all, "node-3") {
		t.Errorf("no label filter: %s", all)
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Network programming latency p99 (T2-T0)": "network-programming-latency-p99-t2-t0",
		"CPU": "cpu", "  RSTs / service ": "rsts-service",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
