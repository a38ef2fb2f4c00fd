{{/*
Exactly the API calls tatara-pool-reconciler makes (least privilege), in two ClusterRoles by where they are bound
(clusterrole.yaml). Every grant names the code path that uses it; the e2e RBAC test (tests/e2e/test_rbac.py) reads
the API server's audit log of a full run and fails on a grant no request used, or on a denial. Nothing here is
cluster-scoped, so with watchNamespace the chart renders no ClusterRoleBinding at all.

"tatara.rules" (<fullname>): the namespaces the reconciler watches. Bound by a ClusterRoleBinding when every
namespace is watched, by a RoleBinding in watchNamespace otherwise.
- EphemeralPools / EphemeralAllocations: informers (pool_reconciler/app.py); finalizers by merge patch guarded
  with resourceVersion, re-read (get) after a 409 (shared/kube/finalizer.py); an allocation is read live (get)
  before each bind (shared/kube/live.py); status by merge patch on /status (pool_reconciler/executor.py).
- Processes: informer on pool members; members created, patched (exclusive claim, release, signals) and deleted
  on return (pool_reconciler/executor.py).
- Jobs: list/watch, the informer for reset outcomes (pool_reconciler/app.py).
- Events: create, and patch of a repeated Event's count (shared/kube/events.py).

"tatara.jobRules" (<fullname>-jobs): bound by a RoleBinding in each namespace of "tatara.jobNamespaces" only.
Creating a Job runs a pod as any ServiceAccount of its namespace, with any Secret there mounted, so this is never
granted cluster-wide.
- Jobs: reset Jobs of pools with returnPolicy Reset, by server-side apply (create + patch), in the pool's
  namespace (pool_reconciler/executor.py).

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
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "tatara.jobRules" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "patch"]
{{- end }}

{{/*
The namespaces bound to "tatara.jobRules", as a JSON list: watchNamespace when set, then rbac.jobNamespaces.
Sorted, without duplicates.
*/}}
{{- define "tatara.jobNamespaces" -}}
{{- concat (list .Values.watchNamespace) .Values.rbac.jobNamespaces | compact | uniq | sortAlpha | toJson -}}
{{- end }}
