"""What both tatara binaries are built from, in two rooms (docs/architecture.md).

- :mod:`shared.kube` — the controller runtime: client, informer, work queue, controller, finalizers,
  writes, leader election, metrics. It knows no tatara type and could be published alone.
- :mod:`shared.domain` — tatara itself: keys, models, identity hashes, the one table of kinds.
"""

__version__ = "0.1.0"
