{{/*
Exactly the API calls tatara-reconciler makes (least privilege), in three ClusterRoles by where they are bound
(clusterrole.yaml). Every grant names the code path that uses it; the e2e RBAC test (tests/e2e/test_rbac.py) reads
the API server's audit log of a full run and fails on a grant no request used, or on a denial.

"tatara.rules" (<fullname>): the namespaces the reconciler watches. Bound by a ClusterRoleBinding when every
namespace is watched, by a RoleBinding in watchNamespace otherwise.
- Processes: informer list/watch (reconciler/app.py); finalizers, annotations, signals, spec.suspended by merge
  patch; self-delete and child deletes (reconciler/executor.py); get: the finalizer patch re-reads the Process
  after a 409 (shared/kube/finalizer.py). No create: the reconciler never makes a Process.
- processes/status: merge patch on /status (shared/kube/patch.py patch_status).
- The rendered kinds (reconciler/render.py RENDERED_KINDS: Flux Kustomizations/HelmReleases/OCIRepositories,
  Ingresses, DNSEndpoints): informers (list/watch, reconciler/app.py), server-side apply (create + patch) and
  deletes at Reaped (reconciler/executor.py). get on Kustomizations and HelmReleases only: KustomizationHealthy /
  HelmReleaseReleased conditions naming one the Process does not own (reconciler/prefetch.py).
- Jobs: list/watch, the informer on export Jobs (label tatara.pleme.io/role=export, reconciler/app.py).
- Events: create, and patch of a repeated Event's count (shared/kube/events.py); list, with a field selector,
  for the Warning Events of an export Job that has no pod (reconciler/prefetch.py job_warnings).

"tatara.clusterRules" (<fullname>-cluster): what is cluster-wide by nature, always bound by a ClusterRoleBinding.
- ProcessTables (cluster-scoped): get, create when missing, nextSequence bump by JSON patch, finalizer by merge
  patch (reconciler/pid.py, reconciler/table_keeper.py); an informer (list/watch) wakes the table writer
  (reconciler/app.py); processtables/status: counts by merge patch, claims by JSON patch (reconciler/table_writer.py).
- With watchNamespace, Processes outside it, as PIDs and claims span the cluster: get, the table writer reading
  a stable-name claim's holder in another namespace (reconciler/table_writer.py, with claims.foreign_holders); list, the highest
  sequence number held when the table is (re)created, and whether any Process still holds a PID when the table
  is being deleted (reconciler/table_keeper.py TableKeeper), and a parent's children for maxChildren (reconciler/pid.py).
- Discovery: GET /api/v1 and /apis/<group>/<version> to map kinds to resources (shared/kube/discovery.py).

"tatara.jobRules" (<fullname>-jobs): bound by a RoleBinding in each namespace of "tatara.jobNamespaces" only.
Creating a Job runs a pod as any ServiceAccount of its namespace, with any Secret there mounted, so this is never
granted cluster-wide.
- Jobs: export Jobs by server-side apply (create + patch) in Releasing (reconciler/exports.py); get:
  JobAttested / ClosedLoopAuth conditions (reconciler/prefetch.py). No delete: the garbage collector removes them
  with their Process, and ttlSecondsAfterFinished before that.
- ConfigMaps: get only, export receipts in Releasing and the receipts of JobAttested / ClosedLoopAuth
  (reconciler/prefetch.py).

Leases are granted by the namespaced Role in leader-election-rbac.yaml.
*/}}
{{- define "tatara.rules" -}}
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes"]
  verbs: ["get", "list", "watch", "patch", "delete"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes/status"]
  verbs: ["patch"]
- apiGroups: ["kustomize.toolkit.fluxcd.io"]
  resources: ["kustomizations"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["helm.toolkit.fluxcd.io"]
  resources: ["helmreleases"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["ocirepositories"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["externaldns.k8s.io"]
  resources: ["dnsendpoints"]
  verbs: ["list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch", "list"]
{{- end }}

{{- define "tatara.clusterRules" -}}
- apiGroups: ["tatara.pleme.io"]
  resources: ["processtables"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["processtables/status"]
  verbs: ["patch"]
{{- if .Values.watchNamespace }}
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes"]
  verbs: ["get", "list"]
{{- end }}
- nonResourceURLs: ["/api/*", "/apis/*"]
  verbs: ["get"]
{{- end }}

{{/*
The ProcessTable's Events (ProcessTableRecreated, ProcessTableInUse): Events of a cluster-scoped object live in
namespace "default" (shared/kube/events.py), so with watchNamespace set they need a RoleBinding there.
*/}}
{{- define "tatara.tableEventRules" -}}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}

{{- define "tatara.jobRules" -}}
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
{{- end }}

{{/*
The namespaces bound to "tatara.jobRules", as a JSON list: watchNamespace when set (the only namespace with
Processes), else exportWorker.namespaces; then rbac.jobNamespaces. Sorted, without duplicates.
*/}}
{{- define "tatara.jobNamespaces" -}}
{{- $own := ternary (list .Values.watchNamespace) .Values.exportWorker.namespaces (ne .Values.watchNamespace "") -}}
{{- concat $own .Values.rbac.jobNamespaces | compact | uniq | sortAlpha | toJson -}}
{{- end }}
