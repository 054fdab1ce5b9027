{{/* Name of the chart, or nameOverride. */}}
{{- define "chamber.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Base name of the release's objects: fullnameOverride, else <release> when it already holds
the chart name, else <release>-<name>. Short enough for the longest suffix (-dashboard). */}}
{{- define "chamber.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "chamber.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "chamber.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "chamber.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: chamber
{{- end -}}

{{/* Selector labels of one component: include "chamber.selectorLabels" (list . "chamberd") */}}
{{- define "chamber.selectorLabels" -}}
{{- $top := index . 0 -}}
app.kubernetes.io/name: {{ include "chamber.name" $top }}
app.kubernetes.io/instance: {{ $top.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "chamber.chamberd.name" -}}{{ include "chamber.fullname" . }}{{- end -}}
{{- define "chamber.agent.name" -}}{{ include "chamber.fullname" . }}-agent{{- end -}}
{{- define "chamber.dashboard.name" -}}{{ include "chamber.fullname" . }}-dashboard{{- end -}}

{{/* The scheduler name chamberd watches: none in monitoring mode. */}}
{{- define "chamber.schedulerName" -}}
{{- if eq .Values.mode "scheduling" -}}{{ .Values.chamberd.schedulerName }}{{- else -}}chamber-disabled{{- end -}}
{{- end -}}

{{- define "chamber.image" -}}
{{- $img := index . 0 -}}{{- $top := index . 1 -}}
{{- printf "%s:%s" $img.repository (default $top.Chart.AppVersion $img.tag) -}}
{{- end -}}

{{/* Restricted pod security: non-root, no privilege escalation, every capability dropped. */}}
{{- define "chamber.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
