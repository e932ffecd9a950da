package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/netdrift/netdrift/internal/api"
	"github.com/netdrift/netdrift/internal/capture"
	"github.com/netdrift/netdrift/internal/clusterfile"
	"github.com/netdrift/netdrift/internal/model"
	"github.com/netdrift/netdrift/internal/watch"
)

// snapshotFlags are the flags of `netdrift snapshot`.
type snapshotFlags struct {
	node     string
	clusters []string
	dumps    dumpFlags
	*output
}

func newSnapshotCommand() *cobra.Command {
	f := &snapshotFlags{}
	cmd := &cobra.Command{
		Use:     "snapshot (--iptables-save FILE | --nft-json FILE | ... | --netns NAME)",
		Short:   "print the observed datapath (from a dump or the live kernel)",
		Example: "  netdrift snapshot --iptables-save worker-a.iptables-save -o yaml",
		Args:    exactArgs(0),
	}
	fs := cmd.Flags()
	f.dumps.register(fs)
	fs.StringArrayVar(&f.clusters, "cluster", nil, "optional `FILE` of cluster objects, to name comment-less chains (repeatable)")
	fs.StringVar(&f.node, "node", "", "`NODE` name, with --cluster")
	f.output = addOutputFlag(cmd, allOutputs...)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := f.check(); err != nil {
			return err
		}
		return exit(runSnapshot(f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
	}
	return cmd
}

func runSnapshot(f *snapshotFlags, stdout, stderr io.Writer) int {
	desired := model.Desired{}
	if len(f.clusters) > 0 {
		cs, err := clusterfile.LoadFiles(f.clusters...)
		if err != nil {
			fmt.Fprintln(stderr, "netdrift snapshot:", err)
			return ExitError
		}
		desired = watch.Expected(f.node, cs)
	}
	obs, err := capture.Observe(context.Background(), f.dumps.Files, desired)
	if err != nil {
		fmt.Fprintln(stderr, "netdrift snapshot:", err)
		return ExitError
	}
	rep := snapshotReport(obs.Observed)
	if f.document() {
		f.print(stdout, rep)
		return ExitOK
	}
	printSnapshot(stdout, rep, f.wide())
	return ExitOK
}

// backendsWidth is the room the snapshot table gives a frontend's backends
// (-o wide: all of them).
const backendsWidth = 40

// printSnapshot is snapshot's table. A backend list longer than its column
// shows its first backends and how many more there are; wide shows all.
func printSnapshot(w io.Writer, rep api.SnapshotReport, wide bool) {
	fmt.Fprintf(w, "datapath %s  frontends %d\n", rep.Datapath, len(rep.Frontends))
	t := newTable("FRONTEND", "KIND", "PROTO", "SERVICE", "ACTION", "BACKENDS").limit(24, 13, 5, 28, 7, 0).names(0, 3).wide(wide)
	room, more := backendsWidth, 0
	if wide {
		room = 0
	}
	for _, f := range rep.Frontends {
		backends, n := listCell(f.Backends, room)
		more += n
		t.add(f.Frontend, f.FrontendKind, f.Protocol, strings.TrimPrefix(f.Service+":"+f.Port, ":"), f.Action, backends)
	}
	t.write(w)
	if more > 0 {
		fmt.Fprintln(w, moreNote(more, "more backends"))
	}
	for _, x := range rep.Warnings {
		fmt.Fprintln(w, "warning:", x)
	}
}

func snapshotReport(obs model.Observed) api.SnapshotReport {
	rep := api.SnapshotReport{Datapath: obs.Datapath, Frontends: []api.SnapshotFrontend{}, Warnings: obs.Warnings}
	for _, fe := range model.SortedFrontends(obs.Frontends) {
		v := obs.Frontends[fe]
		vv := api.VerdictOf(v)
		sf := api.SnapshotFrontend{Frontend: fe.String(), FrontendKind: string(fe.Kind), Family: string(fe.Family),
			Protocol: string(fe.Protocol), Action: vv.Action, Backends: vv.Backends}
		if !v.Service.IsZero() {
			sf.Service, sf.Port = v.Service.Service(), v.Service.Port
		}
		rep.Frontends = append(rep.Frontends, sf)
	}
	return rep
}
