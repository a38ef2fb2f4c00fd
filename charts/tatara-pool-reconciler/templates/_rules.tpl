{{/*
Exactly the API calls tatara-pool-reconciler makes (least privilege). Sources:
- EphemeralPools / EphemeralAllocations: informers (pool_reconciler/app.py); finalizers by merge
  patch guarded with resourceVersion, re-read (get) on a conflict (shared/kube/patch.py); status by
  merge patch on /status (pool_reconciler/executor.py).
- Processes: informer on pool members; members created, patched (exclusive claim, release,
  signals) and deleted on return (pool_reconciler/executor.py).
- Jobs: informer for reset outcomes; reset Jobs by server-side apply (create + patch).
- Events: create, and patch of a repeated Event's count (shared/kube/events.py).
Leases are granted by the namespaced Role in leader-election-rbac.yaml.
*/}}
{{- define "tatara.rules" -}}
- apiGroups: ["tatara.pleme.io"]
  resources: ["ephemeralpools", "ephemeralallocations"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["ephemeralpools/status", "ephemeralallocations/status"]
  verbs: ["patch"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
