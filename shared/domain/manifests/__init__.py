"""Typed manifests of the objects the reconcilers render besides tatara's own kinds: Flux objects,
Ingress and DNSEndpoint, Jobs — one module per API group family. Each renders itself as the JSON the
API server receives (``to_json``), with ``apiVersion`` and ``kind`` always present, so the runtime's
server-side apply sends exactly that."""
