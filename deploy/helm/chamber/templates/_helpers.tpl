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

{{/* The chamberd Service's in-cluster base URL: what the agents push to and the standby
replicas copy the history from; https:// with api.tls.secretName. */}}
{{- define "chamber.chamberd.serviceUrl" -}}
{{- printf "%s://%s:%d" (ternary "https" "http" (not (empty .Values.api.tls.secretName))) (include "chamber.chamberd.serviceHost" .) (int .Values.service.port) -}}
{{- end -}}

{{/* The host name in the chamberd Service's URL: the name its TLS certificate must hold. */}}
{{- define "chamber.chamberd.serviceHost" -}}
{{- printf "%s.%s.svc" (include "chamber.chamberd.name" .) .Release.Namespace -}}
{{- end -}}

{{/* Where the agents push their reports: agent.chamberdUrl when set (a chamberd of another
release), else this release's chamberd Service when chamberd is installed, else nowhere (""). */}}
{{- define "chamber.agent.chamberdUrl" -}}
{{- if .Values.agent.chamberdUrl -}}
{{- .Values.agent.chamberdUrl -}}
{{- else if .Values.chamberd.enabled -}}
{{- printf "%s/api/v1/agent/reports" (include "chamber.chamberd.serviceUrl" .) -}}
{{- end -}}
{{- end -}}

{{/* Whether each chamberd replica keeps its history on a PersistentVolumeClaim of its own
("true") or in an emptyDir (""). chamberd.persistence.enabled: true or false as set; auto:
whatever an installed StatefulSet of this release already has (a StatefulSet's volume claims
cannot change in place), else whether the cluster has a default StorageClass, or the StorageClass
chamberd.persistence.storageClassName names. `helm template` and `helm lint` ask no cluster: auto
renders an emptyDir there. */}}
{{- define "chamber.history.persistent" -}}
{{- $p := .Values.chamberd.persistence -}}
{{- if and .Values.chamberd.history (eq (toString $p.enabled) "true") -}}
true
{{- else if and .Values.chamberd.history (eq (toString $p.enabled) "auto") -}}
{{- $existing := lookup "apps/v1" "StatefulSet" .Release.Namespace (include "chamber.chamberd.name" .) -}}
{{- if $existing -}}
{{- range $existing.spec.volumeClaimTemplates -}}{{- if eq .metadata.name "data" -}}true{{- end -}}{{- end -}}
{{- else if $p.storageClassName -}}
{{- if lookup "storage.k8s.io/v1" "StorageClass" "" $p.storageClassName -}}true{{- end -}}
{{- else -}}
{{- $classes := lookup "storage.k8s.io/v1" "StorageClass" "" "" -}}
{{- $default := false -}}
{{- range ($classes.items | default list) -}}
{{- $a := .metadata.annotations | default dict -}}
{{- if or (eq (index $a "storageclass.kubernetes.io/is-default-class" | default "") "true") (eq (index $a "storageclass.beta.kubernetes.io/is-default-class" | default "") "true") -}}
{{- $default = true -}}
{{- end -}}
{{- end -}}
{{- if $default -}}true{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether the admission webhook is installed ("true" or ""): scheduling mode, with chamberd
and webhook.enabled. */}}
{{- define "chamber.webhook.enabled" -}}
{{- if and .Values.chamberd.enabled .Values.webhook.enabled (eq .Values.mode "scheduling") -}}true{{- end -}}
{{- end -}}

{{- define "chamber.webhook.name" -}}{{ include "chamber.fullname" . }}-webhook{{- end -}}
{{- define "chamber.webhook.secretName" -}}{{ include "chamber.fullname" . }}-webhook-tls{{- end -}}

{{/* Where the webhook's certificate comes from: "cert-manager" or "helm". auto: cert-manager
when the cluster serves cert-manager.io/v1. */}}
{{- define "chamber.webhook.certSource" -}}
{{- $s := .Values.webhook.certificate.source -}}
{{- if eq $s "auto" -}}
{{- ternary "cert-manager" "helm" (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}
{{- else -}}
{{- $s -}}
{{- end -}}
{{- end -}}

{{/* The Helm-made webhook certificate Secret of an earlier install, as JSON, while it is good
for more than the renewal margin (its chamber.io/renew-after annotation, Unix seconds, lies
ahead); "" otherwise, and then a new CA and certificate are made. */}}
{{- define "chamber.webhook.reusableSecret" -}}
{{- $s := lookup "v1" "Secret" .Release.Namespace (include "chamber.webhook.secretName" .) -}}
{{- if and $s $s.data -}}
{{- $renew := index ($s.metadata.annotations | default dict) "chamber.io/renew-after" | default "0" -}}
{{- if and (index $s.data "ca.crt") (index $s.data "tls.crt") (index $s.data "tls.key") (lt (now | unixEpoch | int64) (int64 $renew)) -}}
{{- $s | toJson -}}
{{- end -}}
{{- end -}}
{{- end -}}
