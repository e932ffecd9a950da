package imagetest

// TestImageUnderKubelet (make test-image-kubelet, root): a lab node run by a real kubelet
// (v1.37 from the lab module) with a real containerd (2.x, from its Go module) and runc;
// `helm install` of the chart makes the DaemonSet's pod Running and Ready there, and its
// agent reports the node, with the RST probe up under the chart's Localhost seccomp profile.
//
// The kubelet and containerd run in the lab node's network namespace and in a mount
// namespace of their own, so that every mount they make (volumes, overlay snapshots,
// sandboxes) disappears with it. Three sysctls the kubelet insists on setting host-wide
// (vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1) are shown to it, in that
// mount namespace only, as files holding those values: the host's settings are not changed.
// The lab runs no scheduler: the test binds the DaemonSet's pod, as kube-scheduler would.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/netdrift/netdrift/lab/labenv"
)

const realNode = "node-r" // the kubelet's node name (the stand-in serves node-<n> only)

func TestImageUnderKubelet(t *testing.T) {
	image, helm := requirements(t)
	bins := os.Getenv("NETDRIFT_KUBELET_BINS")
	if bins == "" {
		t.Skip("NETDRIFT_KUBELET_BINS unset: run make test-image-kubelet")
	}
	for _, b := range []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			t.Fatalf("%s: %v (make lab-kubelet-bins)", b, err)
		}
	}
	start := time.Now()
	ctx := context.Background()
	cgroups := cgroupDirs()
	t.Cleanup(func() {
		if r := removeNewCgroups(cgroups); len(r) > 0 {
			t.Logf("removed %d empty cgroup directories the runtimes left", len(r))
		}
	})
	scratch := t.TempDir()
	run := filepath.Join(scratch, "run")
	for _, d := range []string{"containerd", "kubelet", "pod-logs", "cni", "fakesys"} {
		if err := os.MkdirAll(filepath.Join(run, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	name := fmt.Sprintf("kub%d", os.Getpid()%100000)
	l, err := labenv.Start(ctx, labenv.Options{Name: name, Nodes: 1, ProxyMode: "iptables", ServiceAccountAdmission: true, Logf: t.Logf})
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Errorf("lab stop: %v", err)
		}
	})
	hostCtx, stopHost := context.WithCancel(ctx)
	t.Cleanup(stopHost)
	if _, err := l.ServeHostAPI(hostCtx); err != nil {
		t.Fatal(err)
	}
	node := l.Nodes()[0]

	// The mount namespace: a holder process, and the sysctl views.
	holder := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "infinity")
	if err := holder.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	hpid := holder.Process.Pid
	mntns := fmt.Sprintf("/proc/%d/ns/mnt", hpid)
	deadline := time.Now().Add(5 * time.Second)
	for {
		self, _ := os.Readlink("/proc/self/ns/mnt")
		their, _ := os.Readlink(mntns)
		if their != "" && their != self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("unshare: no new mount namespace")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var procs []*exec.Cmd
	t.Cleanup(func() { teardown(t, bins, run, hpid, procs) })
	fake := map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}
	var binds []string
	for k, v := range fake {
		f := filepath.Join(run, "fakesys", strings.ReplaceAll(k, "/", "_"))
		if err := os.WriteFile(f, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		binds = append(binds, fmt.Sprintf("mount --bind %s /proc/sys/%s", f, k))
	}
	if out, err := exec.Command("nsenter", "--mount="+mntns, "sh", "-c", strings.Join(binds, " && ")).CombinedOutput(); err != nil {
		t.Fatalf("sysctl views: %v %s", err, out)
	}
	inNode := func(logName string, argv ...string) *exec.Cmd {
		t.Helper()
		logf, err := os.Create(filepath.Join(run, logName+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nsenter", append([]string{"--mount=" + mntns, "--net=/run/netns/" + node.NetNS, "--"}, argv...)...)
		cmd.Env = append(os.Environ(), "PATH="+bins+":"+os.Getenv("PATH"))
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(logf.Name())
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("%s log (tail):\n%s", logName, b)
			}
		})
		return cmd
	}

	// containerd, CRI with runc; images from podman's storage.
	sock := filepath.Join(run, "containerd", "containerd.sock")
	conf := filepath.Join(run, "containerd.toml")
	if err := os.WriteFile(conf, []byte(containerdConfig(run, sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	inNode("containerd", filepath.Join(bins, "containerd"), "--config", conf)
	ctr := func(args ...string) ([]byte, error) {
		return exec.Command(filepath.Join(bins, "ctr"), append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	}
	eventually(t, 30*time.Second, "containerd up", func() (bool, string) {
		out, err := ctr("version")
		return err == nil, string(out)
	})
	pause := "localhost/netdrift-lab/pause:1"
	pauseDir := filepath.Join(scratch, "pause")
	if err := os.MkdirAll(pauseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The sandbox ("pause") image: the Debian base with sleep as its process (no registry).
	base := "docker.io/library/debian:trixie-slim"
	if err := os.WriteFile(filepath.Join(pauseDir, "Containerfile"), []byte("FROM "+base+"\nENTRYPOINT [\"/bin/sleep\", \"infinity\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := podman("build", "--network", "host", "--pull-never", "-t", pause, pauseDir); err != nil {
		t.Fatalf("pause image: %v %s", err, out)
	}
	for _, img := range []string{pause, image} {
		tar := filepath.Join(scratch, "img.tar")
		if out, err := podman("save", "--format", "docker-archive", "-o", tar, img); err != nil {
			t.Fatalf("podman save %s: %v %s", img, err, out)
		}
		if out, err := ctr("images", "import", tar); err != nil {
			t.Fatalf("ctr import %s: %v %s", img, err, out)
		}
		os.Remove(tar)
	}
	if out, err := ctr("images", "tag", "--force", pause, "registry.k8s.io/pause:3.10.2"); err != nil {
		t.Fatalf("ctr tag: %v %s", err, out)
	}
	// The image as containerd names it (podman's short names are localhost/...).
	ref := image
	if !strings.Contains(strings.SplitN(ref, "/", 2)[0], ".") && !strings.HasPrefix(ref, "localhost/") {
		ref = "localhost/" + ref
	}

	// The kubelet.
	kubeletRoot := filepath.Join(run, "kubelet")
	kcfg := filepath.Join(run, "kubelet.yaml")
	if err := os.WriteFile(kcfg, []byte(kubeletConfig(run, sock, node.IP)), 0o644); err != nil {
		t.Fatal(err)
	}
	inNode("kubelet", filepath.Join(bins, "kubelet"), "--config", kcfg, "--kubeconfig", l.Kubeconfig(),
		"--root-dir", kubeletRoot, "--hostname-override", realNode, "--node-ip", node.IP, "--v=1")
	cs := l.Clientset()
	eventually(t, 60*time.Second, "node "+realNode+" registered by the kubelet", func() (bool, string) {
		_, err := cs.CoreV1().Nodes().Get(ctx, realNode, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})

	// helm install, as a user would.
	repo, tag := ref, "latest"
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	install := exec.Command(helm, "install", "netdrift", "../../deploy/helm/netdrift", "--namespace", "netdrift", "--create-namespace",
		"--kubeconfig", filepath.Join(l.Dir(), "kubeconfig-host"),
		"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "image.pullPolicy=Never",
		"--set", "seccompProfile.kubeletRootDir="+kubeletRoot,
		"--set", `nodeSelector.kubernetes\.io/hostname=`+realNode)
	out, err := install.CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install: %s", firstLines(string(out), 6))

	// No scheduler in the lab: bind the DaemonSet's pod to the kubelet's node.
	var pod *corev1.Pod
	eventually(t, 30*time.Second, "the DaemonSet creates a pod for "+realNode, func() (bool, string) {
		pods, err := cs.CoreV1().Pods("netdrift").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		pod = &pods.Items[0]
		return true, ""
	})
	if pod.Spec.NodeName == "" {
		err := cs.CoreV1().Pods("netdrift").Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: realNode},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("bind: %v", err)
		}
	}
	eventually(t, 120*time.Second, "pod Running and Ready (the kubelet's readiness probe)", func() (bool, string) {
		p, err := cs.CoreV1().Pods("netdrift").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
				return true, ""
			}
		}
		b, _ := yaml.Marshal(p.Status.ContainerStatuses)
		return false, fmt.Sprintf("phase %s\n%s", p.Status.Phase, b)
	})
	t.Logf("pod %s Running and Ready on %s %s after the test started", pod.Name, realNode, time.Since(start).Round(time.Second))

	// The agent (node's loopback: hostNetwork) reports the node.
	httpc, err := l.HTTPClient(node.Name)
	if err != nil {
		t.Fatal(err)
	}
	var st status
	eventually(t, 30*time.Second, "agent status", func() (bool, string) {
		resp, err := httpc.Get("http://127.0.0.1:9760/v1/status")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return false, string(b)
		}
		return yaml.Unmarshal(b, &st) == nil && st.Ready, string(b)
	})
	t.Logf("/v1/status: node %s datapath %s ready %v rst_probe %+v", st.Node, st.Datapath, st.Ready, st.RSTProbe)
	if st.Node != realNode || st.Datapath != "iptables" {
		t.Errorf("status %+v", st)
	}
	if st.RSTProbe == nil || !st.RSTProbe.Up {
		t.Errorf("RST probe not up under containerd with the chart's Localhost profile: %+v", st.RSTProbe)
	}
	t.Logf("whole test %s", time.Since(start).Round(time.Second))
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// teardown stops the kubelet, removes every container, stops containerd and ends the mount
// namespace; it kills only processes this test started (or that they started: the
// containerd shims, which live in the test's mount namespace).
func teardown(t *testing.T, bins, run string, holder int, procs []*exec.Cmd) {
	sock := filepath.Join(run, "containerd", "containerd.sock")
	ctr := func(args ...string) string {
		out, _ := exec.Command(filepath.Join(bins, "ctr"), append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).Output()
		return string(out)
	}
	stop := func(c *exec.Cmd) {
		if c.Process == nil {
			return
		}
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-done
		}
	}
	// The kubelet first (it would restart what is removed), then the containers.
	for _, c := range procs {
		if strings.Contains(strings.Join(c.Args, " "), "/kubelet ") {
			stop(c)
		}
	}
	for _, id := range strings.Fields(ctr("tasks", "ls", "-q")) {
		ctr("tasks", "kill", "-s", "SIGKILL", id)
	}
	time.Sleep(time.Second)
	for _, id := range strings.Fields(ctr("tasks", "ls", "-q")) {
		ctr("tasks", "delete", "-f", id)
	}
	for _, id := range strings.Fields(ctr("containers", "ls", "-q")) {
		ctr("containers", "delete", id)
	}
	for _, c := range procs {
		stop(c)
	}
	// What is left in the mount namespace (shims), then the namespace itself.
	ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", holder))
	self, _ := os.Readlink("/proc/self/ns/mnt")
	if ns != "" && ns != self {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == holder {
				continue
			}
			if m, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); m == ns {
				t.Logf("teardown: killing %d (left in the test's mount namespace)", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = syscall.Kill(holder, syscall.SIGKILL)
	p, _ := os.FindProcess(holder)
	_, _ = p.Wait()
}

func containerdConfig(run, sock string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[ttrpc]
  address = "%[3]s.ttrpc"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # This host refuses a negative oom_score_adj even to root (the sandbox's -998, a critical
  # pod's -997): clamp to containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "runc"
        SystemdCgroup = false
  # No CNI: the node reports its network not ready; hostNetwork pods run all the same.
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    conf_dir = %[4]q
    bin_dirs = [%[4]q]

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
`, filepath.Join(run, "containerd", "root"), filepath.Join(run, "containerd", "state"), sock, filepath.Join(run, "cni"))
}

func kubeletConfig(run, sock, nodeIP string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host has cgroup v1 (hybrid).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
address: %s
readOnlyPort: 0
failSwapOn: false
clusterDNS: [10.96.0.10]
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
podLogsDir: %s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
localStorageCapacityIsolation: false
serializeImagePulls: false
registerNode: true
`, sock, nodeIP, filepath.Join(run, "pod-logs"))
}
