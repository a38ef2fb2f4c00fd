"""``tatara ps``, ``tatara signal``, ``tatara compile`` and ``tatara crds``: the operator commands.

``ps`` and ``signal`` talk to the cluster of ``--kubeconfig`` (default ``$KUBECONFIG``, then
``~/.kube/config``, then in-cluster) through :class:`~shared.kube.client.KubeClient`.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec
import yaml

from shared.domain.annotations import SIGNAL
from shared.domain.api.codec import decode, to_wire
from shared.domain.api.process import Process
from shared.domain.group import GROUP
from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError, NotFound
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all
from tools.crds import render_all
from tools.lisp import LispError, compile_ephemeral_source, compile_source
from tools.ops import SignalError, format_ps, parse_signal


def _process(raw: msgspec.Raw) -> Process:
    return decode(raw, Process)


async def list_processes(client: KubeClient, namespace: str | None) -> list[Process]:
    """Every Process in ``namespace`` (None: all namespaces), following LIST pages."""
    return (await list_all(client, PROCESSES, _process, namespace, page_size=500)).items


async def _ps(args: argparse.Namespace) -> int:
    async with await KubeClient.connect(args.kubeconfig) as client:
        processes = await list_processes(client, args.namespace)
    if not processes:
        print("No Processes found.")
        return 0
    print(format_ps(processes, datetime.now(UTC)))
    return 0


async def send_signal(client: KubeClient, name: str, namespace: str, signal: str) -> str:
    """Validate ``signal`` and write it as the ``tatara.pleme.io/signal`` annotation of Process
    ``namespace/name``; return the canonical name written.

    Raises:
        SignalError: not a known signal (nothing is written).
        NotFound: no such Process.
    """
    parsed = parse_signal(signal)
    await client.merge_patch(PROCESSES, name, {"metadata": {"annotations": {SIGNAL: parsed.value}}},
                             namespace)
    return parsed.value


async def _signal(args: argparse.Namespace) -> int:
    try:
        parse_signal(args.signal)
    except SignalError as err:
        print(f"tatara: {err}", file=sys.stderr)
        return 2
    async with await KubeClient.connect(args.kubeconfig) as client:
        try:
            written = await send_signal(client, args.name, args.namespace, args.signal)
        except NotFound:
            print(f"tatara: Process {args.namespace}/{args.name} not found", file=sys.stderr)
            return 1
    print(f"process.{GROUP}/{args.name} signalled {written}")
    return 0


def compile_lisp(source: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every ``(defpoint …)`` and ``(defephemeral …)`` form of ``source`` as a Process manifest.

    Raises:
        LispError: the source does not compile.
    """
    docs: list[dict[str, Any]] = []
    named = [(n.name, n.spec) for n in compile_source(source)]
    named += [(n.name, n.spec.to_process_spec()) for n in compile_ephemeral_source(source)]
    for name, spec in named:
        process = Process(metadata=ObjectMeta(name=name, namespace=namespace), spec=spec)
        docs.append(to_wire(process))
    return docs


def _compile(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        docs = compile_lisp(path.read_text(), args.namespace)
    except OSError as err:
        print(f"tatara: {err}", file=sys.stderr)
        return 1
    except LispError as err:
        print(f"tatara: {path}: {err}", file=sys.stderr)
        return 1
    if not docs:
        print(f"tatara: {path}: no (defpoint …) or (defephemeral …) form", file=sys.stderr)
        return 1
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))
    return 0


def _crds(_: argparse.Namespace) -> int:
    sys.stdout.write(render_all())
    return 0


def _run_async(func: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        try:
            return int(anyio.run(func, args))
        except ApiError as err:
            print(f"tatara: {err}", file=sys.stderr)
            return 1
    return run


def add_subcommands(sub: Any) -> None:
    """Register ps, signal, compile and crds on the ``tatara`` subparsers ``sub``."""
    ps = sub.add_parser("ps", help="the PID tree of Processes with phase and age (like ps -ef --forest)")
    ps.add_argument("-n", "--namespace", default=None, help="one namespace (default: all)")
    ps.add_argument("--kubeconfig", default=None, help="kubeconfig (default $KUBECONFIG, ~/.kube/config)")
    ps.set_defaults(func=_run_async(_ps))
    sig = sub.add_parser("signal", help=f"send a signal to a Process ({SIGNAL} annotation)")
    sig.add_argument("name", help="Process name")
    sig.add_argument("signal", help="SIGHUP, SIGTERM, SIGKILL, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT (or HUP, …)")
    sig.add_argument("-n", "--namespace", default="default", help="namespace of the Process (default: default)")
    sig.add_argument("--kubeconfig", default=None, help="kubeconfig (default $KUBECONFIG, ~/.kube/config)")
    sig.set_defaults(func=_run_async(_signal))
    comp = sub.add_parser("compile", help="compile a tatara-lisp file into Process YAML on stdout")
    comp.add_argument("file", help="a .lisp file of (defpoint …) / (defephemeral …) forms")
    comp.add_argument("-n", "--namespace", default=None, help="metadata.namespace of the output")
    comp.set_defaults(func=_compile)
    crds = sub.add_parser("crds", help="print every CRD tatara installs (its own + Flux/DNSEndpoint schemas)")
    crds.set_defaults(func=_crds)
