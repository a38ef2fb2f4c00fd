{{/*
The API calls tatara-pool-reconciler makes (least privilege). pool_reconciler/ has no executor
yet; these follow its decisions (pool_reconciler/pool_decide.py, allocation_decide.py) and the
shared runtime, and the RBAC-proven e2e test will pin them:
- EphemeralPools / EphemeralAllocations: informers (list/watch), finalizers by merge patch guarded
  with resourceVersion (get on conflict), exclusive bind claims by merge patch; status by merge patch.
- Processes: informer on pool members; members created (server-side apply: create + patch),
  signalled by annotation patch, deleted on return.
- Jobs: reset Jobs created, watched for their outcome and deleted afterwards.
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
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
