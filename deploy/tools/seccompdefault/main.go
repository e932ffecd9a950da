// Command seccompdefault prints, as OCI runtime-spec JSON, the seccomp profile containerd
// applies under RuntimeDefault to a container with the given capabilities: containerd's own
// contrib/seccomp.DefaultProfile, at the version this module requires (go.mod). The
// deploy tests use it to check what the documentation says about containerd.
//
//	go run ./seccompdefault -caps CAP_NET_ADMIN,CAP_BPF
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	"github.com/opencontainers/runtime-spec/specs-go"
)

func main() {
	caps := flag.String("caps", "", "comma-separated capabilities (bounding set), e.g. CAP_BPF,CAP_PERFMON")
	flag.Parse()
	var set []string
	if *caps != "" {
		set = strings.Split(*caps, ",")
	}
	sp := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{
		Bounding: set, Effective: set, Permitted: set,
	}}}
	out := struct {
		Runtime string              `json:"runtime"`
		Version string              `json:"version"`
		Profile *specs.LinuxSeccomp `json:"profile"`
	}{"containerd", moduleVersion("github.com/containerd/containerd/v2"), seccomp.DefaultProfile(sp)}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}
