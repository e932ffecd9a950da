package deploy_test

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The responder Role (kubectl netdrift ... --node NODE) grants exactly what
// internal/reach uses, in the agents' namespace, and is bound to no one.
func TestResponderRole(t *testing.T) {
	m := loadManifests(t)
	r := m.responder
	if r == nil {
		t.Fatal("no netdrift-responder Role")
	}
	if r.Name != "netdrift-responder" || r.Namespace != m.namespace.Name {
		t.Errorf("Role %s/%s, want %s/netdrift-responder", r.Namespace, r.Name, m.namespace.Name)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
	}
	if !reflect.DeepEqual(r.Rules, want) {
		t.Errorf("rules %+v\nwant %+v", r.Rules, want)
	}
	if m.roleBinding.RoleRef.Name == r.Name || m.crb.RoleRef.Name == r.Name {
		t.Error("the chart binds the responder Role; binding it is the cluster admin's choice")
	}
}

// The cluster-reader ClusterRole (kubectl netdrift cluster ...) grants the
// two LISTs internal/clustercmd makes, nothing else, and is bound to no one.
func TestResponderClusterReader(t *testing.T) {
	m := loadManifests(t)
	r := m.clusterReader
	if r == nil {
		t.Fatal("no netdrift-cluster-reader ClusterRole")
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
		{APIGroups: []string{"netdrift.io"}, Resources: []string{"nodereports"}, Verbs: []string{"get", "list"}},
	}
	if !reflect.DeepEqual(r.Rules, want) {
		t.Errorf("rules %+v\nwant %+v", r.Rules, want)
	}
	if m.crb.RoleRef.Name == r.Name {
		t.Error("the chart binds the cluster-reader ClusterRole; binding it is the cluster admin's choice")
	}
}
