{{/* The binary of this chart (an entry point of the shared image). */}}
{{- define "tatara.command" -}}
tatara-pool-reconciler
{{- end }}

{{/* Flags of tatara-pool-reconciler: the same runtime flags as tatara-reconciler (reconciler/config.py). */}}
{{- define "tatara.args" -}}
- --health-addr=0.0.0.0:{{ .Values.healthPort }}
- --controller-namespace={{ .Release.Namespace }}
- --watch-namespace={{ .Values.watchNamespace }}
- --log-level={{ .Values.logLevel }}
- --leader-elect={{ .Values.leaderElection.enabled }}
- --leader-election-lease-name={{ .Values.leaderElection.leaseName }}
- --leader-election-namespace={{ include "tatara.leaseNamespace" . }}
- --leader-election-lease-duration={{ .Values.leaderElection.leaseDuration }}
- --leader-election-renew-deadline={{ .Values.leaderElection.renewDeadline }}
- --leader-election-retry-period={{ .Values.leaderElection.retryPeriod }}
{{- end }}
