package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// SnapshotFrontend is one observed frontend in `netdrift snapshot -o json`.
type SnapshotFrontend struct {
	Frontend     string   `json:"frontend"`
	FrontendKind string   `json:"frontend_kind"`
	Family       string   `json:"family"`
	Protocol     string   `json:"protocol"`
	Service      string   `json:"service,omitempty"`
	Port         string   `json:"port,omitempty"`
	Action       string   `json:"action"`
	Backends     []string `json:"backends,omitempty"`
}

// SnapshotReport is `netdrift snapshot -o json`.
type SnapshotReport struct {
	Datapath  string             `json:"datapath"`
	Frontends []SnapshotFrontend `json:"frontends"`
	Warnings  []string           `json:"warnings,omitempty"`
}

func runSnapshot(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var dumps dumpFlags
	var clusters multiFlag
	dumps.register(fs)
	fs.Var(&clusters, "cluster", "optional cluster objects, to name comment-less chains (repeatable)")
	node := fs.String("node", "", "node name, with --cluster")
	out := fs.String("o", "table", "output: table or json")
	if err := fs.Parse(args); err != nil {
		return exitError
	}
	if err := checkOutput(*out); err != nil {
		fmt.Fprintln(stderr, "netdrift snapshot:", err)
		return exitError
	}
	desired := model.Desired{}
	if len(clusters) > 0 {
		cs, err := watch.LoadClusterFiles(clusters...)
		if err != nil {
			fmt.Fprintln(stderr, "netdrift snapshot:", err)
			return exitError
		}
		desired = watch.Expected(*node, cs)
	}
	obs, err := capture.Observe(context.Background(), dumps.Files, desired)
	if err != nil {
		fmt.Fprintln(stderr, "netdrift snapshot:", err)
		return exitError
	}
	rep := snapshotReport(obs)
	if *out == "json" {
		printJSON(stdout, rep)
		return exitOK
	}
	fmt.Fprintf(stdout, "datapath %s  frontends %d\n", rep.Datapath, len(rep.Frontends))
	t := newTable("FRONTEND", "KIND", "PROTO", "SERVICE", "ACTION", "BACKENDS").limit(24, 13, 5, 28, 7, 40)
	for _, f := range rep.Frontends {
		t.add(f.Frontend, f.FrontendKind, f.Protocol, strings.TrimPrefix(f.Service+":"+f.Port, ":"), f.Action, strings.Join(f.Backends, ","))
	}
	t.write(stdout)
	for _, w := range rep.Warnings {
		fmt.Fprintln(stdout, "warning:", w)
	}
	return exitOK
}

func snapshotReport(obs model.Observed) SnapshotReport {
	rep := SnapshotReport{Datapath: obs.Datapath, Frontends: []SnapshotFrontend{}, Warnings: obs.Warnings}
	for _, fe := range model.SortedFrontends(obs.Frontends) {
		v := obs.Frontends[fe]
		vv := api.VerdictOf(v)
		sf := SnapshotFrontend{Frontend: fe.String(), FrontendKind: string(fe.Kind), Family: string(fe.Family),
			Protocol: string(fe.Protocol), Action: vv.Action, Backends: vv.Backends}
		if !v.Service.IsZero() {
			sf.Service, sf.Port = v.Service.Service(), v.Service.Port
		}
		rep.Frontends = append(rep.Frontends, sf)
	}
	return rep
}
