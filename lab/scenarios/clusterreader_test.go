package scenarios

import (
	"context"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netdrift/netdrift/lab/labenv"
)

// chartClusterReader is the netdrift-cluster-reader ClusterRole of
// deploy/daemonset.yaml (rendered from the chart's responder-rbac.yaml).
func chartClusterReader(t *testing.T) *rbacv1.ClusterRole {
	return chartObject[rbacv1.ClusterRole](t, "ClusterRole", "netdrift-cluster-reader")
}

// clusterReaderKubeconfig is a kubeconfig of a ServiceAccount whose only
// rights are the chart's netdrift-cluster-reader ClusterRole, bound as
// docs/install.md says, so a test shows that role is all the cluster
// commands need.
func clusterReaderKubeconfig(t *testing.T, l *labenv.Lab) string {
	t.Helper()
	ctx := context.Background()
	cs := l.Clientset()
	const name = "plg-cluster-reader"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: chartClusterReader(t).Rules}
	rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: labenv.AgentNamespace}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return saKubeconfig(t, l, "cluster-reader", nil)
}

// checkClusterReader runs `cluster drift --backend ip` as a user bound to
// the chart's cluster-reader role only (the same answer as the admin's:
// want) and as the per-namespace responder (refused, naming the RBAC the
// cluster commands need).
func checkClusterReader(t *testing.T, l *labenv.Lab, bin, ip, want string) {
	t.Helper()
	responder := saKubeconfig(t, l, "responder", chartResponderRole(t))
	out, stderr, code := runPlugin(t, l, bin, clusterReaderKubeconfig(t, l), "cluster", "drift", "--backend", ip)
	if code != 1 || out != want {
		t.Errorf("cluster drift as netdrift-cluster-reader: exit %d, stdout %q, stderr %q; want exit 1 and the admin's answer %q", code, out, stderr, want)
	}
	out, stderr, code = runPlugin(t, l, bin, responder, "cluster", "drift", "--backend", ip)
	if code != 2 || !strings.Contains(stderr, "the cluster commands need RBAC verb list on nodes") {
		t.Errorf("cluster drift as the namespace responder: exit %d, stdout %q, stderr %q; want exit 2 naming the RBAC needed", code, out, stderr)
	}
	t.Logf("netdrift-cluster-reader alone: the admin's answer; the namespace responder: %s", strings.TrimSpace(stderr))
}

// TestChartRBACObjects: the chart's responder Role and cluster-reader
// ClusterRole are found in deploy/daemonset.yaml with the verbs the plugin's
// commands need.
func TestChartRBACObjects(t *testing.T) {
	r := chartResponderRole(t)
	c := chartClusterReader(t)
	has := func(rules []rbacv1.PolicyRule, resource, verb string) bool {
		for _, p := range rules {
			if slices.Contains(p.Resources, resource) && slices.Contains(p.Verbs, verb) {
				return true
			}
		}
		return false
	}
	if !has(r.Rules, "pods/portforward", "create") || !has(r.Rules, "pods", "list") {
		t.Errorf("netdrift-responder rules %+v lack pods list or pods/portforward create", r.Rules)
	}
	if !has(c.Rules, "nodes", "list") || !has(c.Rules, "nodereports", "list") {
		t.Errorf("netdrift-cluster-reader rules %+v lack nodes list or nodereports list", c.Rules)
	}
}
