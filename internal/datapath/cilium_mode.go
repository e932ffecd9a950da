package datapath

import (
	"context"

	"github.com/netdrift/netdrift/internal/datapath/cilium"
	"github.com/netdrift/netdrift/internal/model"
)

// OpenCilium builds the reader of Cilium's service maps pinned in bpffs
// ("" = the first bpf mount, as Cilium's tools find it).
func OpenCilium(bpffs string) Reader {
	return ciliumReader{Reader: &cilium.Reader{Config: cilium.Config{BPFFS: bpffs}}}
}

// OpenCiliumStamped is OpenCilium for the agent: the reader also dates
// the state it reads by the kernel's stamp of the last write to the maps
// (cilium.Config.WriteStamp: stamp says how), and reports a fallback when
// it cannot.
func OpenCiliumStamped(bpffs string, stamp cilium.StampMode) Reader {
	return ciliumReader{Reader: &cilium.Reader{Config: cilium.Config{BPFFS: bpffs, WriteStamp: stamp}}}
}

// DetectCilium reports whether Cilium's service maps are pinned in bpffs
// ("" = the first bpf mount) and says where. Detection reads no map.
func DetectCilium(bpffs string) (string, bool) {
	p, ok := cilium.Pinned(bpffs)
	if !ok {
		return "", false
	}
	return "Cilium service map " + p + " (kube-proxy replacement)", true
}

// ResolveWithCilium is Resolve, and when no kube-proxy state is found and
// --datapath is auto, Cilium's maps in bpffs: kube-proxy's rules are the
// datapath of record where both exist.
func ResolveWithCilium(ctx context.Context, flagMode, netns, bpffs string) (mode, reason string, err error) {
	mode, reason, err = Resolve(ctx, flagMode, netns)
	if err != nil || mode != model.ModeNone || (flagMode != "" && flagMode != "auto") {
		return mode, reason, err
	}
	if why, ok := DetectCilium(bpffs); ok {
		return model.ModeCilium, why, nil
	}
	return mode, reason, nil
}

// ciliumReader: Cilium's maps publish no change events; every read is a
// full, in-process read.
type ciliumReader struct {
	*cilium.Reader
	unevented
}

var _ interface {
	Reader
	FallbackReporter
} = ciliumReader{}

// Semantics returns how a mode's datapath departs from kube-proxy's
// semantics, as a function over each desired verdict, or nil when it does
// not (kube-proxy's own modes). serviceTopology is cilium-agent's
// enable-service-topology.
func Semantics(mode string, serviceTopology bool) func(model.Verdict) model.Verdict {
	if mode != model.ModeCilium {
		return nil
	}
	s := cilium.Semantics{ServiceTopology: serviceTopology}
	return func(v model.Verdict) model.Verdict { return cilium.Adjust(v, s) }
}
