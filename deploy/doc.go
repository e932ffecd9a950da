// Package deploy holds what an SRE installs to run netdrift: the Helm chart (helm/netdrift)
// and the DaemonSet and its RBAC rendered from it (daemonset.yaml, kustomization.yaml), the alert rules (prometheus/netdrift.rules.yml and the same rules as a
// PrometheusRule in prometheus-rules.yaml), their promtool tests (tests/) and the Grafana
// dashboard. The Go tests beside them validate all of it; there is no code to import.
package deploy
