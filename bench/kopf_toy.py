"""The benchmark's toy workload written for kopf (the reference point): annotate each ConfigMap.

Run: ``kopf run --standalone --namespace NS bench/kopf_toy.py`` (KUBECONFIG set). Prints
``START <ns>/<name> <unix time>`` when a handler starts, like ``tests.support.toy_operator
--print-starts``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

SEEN = "toy.tatara.test/seen"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.posting.enabled = False
    settings.posting.level = logging.ERROR
    settings.watching.server_timeout = 300


@kopf.on.resume("", "v1", "configmaps")
@kopf.on.create("", "v1", "configmaps")
def annotate(body: kopf.Body, meta: kopf.Meta, patch: kopf.Patch, **_: Any) -> None:
    print(f"START {meta.namespace}/{meta.name} {time.time()}", flush=True)
    value = (body.get("data") or {}).get("value", "")
    if (meta.annotations or {}).get(SEEN) != value:
        patch.metadata.annotations[SEEN] = value
