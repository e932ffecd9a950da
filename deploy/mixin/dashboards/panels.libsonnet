// Small builders for Grafana panels (schema of Grafana 10+ dashboards, Prometheus targets).
local ds = { type: 'prometheus', uid: '${datasource}' };

local target(expr, legend='', format=null) = {
  datasource: ds,
  expr: expr,
  legendFormat: legend,
  [if format != null then 'format']: format,
};

local base(type, title, description, targets, unit=null) = {
  type: type,
  title: title,
  description: description,
  datasource: ds,
  targets: [t { refId: std.char(65 + i) } for i in std.range(0, std.length(targets) - 1) for t in [targets[i]]],
  fieldConfig: { defaults: { [if unit != null then 'unit']: unit }, overrides: [] },
};

{
  target:: target,

  timeseries(title, description, targets, unit=null, stack=false)::
    base('timeseries', title, description, targets, unit) {
      fieldConfig+: { defaults+: { custom: { drawStyle: 'line', fillOpacity: if stack then 30 else 0, stacking: { mode: if stack then 'normal' else 'none' } } } },
      options: { legend: { displayMode: 'table', placement: 'right', calcs: ['max', 'lastNotNull'] }, tooltip: { mode: 'multi', sort: 'desc' } },
    },

  stat(title, description, targets, unit=null)::
    base('stat', title, description, targets, unit) {
      options: { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'value', graphMode: 'area' },
    },

  table(title, description, targets)::
    base('table', title, description, [t { format: 'table', instant: true } for t in targets]) {
      transformations: [{ id: 'merge', options: {} }, { id: 'organize', options: { excludeByName: { Time: true } } }],
    },

  heatmap(title, description, targets, unit=null)::
    base('heatmap', title, description, [t { format: 'heatmap' } for t in targets], unit) {
      options: { calculate: false, yAxis: { unit: unit }, cellGap: 1, color: { scheme: 'Oranges', mode: 'scheme' } },
    },

  stateTimeline(title, description, targets)::
    base('state-timeline', title, description, targets) {
      fieldConfig+: { defaults+: { mappings: [{ type: 'value', options: { '0': { text: 'unhealthy', color: 'red' }, '1': { text: 'healthy', color: 'green' } } }] } },
    },

  row(title):: { type: 'row', title: title, collapsed: false, panels: [] },

  // layout places rows of [panel, width] pairs on Grafana's 24-column grid and numbers the
  // panels: each element of rows is a row panel or a list of [panel, width, height].
  layout(rows)::
    local step(acc, r) =
      if std.isObject(r) then
        { y: acc.y + 1, panels: acc.panels + [r { gridPos: { x: 0, y: acc.y, w: 24, h: 1 } }] }
      else
        local h = std.foldl(function(m, p) std.max(m, p[2]), r, 0);
        local placed = std.foldl(function(a, p) {
          x: a.x + p[1],
          panels: a.panels + [p[0] { gridPos: { x: a.x, y: acc.y, w: p[1], h: p[2] } }],
        }, r, { x: 0, panels: [] });
        { y: acc.y + h, panels: acc.panels + placed.panels };
    local all = std.foldl(step, rows, { y: 0, panels: [] }).panels;
    [all[i] { id: i + 1 } for i in std.range(0, std.length(all) - 1)],
}
