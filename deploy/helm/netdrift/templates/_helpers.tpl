{{/* Name of the chart's objects' app.kubernetes.io/name. */}}
{{- define "netdrift.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Object names: the release name when it contains the chart name ("netdrift"), else <release>-netdrift. */}}
{{- define "netdrift.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "netdrift.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "netdrift.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "netdrift.labels" -}}
app.kubernetes.io/name: {{ include "netdrift.name" . }}
{{- if .Values.helmLabels }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}
{{- end }}

{{/* Selector of the agent pods (DaemonSet, Service, ServiceMonitor). */}}
{{- define "netdrift.selectorLabels" -}}
app.kubernetes.io/name: {{ include "netdrift.name" . }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "netdrift.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Localhost profile's path relative to the kubelet's seccomp directory. */}}
{{- define "netdrift.seccompProfileName" -}}
netdrift/agent.json
{{- end }}
