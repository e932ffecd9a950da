// The netdrift monitoring mixin: alerts (prometheusAlerts), recording rules (prometheusRules,
// none yet) and the per-node dashboard (grafanaDashboards). deploy/tools/mixingen renders it
// into the files deploy/ ships; see README.md.
(import 'config.libsonnet') +
(import 'alerts/alerts.libsonnet') +
(import 'dashboards/dashboards.libsonnet') +
{ prometheusRules+:: { groups+: [] } }
