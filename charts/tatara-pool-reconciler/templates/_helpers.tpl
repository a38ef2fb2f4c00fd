{{/* Chart name, truncated to 63 characters. */}}
{{- define "tatara.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "tatara.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "tatara.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tatara.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "tatara.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tatara.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: tatara
{{- end }}

{{- define "tatara.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tatara.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tatara.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{- define "tatara.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Sharding (docs/architecture.md#sharding): one instance per entry of .Values.shards plus the unsharded one.
Templates that render per instance range over "tatara.instances" and use a context with .shard set ("" for the
unsharded instance). */}}
{{- define "tatara.instances" -}}
{{- toJson (prepend (.Values.shards | default list) "") }}
{{- end }}

{{/* The Deployment (and PDB) name of an instance: the full name, with "-<shard>" for a shard. */}}
{{- define "tatara.instanceName" -}}
{{- if .shard }}
{{- printf "%s-%s" (include "tatara.fullname" .) .shard | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- include "tatara.fullname" . }}
{{- end }}
{{- end }}

{{/* Selector labels of an instance's pods: a shard's also carry tatara.pleme.io/shard (the unsharded instance's
Deployment selector stays the chart's, so an upgrade to shards keeps it). */}}
{{- define "tatara.instanceSelectorLabels" -}}
{{ include "tatara.selectorLabels" . }}
{{- if .shard }}
tatara.pleme.io/shard: {{ .shard | quote }}
{{- end }}
{{- end }}

{{/* A label selector of exactly one instance's pods (PodDisruptionBudget, topology spread): the unsharded
instance's excludes the shards' pods. */}}
{{- define "tatara.instanceLabelSelector" -}}
matchLabels:
  {{- include "tatara.instanceSelectorLabels" . | nindent 2 }}
{{- if and (not .shard) .Values.shards }}
matchExpressions:
  - key: tatara.pleme.io/shard
    operator: DoesNotExist
{{- end }}
{{- end }}

{{/* The Lease of an instance: leaderElection.leaseName, with "-<shard>" for a shard. */}}
{{- define "tatara.instanceLeaseName" -}}
{{- if .shard }}
{{- printf "%s-%s" .Values.leaderElection.leaseName .shard }}
{{- else }}
{{- .Values.leaderElection.leaseName }}
{{- end }}
{{- end }}

{{/* --watch-label-selector of an instance (Flux's sharding): a shard's key, "!key" for the unsharded instance
beside shards, empty (everything) without shards. */}}
{{- define "tatara.watchLabelSelector" -}}
{{- if .shard }}
{{- printf "sharding.fluxcd.io/key=%s" .shard }}
{{- else if .Values.shards }}
{{- print "!sharding.fluxcd.io/key" }}
{{- end }}
{{- end }}

{{/* Every Lease name the chart's instances campaign for (the leader-election Role's resourceNames). */}}
{{- define "tatara.leaseNames" -}}
{{- $names := list }}
{{- range $shard := include "tatara.instances" . | fromJsonArray }}
{{- $names = append $names (include "tatara.instanceLeaseName" (dict "Values" $.Values "shard" $shard)) }}
{{- end }}
{{- toJson $names }}
{{- end }}
