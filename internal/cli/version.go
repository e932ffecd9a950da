package cli

import (
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/netdrift/netdrift/internal/api"
)

// unknown stands for a build fact neither the linker flags nor the
// binary's build information give; dev for a version.
const (
	unknown    = "unknown"
	devVersion = "dev"
)

// BuildVersion is the build of this binary: the members set at link time
// (-ldflags -X, the Makefile's build target and the image build set all
// three), the others from the binary's build information (the module's
// version, the VCS revision and time `go build` stamps), else "dev" for
// the version and "unknown" for the others;
// the Go version and platform are the runtime's.
func BuildVersion(version, commit, date string) api.Version {
	v := api.Version{Version: version, Commit: commit, BuildDate: date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && v.Commit == "":
				v.Commit = s.Value
			case s.Key == "vcs.time" && v.BuildDate == "":
				v.BuildDate = s.Value
			}
		}
	}
	if v.Version == "" {
		v.Version = devVersion
	}
	for _, p := range []*string{&v.Commit, &v.BuildDate} {
		if *p == "" {
			*p = unknown
		}
	}
	return v
}

func newVersionCommand(v api.Version) *cobra.Command {
	cmd := &cobra.Command{Use: "version", Short: "print the version, commit, Go version and build date", Args: exactArgs(0)}
	out := addOutputFlag(cmd, outTable, outJSON, outYAML)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := out.check(); err != nil {
			return err
		}
		v = BuildVersion(v.Version, v.Commit, v.BuildDate)
		if out.document() {
			out.print(cmd.OutOrStdout(), v)
			return nil
		}
		printVersion(cmd.OutOrStdout(), v)
		return nil
	}
	return cmd
}

func printVersion(w io.Writer, v api.Version) {
	t := newTable("FIELD", "VALUE")
	t.add("version", v.Version)
	t.add("commit", v.Commit)
	t.add("go", v.GoVersion)
	t.add("built", v.BuildDate)
	t.add("platform", v.Platform)
	t.write(w)
}
