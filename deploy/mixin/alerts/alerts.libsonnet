// netdrift's alerts. Series carry the node label (_config.nodeLabel) and instance; only `up`
// is selected by job. Every alert links to its section of docs/runbook.md.
local promql = import '../lib/promql.libsonnet';
local text(lines) = std.join(' ', lines);

{
  local cfg = $._config,
  local runbook(alert) = cfg.runbookURLBase + std.asciiLower(alert),
  local alert(name, severity, expr, summary, description, forDuration=null) = {
    alert: name,
    expr: expr,
    [if forDuration != null then 'for']: forDuration,
    labels: { severity: severity },
    annotations: { summary: summary, description: description, runbook_url: runbook(name) },
  },
  // Node-level alerts aggregate by the node label and instance.
  local byNode = std.join(', ', [cfg.nodeLabel, 'instance']),
  local n = '$labels.' + cfg.nodeLabel,

  prometheusAlerts+:: {
    groups+: [
      {
        name: 'netdrift.node',
        rules: [
          // The agent only promotes a mismatch to a finding once it is older than --stale-after
          // and its own watch was proven current after the mismatch appeared, so this is not
          // suppressed by watch health.
          alert(
            'NetdriftStaleDNAT', 'critical',
            |||
              sum by (%s, kind) (
                netdrift_findings{kind=~"stale_backend|stale_frontend"}
              ) > 0
            ||| % byNode,
            'Node {{ %s }} still forwards Service traffic to backends or frontends that no longer exist.' % n,
            text([
              'netdrift on node {{ %s }} ({{ $labels.instance }}) has reported' % n,
              '{{ $value | humanize }} {{ $labels.kind }} finding(s) for more than %s: the kernel' % cfg.staleDNATFor,
              'datapath still sends Service traffic where the API server says it must not go. Clients on',
              'this node can see connection refused, resets or timeouts.{{ if eq $labels.kind "stale_backend" }}',
              'New connections this node sent to stale backends in the last 10 minutes:',
              '{{ with query (printf "sum(%s)" %s %s %s) }}{{ . | first | value | humanize }}{{ else }}none counted{{ end }}'
              % [promql.gained('netdrift_stale_backend_connections_total{%s=%%q}' % cfg.nodeLabel, '10m'), n, n, n],
              '(per finding: `connections` in /v1/drift).{{ end }} Run',
              '`netdrift drift --agent https://{{ $labels.instance }}` (or on the node) for the services.',
            ]),
            cfg.staleDNATFor,
          ),
          // A node whose own watch is unhealthy cannot judge its lag (it may be missing the change
          // that superseded the pending one): NetdriftWatchUnhealthy speaks for it. The suppression
          // is per node (on instance), never cluster-wide.
          alert(
            'NetdriftNodeLagging', 'warning',
            |||
              (
                max by (%(by)s) (netdrift_oldest_pending_change_seconds) > %(t)d
              )
              unless on (instance)
              (
                max by (instance) (netdrift_watch_healthy) == 0
              )
            ||| % { by: byNode, t: cfg.laggingThresholdSeconds },
            'Node {{ %s }} has not programmed a Service change for {{ $value | humanizeDuration }}.' % n,
            text([
              'The oldest EndpointSlice/Service change netdrift on {{ %s }} ({{ $labels.instance }})' % n,
              'has received but not yet seen in the kernel datapath is {{ $value | humanizeDuration }} old',
              '(threshold %ds). kube-proxy (or its replacement) on this node is slow or stuck.' % cfg.laggingThresholdSeconds,
              '`netdrift lag` and `netdrift status` on the node show which changes are pending.',
            ]),
          ),
          alert(
            'NetdriftWatchUnhealthy', 'warning',
            |||
              max by (%s) (netdrift_watch_healthy) == 0
            ||| % byNode,
            'netdrift on {{ %s }} cannot trust its view of the API server; stale-DNAT detection is paused there.' % n,
            text([
              'netdrift_watch_healthy has been 0 on {{ %s }} ({{ $labels.instance }}) for %s:' % [n, cfg.watchUnhealthyFor],
              "the node's Lease renewals are not arriving through the agent's watch in time. While this lasts",
              'the agent raises no stale findings and NetdriftNodeLagging is suppressed for this node, so',
              'stale DNAT rules on it would go unnoticed. `netdrift status` shows the watch delay.',
            ]),
            cfg.watchUnhealthyFor,
          ),
          // More than half of the agents lose their watch together: the control plane (API server,
          // etcd, network to them) is the likely cause, not the nodes.
          alert(
            'NetdriftWatchUnhealthyClusterWide', 'warning',
            |||
              count(max by (instance) (netdrift_watch_healthy) == 0)
                > 0.5 * count(max by (instance) (netdrift_watch_healthy))
            |||,
            'Most netdrift agents report an unhealthy watch: suspect the control plane, not the nodes.',
            text([
              '{{ $value | humanize }} agents report netdrift_watch_healthy 0, more than half of all agents.',
              'Watch delay this widespread points at the API server, etcd or the network path to them.',
              'Stale-DNAT detection is paused on those nodes.',
            ]),
            cfg.watchUnhealthyClusterWideFor,
          ),
          // Per service across all nodes: any reset in the window fires.
          alert(
            'NetdriftTerminatingRSTs', 'warning',
            |||
              sum by (namespace, service) (
                %s
              ) > 0
            ||| % promql.gained('netdrift_terminating_rsts_total', cfg.rstWindow),
            'Clients of {{ $labels.namespace }}/{{ $labels.service }} were refused by terminating pods.',
            text([
              'Pods of {{ $labels.namespace }}/{{ $labels.service }}{{ if eq $labels.service "_other" }}',
              "(services beyond the agent's label cap; see `netdrift rsts`){{ end }} sent or received",
              '{{ printf "%%.0f" $value }} TCP resets in the last %s while terminating or just deleted: clients were still' % cfg.rstWindow,
              'routed to them after they stopped listening. Add a preStop hook that sleeps at least',
              '{{ with query "max(netdrift_recommended_prestop_seconds)" }}{{ . | first | value | humanize }}{{ else }}(unknown: no removal-lag samples yet){{ end }}',
              "seconds (the cluster's largest netdrift_recommended_prestop_seconds) before the",
              'process stops listening, and keep terminationGracePeriodSeconds above preStop plus shutdown time.',
            ]),
          ),
          // Per service across all nodes: Ready endpoints sending resets from the Service's target
          // port (the agent settles a reset as Ready once no deletion request can still precede
          // it, so rollouts do not count here).
          alert(
            'NetdriftReadyEndpointRefusals', 'warning',
            |||
              sum by (namespace, service) (
                %s
              ) > 0
            ||| % promql.gained('netdrift_ready_endpoint_refusals_total', cfg.rstWindow),
            'Ready endpoints of {{ $labels.namespace }}/{{ $labels.service }} refuse clients.',
            text([
              'Endpoints of {{ $labels.namespace }}/{{ $labels.service }}{{ if eq $labels.service "_other" }}',
              "(services beyond the agent's label cap; see `netdrift rsts`){{ end }} that the EndpointSlice",
              'calls Ready sent {{ printf "%%.0f" $value }} TCP resets in the last %s from the' % cfg.rstWindow,
              "Service's target port: clients routed to them are refused while they are Ready. The readiness",
              'probe does not cover the listener (it probes another port or path, or the listener closed or',
              'never opened while the probe still passes). Make the readiness probe hit the serving port, or',
              'fail readiness before closing the listener. `netdrift rsts` and `netdrift explain` name the pods.',
            ]),
            '2m',
          ),
        ],
      },
      {
        name: 'netdrift.agent',
        rules: [
          alert(
            'NetdriftAgentDown', 'warning',
            |||
              up{%(s)s} == 0
                or
              absent(up{%(s)s})
            ||| % { s: cfg.netdriftSelector },
            'netdrift is not being scraped{{ with $labels.%s }} on node {{ . }}{{ end }}.' % cfg.nodeLabel,
            text([
              '{{ if $labels.instance }}The netdrift agent at {{ $labels.instance }} has failed its scrapes for %s.' % cfg.agentDownFor
              + '{{ else }}No netdrift target (%s) has been discovered for %s.{{ end }}' % [cfg.netdriftSelector, cfg.agentDownFor],
              'Stale DNAT, lag and RSTs on the affected node(s) are not being watched.',
            ]),
            cfg.agentDownFor,
          ),
          // A lagging watch alone has its own alert (NetdriftWatchUnhealthy): left out here.
          alert(
            'NetdriftAgentBlind', 'warning',
            |||
              max by (%(by)s) (netdrift_view_current) == 0
                unless on (instance)
              max by (instance) (netdrift_view_not_current_reason{reason="watch_unhealthy"}) == 1
            ||| % { by: byNode },
            'netdrift on {{ %s }} has no current view of the cluster or the datapath; its answers say nothing about the node.' % n,
            text([
              'netdrift_view_current has been 0 on {{ %s }} ({{ $labels.instance }}) for 5 minutes' % n,
              '(netdrift_view_blind_seconds: how long). Its watch cache or its last datapath read is not current:',
              'it raises no stale findings, /readyz is 503, and `netdrift drift`, `explain`, `lag` and `rsts`',
              'answer "no view: ..." with exit status 3. netdrift_view_not_current_reason says why;',
              '`netdrift status` shows the reason, since when and the last error.',
            ]),
            '5m',
          ),
          // "read time" (events dated when read: a kernel without BPF for the stamp) is a lasting
          // property of the node, not an incident: left out.
          alert(
            'NetdriftReaderFallback', 'info',
            |||
              max by (%s, reader, to) (netdrift_reader_fallback_active{to!="read time"}) == 1
            ||| % byNode,
            'netdrift on {{ %s }}: the {{ $labels.reader }} reader reads by its fallback ({{ $labels.to }}).' % n,
            text([
              'netdrift_reader_fallback_active{reader="{{ $labels.reader }}",to="{{ $labels.to }}"} has been 1 on',
              '{{ %s }} ({{ $labels.instance }}) for 30 minutes. The agent still audits, but by a slower' % n,
              'or coarser path: iptables-save costs CPU on every read and gets no change events; polling sees',
              'changes late. `netdrift status` ("fallback" rows) says why and since when.',
            ]),
            '30m',
          ),
          alert(
            'NetdriftSourceDown', 'warning',
            |||
              max by (%s, source) (netdrift_source_up) == 0
            ||| % byNode,
            'netdrift on {{ %s }} cannot read its {{ $labels.source }} source.' % n,
            text([
              'netdrift_source_up{source="{{ $labels.source }}"} has been 0 on {{ %s }}' % n,
              '({{ $labels.instance }}) for 5 minutes. The agent keeps running and retrying, but findings',
              'that depend on this source are not produced. `netdrift status` shows the error.',
            ]),
            '5m',
          ),
          alert(
            'NetdriftRSTProbeDown', 'info',
            |||
              max by (%s) (netdrift_rst_probe_up) == 0
            ||| % byNode,
            'The RST probe is not running on {{ %s }}.' % n,
            text([
              'netdrift_rst_probe_up has been 0 on {{ %s }} ({{ $labels.instance }}) for 15 minutes:' % n,
              'resets sent to clients by terminating pods are not counted there, so NetdriftTerminatingRSTs',
              'cannot fire for this node. `netdrift status` says why the probe did not load.',
            ]),
            '15m',
          ),
          alert(
            'NetdriftIncrementalStateCorrected', 'info',
            |||
              max by (%s) (increase(netdrift_full_audit_corrections_total[1h])) > 0
            ||| % byNode,
            'netdrift on {{ %s }} corrected its incrementally kept desired state.' % n,
            text([
              'A full audit on {{ %s }} ({{ $labels.instance }}) found services whose desired state,' % n,
              'kept up to date from watch deliveries, differed from the watch cache, and corrected it. Findings',
              'are right again, but lag samples for those changes were not taken: a delivery was missed or the',
              "incremental path has a bug. The agent's log has the warning.",
            ]),
          ),
          alert(
            'NetdriftReaderStateCorrected', 'info',
            |||
              max by (%s) (increase(netdrift_reader_audit_differences_total[1h])) > 0
            ||| % byNode,
            'netdrift on {{ %s }} corrected the datapath state it patches from change messages.' % n,
            text([
              'The datapath reader on {{ %s }} ({{ $labels.instance }}) keeps kube-proxy\'s tables' % n,
              "up to date from the kernel's change messages; its periodic full read found they differed from",
              'what the kernel holds, and replaced them. Findings are right again, but between the two reads',
              'they were judged against a wrong picture: a change message was misapplied or missed.',
            ]),
          ),
        ],
      },
    ],
  },
}
