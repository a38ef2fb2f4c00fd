"""A real Prometheus (Debian's ``prometheus`` package, which ``make test`` installs) for the tests that judge
the charts' dashboards and alerts, and the metrics' exemplars, with Prometheus itself.

:func:`prometheus` runs one on a free loopback port, scraping static targets every second under the labels a
ServiceMonitor would give them (``job``, ``namespace``; ``instance`` = the target). :func:`grafana` fills a
dashboard expression's variables the way Grafana does before sending it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import yaml

from tools.controlplane.cluster import free_port

PROMETHEUS = shutil.which("prometheus")
"""The ``prometheus`` binary, or None when it is not installed (the tests that need it skip)."""


@asynccontextmanager
async def prometheus(tmp: Path, targets: dict[str, list[str]], namespace: str, *,
                     features: Sequence[str] = ()) -> AsyncIterator[str]:
    """A Prometheus scraping ``targets`` (job → host:port list) every second, its series labelled
    ``namespace``; ``features`` are its ``--enable-feature`` flags (``exemplar-storage``: it asks targets for
    OpenMetrics and keeps their exemplars). Yields its base URL. Raises RuntimeError when not installed."""
    if PROMETHEUS is None:
        raise RuntimeError("prometheus is not installed (make test installs Debian's prometheus package)")
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": job, "static_configs": [{"targets": hosts,
                                                                       "labels": {"namespace": namespace}}]}
                                 for job, hosts in targets.items()]}
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    argv = [PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    if features:
        argv.append(f"--enable-feature={','.join(features)}")
    with (tmp / "prometheus.log").open("w") as log:
        proc = await anyio.open_process(argv, stdout=subprocess.DEVNULL, stderr=log)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            with anyio.fail_after(30):
                await proc.wait()


async def _api(session: aiohttp.ClientSession, url: str, path: str, params: dict[str, str]) -> Any:
    async with session.get(f"{url}{path}", params=params) as resp:
        body = await resp.json()
    assert body["status"] == "success", f"{path} {params}: {body}"
    return body["data"]


async def query(session: aiohttp.ClientSession, url: str, expr: str) -> list[Any]:
    """``/api/v1/query``: the instant vector of ``expr`` (its ``result`` list)."""
    result: list[Any] = (await _api(session, url, "/api/v1/query", {"query": expr}))["result"]
    return result


async def series(session: aiohttp.ClientSession, url: str, selector: str) -> list[Any]:
    """``/api/v1/series``: the label sets matching ``selector``."""
    found: list[Any] = await _api(session, url, "/api/v1/series", {"match[]": selector})
    return found


async def query_exemplars(session: aiohttp.ClientSession, url: str, expr: str, *, start: float,
                          end: float) -> list[dict[str, Any]]:
    """``/api/v1/query_exemplars``: the exemplars of every series ``expr`` selects between ``start`` and
    ``end`` (Unix seconds), as Grafana asks for them; one ``{seriesLabels, exemplars: [{labels, value,
    timestamp}]}`` per series."""
    found: list[dict[str, Any]] = await _api(session, url, "/api/v1/query_exemplars",
                                             {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}"})
    return found


def grafana(expr: str, job: str, namespace: str) -> str:
    """A dashboard expression as Grafana sends it: variables filled in (all shards, all instances),
    ``$__rate_interval`` 1 m."""
    return (expr.replace("$job", job).replace("$namespace", namespace).replace("$shard", ".*")
            .replace("$instance", ".*")
            .replace("$__rate_interval", "1m"))
