package deploy_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/netdrift/netdrift/internal/testutil/netnstest"
)

// These root tests prove the DaemonSet's capability list against the real kernel and tools:
// each reader the agent runs works with exactly the capabilities the manifest grants (as
// uid 0 with a bounding set of only those, which is what the container gets), and fails
// without each capability claimed for it. The container runtime's seccomp profile is not
// part of this (see docs/install.md).

func requireRoot(t *testing.T) {
	t.Helper()
	netnstest.RequireRoot(t, "creates a network namespace and drops capabilities with setpriv")
}

func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: install iptables, nftables, conntrack, util-linux, iproute2 (make deps)", tool)
		}
	}
}

// manifestCaps returns the capabilities the DaemonSet's container adds.
func manifestCaps(t *testing.T) []string {
	t.Helper()
	m := loadManifests(t)
	var caps []string
	for _, c := range m.ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities.Add {
		caps = append(caps, string(c))
	}
	return caps
}

// setprivArgs runs argv as uid 0 holding only caps (bounding set; no inheritable/ambient).
func setprivArgs(caps []string, argv ...string) []string {
	bset := "-all"
	for _, c := range caps {
		bset += ",+" + strings.ToLower(c)
	}
	return append([]string{"setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=" + bset, "--"}, argv...)
}

func without(caps []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(caps), func(c string) bool { return c == drop })
}

const kubeNAT = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -j RETURN
COMMIT
`

const kubeNAT6 = `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d fd00::10/128 -p tcp -m comment --comment "kube-system/kube-dns:dns-tcp cluster IP" -j RETURN
COMMIT
`

func TestDatapathReadersWorkWithExactlyTheManifestCapabilities(t *testing.T) {
	requireRoot(t)
	requireTools(t, "ip", "setpriv", "iptables-legacy-restore", "iptables-nft-restore", "ip6tables-legacy-restore",
		"ip6tables-nft-restore", "nft", "conntrack")
	caps := manifestCaps(t)
	ns := netnstest.New(t, "nd-deploy")
	netnstest.RunInput(t, ns, kubeNAT, "iptables-legacy-restore")
	netnstest.RunInput(t, ns, kubeNAT6, "ip6tables-legacy-restore")
	netnstest.RunInput(t, ns, kubeNAT, "iptables-nft-restore")
	netnstest.RunInput(t, ns, kubeNAT6, "ip6tables-nft-restore")
	netnstest.Run(t, ns, "nft", "add table ip kube-proxy; add chain ip kube-proxy services")

	readers := []struct {
		argv   []string
		marker string
		needs  []string
	}{
		{[]string{"iptables-legacy-save", "-t", "nat"}, "kube-system/kube-dns:dns-tcp", []string{"NET_ADMIN", "NET_RAW"}},
		{[]string{"ip6tables-legacy-save", "-t", "nat"}, "fd00::10", []string{"NET_ADMIN", "NET_RAW"}},
		{[]string{"iptables-nft-save", "-t", "nat"}, "kube-system/kube-dns:dns-tcp", []string{"NET_ADMIN"}},
		{[]string{"ip6tables-nft-save", "-t", "nat"}, "fd00::10", []string{"NET_ADMIN"}},
		{[]string{"nft", "-j", "list", "table", "ip", "kube-proxy"}, `"services"`, []string{"NET_ADMIN"}},
		{[]string{"conntrack", "-L"}, "flow entries have been shown", []string{"NET_ADMIN"}},
	}
	run := func(caps []string, argv []string) (string, error) {
		out, err := netnstest.Cmd(ns, setprivArgs(caps, argv...)...).CombinedOutput()
		return string(out), err
	}
	for _, r := range readers {
		t.Run(strings.Join(r.argv, " "), func(t *testing.T) {
			out, err := run(caps, r.argv)
			if err != nil || !strings.Contains(out, r.marker) {
				t.Fatalf("with %v: err %v, output lacks %q:\n%s", caps, err, r.marker, out)
			}
			for _, need := range r.needs {
				if out, err := run(without(caps, need), r.argv); err == nil && strings.Contains(out, r.marker) {
					t.Errorf("still reads without %s: the manifest's reason for it is wrong\n%s", need, out)
				}
			}
			if out, err := run(nil, r.argv); err == nil && strings.Contains(out, r.marker) {
				t.Errorf("reads with no capability at all:\n%s", out)
			}
		})
	}
}

// The RST probe's kernel side: a hash map, and a trivial program attached the three ways
// the probe may attach (tracepoint tcp/tcp_send_reset; kprobe and fentry on
// tcp_v4_send_reset, the fallbacks), in a child holding only the manifest's capabilities;
// and the change watcher's commit stamp, a socket filter on a NETLINK_NETFILTER socket.
// Attach methods this kernel cannot do even as full root are skipped, by name.
func TestBPFProbeAttachesWithExactlyTheManifestCapabilities(t *testing.T) {
	requireRoot(t)
	requireTools(t, "setpriv")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(caps []string, restrict bool) map[string]string {
		argv := []string{self, "-test.run=^$"}
		if restrict {
			argv = setprivArgs(caps, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), bpfHelperEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		res := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			status, rest, _ := strings.Cut(line, " ")
			name, msg, _ := strings.Cut(rest, ": ")
			if status == "ok" {
				msg = "ok"
			}
			res[name] = msg
		}
		return res
	}
	full := run(nil, false)
	var supported []string
	for _, m := range []string{"tracepoint", "kprobe", "fentry"} {
		if full[m] == "ok" {
			supported = append(supported, m)
		} else {
			t.Logf("kernel lacks %s attachment even as full root: %s", m, full[m])
		}
	}
	if len(supported) == 0 {
		t.Skip("this kernel supports none of the probe's attach methods")
	}
	caps := manifestCaps(t)
	with := run(caps, true)
	// The commit stamp's socket filter needs no attach method of the probe's:
	// it must load and attach with the manifest's capabilities wherever it
	// does as full root.
	always := []string{"map"}
	if full["socket-filter"] == "ok" {
		always = append(always, "socket-filter")
	} else {
		t.Logf("kernel lacks socket filters even as full root: %s", full["socket-filter"])
	}
	for _, m := range append(always, supported...) {
		if with[m] != "ok" {
			t.Errorf("%s with %v: %s", m, caps, with[m])
		}
	}
	for _, need := range []string{"BPF", "PERFMON"} {
		res := run(without(caps, need), true)
		for _, m := range supported {
			if res[m] == "ok" {
				t.Errorf("%s attaches without %s: the manifest's reason for it is wrong", m, need)
			}
		}
		t.Logf("without %s: %v", need, res)
	}
	t.Logf("with %v: %v (supported here: %v)", caps, with, supported)
}
