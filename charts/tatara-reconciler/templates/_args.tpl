{{/* The binary of this chart (an entry point of the shared image). */}}
{{- define "tatara.command" -}}
tatara-reconciler
{{- end }}

{{/* Flags of tatara-reconciler (reconciler/config.py); every one also has a TATARA_* variable. */}}
{{- define "tatara.args" -}}
- --health-addr=0.0.0.0:{{ .Values.healthPort }}
- --controller-namespace={{ .Release.Namespace }}
- --watch-namespace={{ .Values.watchNamespace }}
- {{ printf "--watch-label-selector=%s" (include "tatara.watchLabelSelector" .) | quote }}
- --log-level={{ .Values.logLevel }}
- --leader-elect={{ .Values.leaderElection.enabled }}
- --leader-election-lease-name={{ include "tatara.instanceLeaseName" . }}
- --leader-election-namespace={{ include "tatara.leaseNamespace" . }}
- --leader-election-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-election-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-election-retry-period={{ .Values.leaderElection.retryPeriod }}
{{- if .Values.dynamicSharding.enabled }}
- --sharding=dynamic
- --shard-name=$(POD_NAME)
{{- end }}
- --heartbeat-seconds={{ .Values.config.heartbeatSeconds }}
- --export-worker-image={{ .Values.config.exportWorkerImage }}
- --export-worker-service-account={{ .Values.config.exportWorkerServiceAccount }}
- --fleet-cluster={{ .Values.config.fleetCluster }}
- --fleet-location={{ .Values.config.fleetLocation }}
- --fleet-domain={{ .Values.config.fleetDomain }}
- --dns-lb-target={{ .Values.config.dnsLbTarget }}
- --prometheus-url={{ .Values.config.prometheusUrl }}
- --table-status-interval={{ .Values.config.tableStatusInterval }}
- --workers={{ .Values.config.workers }}
- --table-lease-name={{ .Values.leaderElection.tableLeaseName }}
{{- end }}
