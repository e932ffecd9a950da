// Package scenarios runs netdrift's agents against the lab (real etcd,
// kube-apiserver, kube-controller-manager and kube-proxy, nodes and pods as
// network namespaces) and checks what they report against what clients saw
// and what kube-proxy logged.
//
// The scenarios are root tests (TestScenarios/<mode>/<scenario>); one lab per
// kube-proxy mode is shared by the scenarios of that mode. The helpers in the
// non-test files are pure (parsers, statistics) or thin (HTTP against an
// agent, connection loops) so they can be unit tested without root.
package scenarios
