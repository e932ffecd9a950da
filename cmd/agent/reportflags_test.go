package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func parseReportFlags(t *testing.T, args ...string) (reportFlags, error) {
	t.Helper()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f reportFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f, f.validate()
}

func TestReportFlagsDefaults(t *testing.T) {
	f, err := parseReportFlags(t)
	if err != nil || !f.enabled || f.condition || f.events || f.policy.Heartbeat != 2*time.Minute || f.policy.MinInterval != time.Minute || f.policy.MaxFindings != 20 {
		t.Fatalf("defaults %+v, err %v", f, err)
	}
}

func TestReportFlagsRefuseBadValues(t *testing.T) {
	for args, want := range map[string]string{
		"--node-report-heartbeat=1s":                                   "--node-report-heartbeat must be at least 10s",
		"--node-report-min-interval=5m":                                "must not exceed --node-report-heartbeat",
		"--node-report-max-findings=1000":                              "--node-report-max-findings must be between 0 and 200",
		"--node-report=false --node-condition":                         "need --node-report",
		"--node-report=false --node-events --node-report-heartbeat=1s": "need --node-report",
	} {
		_, err := parseReportFlags(t, strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", args, err, want)
		}
	}
	if _, err := parseReportFlags(t, "--node-report=false", "--node-report-heartbeat=1s"); err != nil {
		t.Errorf("the publisher's settings are checked while it is off: %v", err)
	}
}
