package model

import (
	"net/netip"
	"slices"
	"strings"
	"time"
)

// FindingKind is a lower_snake_case finding name, the same in JSON and metrics.
type FindingKind string

const (
	StaleBackend          FindingKind = "stale_backend"
	MissingBackend        FindingKind = "missing_backend"
	StaleFrontend         FindingKind = "stale_frontend"
	MissingFrontend       FindingKind = "missing_frontend"
	WrongVerdict          FindingKind = "wrong_verdict"
	StaleRoute            FindingKind = "stale_route"
	MissingRoute          FindingKind = "missing_route"
	OrphanLink            FindingKind = "orphan_link"
	LinkDown              FindingKind = "link_down"
	StaleConntrack        FindingKind = "stale_conntrack"
	EndpointOnMissingNode FindingKind = "endpoint_on_missing_node"
)

// AllFindingKinds lists every kind, for metrics that export zeros.
var AllFindingKinds = []FindingKind{
	StaleBackend, MissingBackend, StaleFrontend, MissingFrontend, WrongVerdict,
	StaleRoute, MissingRoute, OrphanLink, LinkDown, StaleConntrack, EndpointOnMissingNode,
}

// Scopes of a finding.
const (
	ScopeNode    = "node"
	ScopeCluster = "cluster"
)

// Finding is one difference between what should be and what is.
type Finding struct {
	Kind     FindingKind
	Scope    string      // ScopeNode (default when empty) or ScopeCluster
	Service  ServicePort // zero when unknown or not applicable
	Frontend *Frontend   // nil when not applicable (routes, links)
	Backend  netip.AddrPort
	// Subject names the thing for findings without a frontend
	// (a route "10.1.0.0/24 via 10.0.0.2", a link "veth1234", a conntrack flow).
	Subject  string
	Detail   string
	Evidence []string
	// FirstSeen is set by the live agent's tracker; zero offline.
	FirstSeen time.Time
}

// Key identifies a finding across audits (for first-seen tracking).
func (f Finding) Key() string {
	k := string(f.Kind) + "|" + f.Service.String() + "|" + string(f.Service.Protocol) + "|"
	if f.Frontend != nil {
		k += string(f.Frontend.Kind) + "|" + string(f.Frontend.Family) + "|" + f.Frontend.String() + "|" + string(f.Frontend.Protocol)
	}
	k += "|"
	if f.Backend.IsValid() {
		k += f.Backend.String()
	}
	return k + "|" + f.Subject
}

// SortFindings orders findings by kind, service, frontend, backend, subject.
func SortFindings(fs []Finding) { SortByKey(fs, Finding.Key) }

// SortByKey sorts xs by key, stable, computing each key once (a key is built
// from strings: computing it in every comparison dominated the sort).
func SortByKey[T any](xs []T, key func(T) string) {
	ks := make([]Keyed[T], len(xs))
	for i, x := range xs {
		ks[i] = Keyed[T]{key(x), x}
	}
	copy(xs, SortedByKey(ks))
}

// Keyed is a value with its sort key, for callers that keep the key.
type Keyed[T any] struct {
	Key   string
	Value T
}

// SortedByKey sorts ks by key, stable, and returns their values in that
// order (nil when there are none).
func SortedByKey[T any](ks []Keyed[T]) []T {
	if len(ks) == 0 {
		return nil
	}
	slices.SortStableFunc(ks, func(a, b Keyed[T]) int { return strings.Compare(a.Key, b.Key) })
	out := make([]T, len(ks))
	for i := range ks {
		out[i] = ks[i].Value
	}
	return out
}
