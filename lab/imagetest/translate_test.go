package imagetest

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func minimalDS() *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{}
	ds.Namespace = "netdrift"
	ds.Spec.Template.Spec = corev1.PodSpec{
		HostNetwork: true, DNSPolicy: corev1.DNSClusterFirstWithHostNet,
		ServiceAccountName: "netdrift", AutomountServiceAccountToken: ptr.To(true),
		SecurityContext: &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{
			Name: "agent", Image: "x", ImagePullPolicy: corev1.PullIfNotPresent,
			Args: []string{"agent", "--node-name=$(NODE_NAME)"},
			Env: []corev1.EnvVar{
				{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}},
			},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}},
			SecurityContext: &corev1.SecurityContext{
				RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0), AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities:           &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"BPF"}},
			},
		}},
	}
	return ds
}

var testEnv = Env{Image: "img", Node: "node-1", NetNSPath: "/run/netns/n1", SADir: "/sa", ServiceHost: "10.96.0.1",
	ClusterDNS: "10.96.0.10", Seccomp: "/kubelet/seccomp", RuntimeDefault: "/default.json"}

func TestTranslate(t *testing.T) {
	p, err := Translate(minimalDS(), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(p.Main[0].Args, " ")
	for _, want := range []string{"--network ns:/run/netns/n1", "--cap-drop all --cap-add CAP_BPF", "--read-only --read-only-tmpfs=false",
		"-e NODE_NAME=node-1", "-e GOMEMLIMIT=536870912", "--memory 536870912", "--user 0:0", "--security-opt no-new-privileges",
		"--security-opt seccomp=/default.json", "/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro", "img agent --node-name=node-1"} {
		if !strings.Contains(got, want) {
			t.Errorf("args lack %q:\n%s", want, got)
		}
	}
}

// A setting the translation does not know fails, rather than being left out.
func TestTranslateRefusesWhatItCannotTake(t *testing.T) {
	for name, mut := range map[string]func(*appsv1.DaemonSet){
		"hostPID":        func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.HostPID = true },
		"no hostNetwork": func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.HostNetwork = false },
		"workingDir":     func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].WorkingDir = "/x" },
		"secret env": func(d *appsv1.DaemonSet) {
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}})
		},
		"emptyDir": func(d *appsv1.DaemonSet) {
			s := &d.Spec.Template.Spec
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "e", MountPath: "/e"})
		},
		"procMount": func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
		},
		"pod sysctls": func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.x", Value: "1"}}
		},
		"no capabilities": func(d *appsv1.DaemonSet) { d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities = nil },
		"hugepages limit": func(d *appsv1.DaemonSet) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits["hugepages-2Mi"] = resource.MustParse("2Mi")
		},
	} {
		ds := minimalDS()
		mut(ds)
		if _, err := Translate(ds, testEnv); err == nil {
			t.Errorf("%s: translated without error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
