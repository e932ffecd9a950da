package model

import (
	"encoding/json"
	"testing"
)

// TestServiceName: the text form is "namespace/name" and parses back; a
// service port holds its service's name, and its JSON keeps the flat
// Namespace and Name members.
func TestServiceName(t *testing.T) {
	sn := ServiceName{Namespace: "shop", Name: "web"}
	if sn.String() != "shop/web" || sn.IsZero() || !(ServiceName{}).IsZero() {
		t.Errorf("String %q IsZero %v", sn, sn.IsZero())
	}
	if got, ok := ParseServiceName("shop/web"); !ok || got != sn {
		t.Errorf("parse: %v %v", got, ok)
	}
	for _, bad := range []string{"", "web", "/web", "shop/"} {
		if _, ok := ParseServiceName(bad); ok {
			t.Errorf("ParseServiceName(%q) accepted", bad)
		}
	}
	sp := ServicePort{ServiceName: sn, Port: "http", Protocol: TCP}
	if sp.Service() != "shop/web" || sp.String() != "shop/web:http" || sp.Namespace != "shop" || sp.Name != "web" {
		t.Errorf("service port %v: Service %q", sp, sp.Service())
	}
	b, err := json.Marshal(sp)
	if err != nil || string(b) != `{"Namespace":"shop","Name":"web","Port":"http","Protocol":"TCP"}` {
		t.Errorf("JSON %s %v", b, err)
	}
}
