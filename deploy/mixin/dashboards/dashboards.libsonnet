{
  grafanaDashboards+:: {
    'netdrift.json': (import 'netdrift.libsonnet')($._config),
  },
}
