// The per-node dashboard: netdrift's view of each node's Service programming beside kube-proxy's
// own metrics (programming latency, sync, cost), and what kube-proxy cannot show: removal lag,
// pending changes, stale rules, resets of terminating pods, refusals by Ready endpoints,
// connections sent to stale backends, watch health.
local p = import 'panels.libsonnet';
local promql = import '../lib/promql.libsonnet';

function(cfg)
  local node = '%s=~"$node"' % cfg.nodeLabel;
  local nd(extra='') = if extra == '' then node else extra + ', ' + node;
  local kp = '%s, %s' % [cfg.kubeProxySelector, node];
  local agentSel = '%s, %s' % [cfg.netdriftSelector, node];
  local w = '$__rate_interval';
  local by = cfg.nodeLabel;
  local leg = '{{%s}}' % cfg.nodeLabel;
  local t = p.target;

  local panels = p.layout([
    p.row('Overview'),
    [
      [p.stat('Nodes with stale findings', 'Nodes whose datapath still holds rules to backends or frontends that no longer exist (NetdriftStaleDNAT).',
              [t('count(sum by (%s) (netdrift_findings{%s}) > 0) or vector(0)' % [by, nd('kind=~"stale_backend|stale_frontend"')])]), 6, 4],
      [p.stat('Agents up', 'Scraped netdrift agents, of those discovered.',
              [t('sum(up{%s})' % agentSel, 'up'), t('count(up{%s})' % agentSel, 'discovered')]), 6, 4],
      [p.stat('Unhealthy watches', 'Agents whose watch is not current: stale-DNAT detection is paused there.',
              [t('count(netdrift_watch_healthy{%s} == 0) or vector(0)' % nd())]), 6, 4],
      [p.stat('Recommended preStop (cluster max)', 'The preStop sleep that covers the slowest node\'s removal lag.',
              [t('max(netdrift_recommended_prestop_seconds)')], 's'), 6, 4],
    ],
    p.row('Programming latency: netdrift beside kube-proxy'),
    [
      [p.timeseries('Network programming latency p99 (T2-T0)',
                    "From the EndpointSlice's trigger time to the node's datapath matching it: netdrift measures it from outside, kube-proxy reports its own (kubeproxy_network_programming_duration_seconds).",
                    [t(promql.quantile('0.99', 'netdrift_network_programming_latency_seconds', nd(), by, w), 'netdrift ' + leg),
                     t(promql.quantile('0.99', 'kubeproxy_network_programming_duration_seconds', kp, by, w), 'kube-proxy ' + leg)], 's'), 12, 8],
      [p.timeseries('Removal lag p99 (T2-T1, remove)',
                    'From the watch delivering an endpoint removal to the node\'s datapath no longer holding it. kube-proxy does not measure removals.',
                    [t(promql.quantile('0.99', 'netdrift_node_programming_lag_seconds', nd('change="remove"'), by, w), leg)], 's'), 12, 8],
    ],
    [
      [p.heatmap('Node programming lag (T2-T1) distribution', 'Every change, every selected node.',
                 [t('sum by (le) (increase(netdrift_node_programming_lag_seconds_bucket{%s}[%s]))' % [nd(), w], '{{le}}')], 's'), 12, 8],
      [p.timeseries('kube-proxy rules sync p99 and rate', "kube-proxy's own: how long a sync takes, and how often it runs.",
                    [t(promql.quantile('0.99', 'kubeproxy_sync_proxy_rules_duration_seconds', kp, by, w), 'p99 ' + leg),
                     t('sum by (%s) (rate(kubeproxy_sync_proxy_rules_duration_seconds_count{%s}[%s]))' % [by, kp, w], 'syncs/s ' + leg)], 's'), 12, 8],
    ],
    p.row('Pending changes and stale rules'),
    [
      [p.timeseries('Pending changes', 'Service changes the watch delivered that the datapath does not hold yet.',
                    [t('max by (%s) (netdrift_pending_changes{%s})' % [by, nd()], leg)]), 8, 8],
      [p.timeseries('Oldest pending change', 'Age of the oldest pending change (NetdriftNodeLagging above 30s).',
                    [t('max by (%s) (netdrift_oldest_pending_change_seconds{%s})' % [by, nd()], leg)], 's'), 8, 8],
      [p.table('Stale findings by node and kind', 'Current findings (stale_backend, stale_frontend, stale_conntrack).',
               [t('sum by (%s, kind) (netdrift_findings{%s}) > 0' % [by, nd()])]), 8, 8],
    ],
    [
      [p.timeseries('Stale backends by service', 'Backends still programmed on the node after their endpoint went away.',
                    [t('sum by (%s, namespace, service) (netdrift_stale_backends{%s})' % [by, nd()], '{{namespace}}/{{service}} on ' + leg)]), 12, 8],
      [p.timeseries('Connections sent to stale backends', 'New connections (conntrack NEW) the node sent to the backend of a stale_backend finding, per rate interval.',
                    [t('sum by (%s, namespace, service) (%s)' % [by, promql.gained('netdrift_stale_backend_connections_total{%s}' % nd(), w)], '{{namespace}}/{{service}} on ' + leg)]), 12, 8],
    ],
    p.row('Resets: terminating pods and Ready endpoints'),
    [
      [p.timeseries('RSTs of terminating pods by service', 'Resets sent by or to pods at or after their deletion request, per rate interval: clients still routed to them (NetdriftTerminatingRSTs).',
                    [t('sum by (namespace, service) (%s)' % promql.gained('netdrift_terminating_rsts_total{%s}' % nd(), w), '{{namespace}}/{{service}}')]), 8, 8],
      [p.timeseries('Ready endpoints refusing clients', 'Resets a Ready endpoint sent from its target port, per rate interval: the readiness probe does not cover the listener (NetdriftReadyEndpointRefusals).',
                    [t('sum by (namespace, service) (%s)' % promql.gained('netdrift_ready_endpoint_refusals_total{%s}' % nd(), w), '{{namespace}}/{{service}}')]), 8, 8],
      [p.timeseries('Recommended preStop per node', 'The preStop sleep each node\'s removal lag asks for, and the cluster max.',
                    [t('max by (%s) (netdrift_recommended_prestop_seconds{%s})' % [by, nd()], leg), t('max(netdrift_recommended_prestop_seconds)', 'cluster max')], 's'), 8, 8],
    ],
    p.row('Watch health'),
    [
      [p.stateTimeline('Watch healthy', 'Whether Lease renewals arrive through the agent\'s watch in time.',
                       [t('min by (%s) (netdrift_watch_healthy{%s})' % [by, nd()], leg)]), 12, 8],
      [p.timeseries('Watch delay p99 (Lease)', "From the Lease's renewTime to the agent's watch receiving it.",
                    [t(promql.quantile('0.99', 'netdrift_watch_delay_seconds', nd('source="lease"'), by, w), leg)], 's'), 12, 8],
    ],
    p.row('Cost: netdrift beside kube-proxy'),
    [
      [p.timeseries('CPU', 'Cores used by each node\'s agent and kube-proxy.',
                    [t('sum by (%s) (rate(process_cpu_seconds_total{%s}[%s]))' % [by, agentSel, w], 'netdrift ' + leg),
                     t('sum by (%s) (rate(process_cpu_seconds_total{%s}[%s]))' % [by, kp, w], 'kube-proxy ' + leg)], 'short'), 12, 8],
      [p.timeseries('Resident memory', 'RSS of each node\'s agent and kube-proxy.',
                    [t('sum by (%s) (process_resident_memory_bytes{%s})' % [by, agentSel], 'netdrift ' + leg),
                     t('sum by (%s) (process_resident_memory_bytes{%s})' % [by, kp], 'kube-proxy ' + leg)], 'bytes'), 12, 8],
    ],
  ]);

  {
    uid: cfg.dashboardUID,
    title: cfg.dashboardTitle,
    tags: cfg.dashboardTags,
    description: 'Per node: whether the datapath matches the API server, how long programming takes (netdrift beside kube-proxy), who is hurt, and what it costs.',
    editable: false,
    graphTooltip: 1,
    refresh: '30s',
    schemaVersion: 39,
    version: 1,
    time: { from: 'now-1h', to: 'now' },
    timezone: '',
    annotations: { list: [] },
    links: [],
    templating: {
      list: [
        { name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus', current: {}, hide: 0 },
        {
          name: 'node',
          label: 'Node',
          type: 'query',
          datasource: { type: 'prometheus', uid: '${datasource}' },
          query: { query: 'label_values(netdrift_node_info, %s)' % cfg.nodeLabel, refId: 'nodes' },
          definition: 'label_values(netdrift_node_info, %s)' % cfg.nodeLabel,
          multi: true,
          includeAll: true,
          allValue: '.*',
          current: {},
          refresh: 2,
          sort: 1,
          hide: 0,
        },
      ],
    },
    panels: panels,
  }
