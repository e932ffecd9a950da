// Settings of the netdrift mixin. Override them when importing the mixin:
//   (import 'mixin.libsonnet') + { _config+:: { kubeProxySelector: 'job="kube-proxy-metrics"' } }
{
  _config+:: {
    // Selects the agents' scrape job (used where only the job tells netdrift's series apart: up, process_*).
    netdriftSelector: 'job="netdrift"',
    // Selects kube-proxy's own metrics (kubeproxy_*, process_*), for the panels beside netdrift's.
    kubeProxySelector: 'job="kube-proxy"',
    // Every series is expected to carry the node name in this label (the ServiceMonitor relabels
    // __meta_kubernetes_pod_node_name to it; docs/install.md has a plain scrape config doing the same).
    nodeLabel: 'node',

    runbookURLBase: 'https://github.com/netdrift/netdrift/blob/main/docs/runbook.md#',

    // How long a stale finding must last before NetdriftStaleDNAT pages.
    staleDNATFor: '2m',
    // How long an agent's watch must stay unhealthy before NetdriftWatchUnhealthy fires. The agent
    // itself waits --watch-unhealthy-after (25s by default) before reporting it; the alert then waits
    // as long as NetdriftStaleDNAT would, so a blind spot is told no later than a stale rule.
    watchUnhealthyFor: '2m',
    watchUnhealthyClusterWideFor: '2m',
    // Oldest pending change (seconds) that NetdriftNodeLagging tolerates.
    laggingThresholdSeconds: 30,
    // The window of the RST alerts: a counter series born inside it counts whole (see rstIncrease).
    rstWindow: '5m',
    agentDownFor: '5m',

    dashboardUID: 'netdrift-nodes',
    dashboardTitle: 'netdrift / per-node Service programming',
    dashboardTags: ['netdrift', 'kube-proxy'],
  },
}
