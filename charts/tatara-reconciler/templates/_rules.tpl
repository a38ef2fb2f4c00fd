{{/*
Exactly the API calls tatara-reconciler makes (least privilege). Sources:
- Processes: informer list/watch (reconciler/app.py); finalizers, annotations, signals, spec.suspended
  by merge patch; child Processes by server-side apply (create + patch); self-delete and child
  deletes (reconciler/executor.py); PID allocation lists Processes (reconciler/pid.py).
- processes/status: merge patch on /status (shared/kube/patch.py patch_status).
- ProcessTables: get, create when missing, nextSequence bump by JSON patch, finalizer by merge patch
  (reconciler/pid.py, reconciler/table.py); an informer (list/watch) wakes the table writer
  (reconciler/app.py); processtables/status: counts by merge patch, claims by JSON patch
  (reconciler/table.py), which also GETs a claim's holder outside --watch-namespace.
- The rendered kinds (reconciler/render.py RENDERED_KINDS: Flux Kustomizations/HelmReleases/
  OCIRepositories, Ingresses, DNSEndpoints): informers (reconciler/app.py), server-side apply, deletes
  (reconciler/executor.py), GETs for boundary conditions (reconciler/prefetch.py).
- Jobs: export Jobs by server-side apply (create + patch) in Releasing and an informer on them (list/watch,
  label tatara.pleme.io/role=export) (reconciler/exports.py, reconciler/app.py); GETs for JobAttested /
  ClosedLoopAuth conditions (reconciler/boundary.py). No delete: the garbage collector removes them with
  their Process, and ttlSecondsAfterFinished before that.
- Receipt ConfigMaps: GET only, for JobAttested / ClosedLoopAuth conditions and export receipts in
  Releasing (reconciler/prefetch.py).
- Events: create, and patch of a repeated Event's count (shared/kube/events.py); list, with a field
  selector, for the Warning Events of an export Job that has no pod (reconciler/prefetch.py).
- Discovery: GET /apis/<group>/<version> to map kinds to resources (shared/kube/discovery.py).
Leases are granted by the namespaced Role in leader-election-rbac.yaml.
*/}}
{{- define "tatara.rules" -}}
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["processes/status", "processtables/status"]
  verbs: ["patch"]
- apiGroups: ["tatara.pleme.io"]
  resources: ["processtables"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: ["kustomize.toolkit.fluxcd.io"]
  resources: ["kustomizations"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["helm.toolkit.fluxcd.io"]
  resources: ["helmreleases"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["ocirepositories"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["externaldns.k8s.io"]
  resources: ["dnsendpoints"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch", "list"]
- nonResourceURLs: ["/api", "/api/*", "/apis", "/apis/*"]
  verbs: ["get"]
{{- end }}
