package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestAgentFlagsValidatedUpFront: every bad flag is refused before anything
// starts, with an error that names the flag.
func TestAgentFlagsValidatedUpFront(t *testing.T) {
	cases := [][]string{
		{"--datapath", "ebpf"},
		{"--rst-probe-mode", "kprobe"},
		{"--route-mode", "mesh"},
		{"--cluster-cidr", "10.244.0.0/16,nonsense"},
		{"--log-level", "loud"},
		{"--fast-poll", "0s"},
		{"--rst-window", "-1s"},
		{"--max-service-series", "0"},
		{"--max-procs", "-1"},
		{"--event-poll", "0s"},
		{"--full-audit-interval", "-1m"},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		args := append([]string{"agent", "--node-name", "n1", "--kubeconfig", "/nonexistent"}, c...)
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", c, code)
		}
		if !strings.Contains(errb.String(), c[0]) {
			t.Errorf("%v: error %q does not name the flag", c, errb.String())
		}
		if strings.Contains(errb.String(), "kubeconfig") {
			t.Errorf("%v: the kubeconfig was read before the flags were checked: %q", c, errb.String())
		}
	}
}
