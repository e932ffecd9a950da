package deploy_test

// Seccomp: what each container runtime's default profile (RuntimeDefault) does with bpf()
// and perf_event_open() for the agent's capabilities, read from that runtime's own profile
// (containers-common's seccomp.json on this machine, Docker's and moby's default.json and
// containerd's contrib/seccomp from their Go modules), and the Localhost profile the chart
// installs, generated from moby's default profile for exactly the manifest's capabilities.

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	localhostProfileFile = "helm/netdrift/files/seccomp-agent.json"
	installDoc           = "../docs/install.md"
	// The profile the Localhost one is generated from: moby's newest default profile.
	mobyProfilesModule = "github.com/moby/profiles/seccomp@v0.3.0"
	// Docker's daemon, whose vendor.mod names the moby/profiles it ships.
	dockerModule = "github.com/docker/docker@v28.5.2+incompatible"
	// The kernel the probe needs at least (CAP_BPF, CAP_PERFMON): rules for newer kernels
	// are not in the Localhost profile.
	minKernel = "5.8"
)

// dockerProfile is the profile format of Docker, moby and containers-common: rules may
// depend on capabilities, architectures and the kernel version.
type dockerProfile struct {
	DefaultAction   string `json:"defaultAction"`
	DefaultErrnoRet *uint  `json:"defaultErrnoRet,omitempty"`
	ArchMap         []struct {
		Arch    string   `json:"architecture"`
		SubArch []string `json:"subArchitectures"`
	} `json:"archMap"`
	Syscalls []dockerRule `json:"syscalls"`
}

type dockerRule struct {
	Names    []string          `json:"names"`
	Action   string            `json:"action"`
	ErrnoRet *uint             `json:"errnoRet,omitempty"`
	Args     []json.RawMessage `json:"args"`
	Includes struct {
		Caps      []string `json:"caps"`
		Arches    []string `json:"arches"`
		MinKernel string   `json:"minKernel"`
	} `json:"includes"`
	Excludes struct {
		Caps   []string `json:"caps"`
		Arches []string `json:"arches"`
	} `json:"excludes"`
}

// ociProfile is the OCI runtime-spec form (what runc applies, what a kubelet Localhost
// profile is, what containerd's DefaultProfile returns): no conditions but arguments.
type ociProfile struct {
	DefaultAction   string    `json:"defaultAction"`
	DefaultErrnoRet *uint     `json:"defaultErrnoRet,omitempty"`
	Architectures   []string  `json:"architectures"`
	Syscalls        []ociRule `json:"syscalls"`
}

type ociRule struct {
	Names    []string          `json:"names"`
	Action   string            `json:"action"`
	ErrnoRet *uint             `json:"errnoRet,omitempty"`
	Args     []json.RawMessage `json:"args,omitempty"`
}

func kernelAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := 0; i < len(w); i++ {
		var a, b int
		if i < len(h) {
			a, _ = strconv.Atoi(h[i])
		}
		b, _ = strconv.Atoi(w[i])
		if a != b {
			return a > b
		}
	}
	return true
}

// resolve applies a docker-format profile's conditions for a container with caps (CAP_*),
// on the GOARCH names in arches and a kernel of at least kernel, as Docker and
// containers-common do at container creation.
func resolve(p dockerProfile, caps, arches []string, kernel string) ociProfile {
	out := ociProfile{DefaultAction: p.DefaultAction, DefaultErrnoRet: p.DefaultErrnoRet}
	scmp := map[string]string{"amd64": "SCMP_ARCH_X86_64", "arm64": "SCMP_ARCH_AARCH64"}
	for _, a := range arches {
		for _, m := range p.ArchMap {
			if m.Arch == scmp[a] {
				out.Architectures = append(out.Architectures, m.Arch)
				out.Architectures = append(out.Architectures, m.SubArch...)
			}
		}
	}
	has := func(set, xs []string) (all, any bool) {
		all = true
		for _, x := range xs {
			in := slices.Contains(set, x)
			all, any = all && in, any || in
		}
		return all, any
	}
rules:
	for _, r := range p.Syscalls {
		if all, _ := has(caps, r.Includes.Caps); !all {
			continue
		}
		if _, any := has(caps, r.Excludes.Caps); any {
			continue
		}
		if len(r.Includes.Arches) > 0 {
			if _, any := has(arches, r.Includes.Arches); !any {
				continue
			}
		}
		if _, any := has(arches, r.Excludes.Arches); any {
			continue rules
		}
		if r.Includes.MinKernel != "" && !kernelAtLeast(kernel, r.Includes.MinKernel) {
			continue
		}
		out.Syscalls = append(out.Syscalls, ociRule{Names: r.Names, Action: r.Action, ErrnoRet: r.ErrnoRet, Args: r.Args})
	}
	return out
}

// verdict is what a resolved profile does with syscall: the action of its unconditional rule,
// "conditional" when only rules on arguments name it, else the default action.
func verdict(p ociProfile, syscall string) string {
	conditional := false
	for _, r := range p.Syscalls {
		if slices.Contains(r.Names, syscall) {
			if len(r.Args) == 0 {
				return r.Action
			}
			conditional = true
		}
	}
	if conditional {
		return "conditional"
	}
	return p.DefaultAction
}

// moduleDir downloads a Go module (mod@version) into the module cache and returns its
// directory (the module proxy must be reachable, as for any build here).
func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir() // outside any module
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if json.Unmarshal(out, &m) != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s %s", mod, err, m.Error, out)
	}
	return m.Dir
}

func readDockerProfile(t *testing.T, path string) dockerProfile {
	t.Helper()
	var p dockerProfile
	if err := json.Unmarshal(readFile(t, path), &p); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(p.Syscalls) < 20 {
		t.Fatalf("%s: %d rules: not a default profile", path, len(p.Syscalls))
	}
	return p
}

// agentCaps are the manifest's capabilities as CAP_* names.
func agentCaps(t *testing.T) []string {
	var caps []string
	for _, c := range manifestCaps(t) {
		caps = append(caps, "CAP_"+c)
	}
	return caps
}

// runtimeProfile is one runtime's RuntimeDefault, resolved for a capability set.
type runtimeProfile struct {
	// doc is how docs/install.md's seccomp table names it (the row must exist and say
	// verdict).
	doc     string
	resolve func(t *testing.T, caps []string) ociProfile
	// probeLoads: bpf() and perf_event_open() allowed with the manifest's capabilities.
	probeLoads bool
}

func runtimeProfiles() []runtimeProfile {
	fromFile := func(path func(t *testing.T) string) func(*testing.T, []string) ociProfile {
		return func(t *testing.T, caps []string) ociProfile {
			return resolve(readDockerProfile(t, path(t)), caps, []string{"amd64"}, minKernel)
		}
	}
	return []runtimeProfile{
		{
			doc: "podman, CRI-O: containers-common 0.50.1 (Debian 12)",
			resolve: fromFile(func(t *testing.T) string {
				const f = "/usr/share/containers/seccomp.json"
				if _, err := os.Stat(f); err != nil {
					t.Skipf("%s absent: install the Debian package golang-github-containers-common (podman's dependency)", f)
				}
				out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "golang-github-containers-common").Output()
				if err != nil || !strings.HasPrefix(string(out), "0.50.1") {
					t.Skipf("containers-common %q here, the table row is about 0.50.1: %v", out, err)
				}
				return f
			}),
			probeLoads: false,
		},
		{
			doc: "Docker 28.5.2 (moby/profiles/seccomp v0.1.0)",
			resolve: fromFile(func(t *testing.T) string {
				// The daemon's vendor.mod says which profile module it builds in.
				vendor := string(readFile(t, filepath.Join(moduleDir(t, dockerModule), "vendor.mod")))
				if !strings.Contains(vendor, "\tgithub.com/moby/profiles/seccomp v0.1.0\n") {
					t.Fatalf("%s does not vendor github.com/moby/profiles/seccomp v0.1.0", dockerModule)
				}
				return filepath.Join(moduleDir(t, "github.com/moby/profiles/seccomp@v0.1.0"), "default.json")
			}),
			probeLoads: true,
		},
		{
			doc:        "moby/profiles/seccomp v0.3.0 (newest)",
			resolve:    fromFile(func(t *testing.T) string { return filepath.Join(moduleDir(t, mobyProfilesModule), "default.json") }),
			probeLoads: true,
		},
		{
			doc: "containerd 2.4.2 (contrib/seccomp)",
			resolve: func(t *testing.T, caps []string) ociProfile {
				cmd := exec.Command("go", "run", "./seccompdefault", "-caps", strings.Join(caps, ","))
				cmd.Dir = "tools"
				cmd.Stderr = os.Stderr
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("tools/seccompdefault: %v", err)
				}
				var r struct {
					Version string
					Profile ociProfile
				}
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				if r.Version != "v2.4.2" {
					t.Fatalf("containerd %s in tools/go.mod; the table row is about v2.4.2", r.Version)
				}
				return r.Profile
			},
			probeLoads: true,
		},
	}
}

// Under each runtime's RuntimeDefault, with exactly the manifest's capabilities: does the
// RST probe's bpf()/perf_event_open() get through? docs/install.md says so per runtime.
func TestRuntimeDefaultSeccompProfiles(t *testing.T) {
	doc := string(readFile(t, installDoc))
	caps := agentCaps(t)
	for _, rt := range runtimeProfiles() {
		t.Run(rt.doc, func(t *testing.T) {
			p := rt.resolve(t, caps)
			for _, sc := range []string{"bpf", "perf_event_open"} {
				got := verdict(p, sc)
				if (got == "SCMP_ACT_ALLOW") != rt.probeLoads {
					t.Errorf("%s: %s under RuntimeDefault with %v; the table says probe loads = %v", sc, got, caps, rt.probeLoads)
				}
			}
			// Sanity: the profile is a real deny-by-default one.
			if verdict(p, "init_module") == "SCMP_ACT_ALLOW" || verdict(p, "read") != "SCMP_ACT_ALLOW" {
				t.Errorf("init_module %s, read %s: not a default profile", verdict(p, "init_module"), verdict(p, "read"))
			}
			want := "| " + rt.doc + " | no |"
			if rt.probeLoads {
				want = "| " + rt.doc + " | yes |"
			}
			if !strings.Contains(doc, want) {
				t.Errorf("%s has no seccomp table row %q", installDoc, want)
			}
			if !rt.probeLoads {
				// What this runtime wants instead: CAP_SYS_ADMIN, which the agent is not given.
				if p := rt.resolve(t, append(slices.Clone(caps), "CAP_SYS_ADMIN")); verdict(p, "bpf") != "SCMP_ACT_ALLOW" {
					t.Errorf("bpf refused even with CAP_SYS_ADMIN: %s", verdict(p, "bpf"))
				}
			}
		})
	}
}

// localhostProfile generates the chart's Localhost profile: moby's default profile resolved
// for the manifest's capabilities on amd64 and arm64 nodes (kernel >= 5.8), in the OCI form
// kubelets hand to every runtime. Docker's RuntimeDefault for this container, that is, made
// portable to the runtimes whose own default refuses bpf (containers-common).
func localhostProfile(t *testing.T) []byte {
	p := resolve(readDockerProfile(t, filepath.Join(moduleDir(t, mobyProfilesModule), "default.json")),
		agentCaps(t), []string{"amd64", "arm64"}, minKernel)
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestLocalhostSeccompProfile(t *testing.T) {
	want := localhostProfile(t)
	if *update {
		if err := os.WriteFile(localhostProfileFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readFile(t, localhostProfileFile)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from moby's default profile (%s) resolved for the manifest's capabilities: go test ./deploy -run %s -update", localhostProfileFile, mobyProfilesModule, t.Name())
	}
	var p ociProfile
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields() // no includes/excludes: runtimes would ignore them
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	for sc, want := range map[string]string{
		"bpf": "SCMP_ACT_ALLOW", "perf_event_open": "SCMP_ACT_ALLOW", "read": "SCMP_ACT_ALLOW",
		"init_module": "SCMP_ACT_ERRNO", "mount": "SCMP_ACT_ERRNO", "unshare": "SCMP_ACT_ERRNO",
		"setns": "SCMP_ACT_ERRNO", "kexec_load": "SCMP_ACT_ERRNO", "open_by_handle_at": "SCMP_ACT_ERRNO",
	} {
		if got := verdict(p, sc); got != want {
			t.Errorf("Localhost profile: %s %s, want %s", sc, got, want)
		}
	}
	if !slices.Contains(p.Architectures, "SCMP_ARCH_X86_64") || !slices.Contains(p.Architectures, "SCMP_ARCH_AARCH64") {
		t.Errorf("architectures %v", p.Architectures)
	}
}
