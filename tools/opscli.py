"""``tatara ps``, ``tatara signal``, ``tatara compile`` and ``tatara crds``: the operator commands.

``ps`` and ``signal`` talk to the cluster of ``--kubeconfig`` (default ``$KUBECONFIG``, then
``~/.kube/config``, then in-cluster) through :class:`~shared.kube.client.KubeClient`.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import msgspec
import yaml

from reconciler.boundary import cel_problems
from shared.domain.annotations import SIGNAL
from shared.domain.api.codec import decode, to_wire
from shared.domain.api.envmatrix import breathe_bands
from shared.domain.api.process import Process, ProcessSpec
from shared.domain.canonical_json import canonical_json
from shared.domain.group import GROUP
from shared.domain.resources import PROCESSES
from shared.kube.client import KubeClient
from shared.kube.errors import ApiError, NotFound
from shared.kube.meta import ObjectMeta
from shared.kube.pager import list_all
from tools.crds import render_all
from tools.lisp import (
    DEFENVMATRIX,
    DEFEPHEMERAL,
    DEFPOINT,
    LispError,
    compile_env_matrix_source,
    compile_ephemeral_source,
    compile_source,
)
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


class CompileProblem(ValueError):
    """A compiled Process that can never run as written: a ``Cel`` condition that does not compile
    (docs/behaviour.md#cel-conditions). The text names the Process and the condition."""


@dataclass(frozen=True)
class CompiledRow:
    """One compiled document for ``tatara compile --dry-run``: its name, the form it came from and,
    for a matrix environment, its coordinate and ``axis=value`` pairs."""

    name: str
    form: str
    coordinate: list[int] | None = None
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Compiled:
    """What :func:`compile_report` makes of a source: the manifests, one row per Process, and the
    warnings (what a matrix's expansion drops or ignores)."""

    docs: list[dict[str, Any]] = field(default_factory=list)
    rows: list[CompiledRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value, sort_keys=True).decode()


def compile_report(source: str, namespace: str | None = None) -> Compiled:
    """Every ``defpoint``, ``defephemeral`` and ``defenvmatrix`` form of ``source`` as manifests
    (docs/lisp.md#tatara-compile): the defpoint forms, then the defephemeral forms (lowered), then each
    matrix's environments in expansion order (docs/wire-format.md#expand), each Process followed by its
    breathe Bands (docs/wire-format.md#breathe-bands).

    Raises:
        LispError: the source does not compile.
        CompileProblem: a Cel condition of a compiled Process does not compile.
    """
    out = Compiled()
    named: list[tuple[str, ProcessSpec, CompiledRow, list[dict[str, Any]]]] = []
    named += [(n.name, n.spec, CompiledRow(n.name, DEFPOINT), []) for n in compile_source(source)]
    named += [
        (n.name, n.spec.to_process_spec(), CompiledRow(n.name, DEFEPHEMERAL), [])
        for n in compile_ephemeral_source(source)
    ]
    for matrix in compile_env_matrix_source(source):
        spec = matrix.spec
        out.warnings.extend(f"defenvmatrix {matrix.name}: {w}" for w in spec.diagnostics())
        for env, coordinate in zip(spec.expand(matrix.name), spec.selected(), strict=True):
            values = tuple(
                f"{axis.name}={_value_text(axis.values[i])}" for axis, i in zip(spec.axes, coordinate, strict=True)
            )
            row = CompiledRow(env.name, DEFENVMATRIX, coordinate, values)
            named.append((env.name, env.spec.to_process_spec(), row, breathe_bands(spec, env)))
    seen: set[str] = set()
    for name, spec_, row, extra in named:
        process = Process(metadata=ObjectMeta(name=name, namespace=namespace), spec=spec_)
        problems = cel_problems(process)
        if problems:
            raise CompileProblem(f"{row.form} {name}: " + "; ".join(problems))
        if name in seen:
            out.warnings.append(f"{row.form} {name}: the name is used twice; the later document replaces the earlier")
        seen.add(name)
        out.docs.append(to_wire(process))
        out.docs.extend(extra)
        out.rows.append(row)
    return out


def compile_lisp(source: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """The manifests of :func:`compile_report` (Processes, and breathe Bands after a matrix's).

    Raises:
        LispError: the source does not compile.
        CompileProblem: a Cel condition does not compile.
    """
    return compile_report(source, namespace).docs


def format_rows(rows: list[CompiledRow]) -> str:
    """The ``--dry-run`` table: NAME, FORM, COORDINATE (``-`` outside a matrix) and VALUES."""
    table = [("NAME", "FORM", "COORDINATE", "VALUES")]
    for row in rows:
        coordinate = "-" if row.coordinate is None else "[" + ",".join(map(str, row.coordinate)) + "]"
        table.append((row.name, row.form, coordinate, " ".join(row.values) or "-"))
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    return "\n".join(
        "  ".join([*(cell.ljust(w) for cell, w in zip(r[:3], widths, strict=True)), r[3]]).rstrip() for r in table
    )


def _compile(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        compiled = compile_report(path.read_text(), args.namespace)
    except OSError as err:
        print(f"tatara: {err}", file=sys.stderr)
        return 1
    except (LispError, CompileProblem) as err:
        print(f"tatara: {path}: {err}", file=sys.stderr)
        return 1
    for warning in compiled.warnings:
        print(f"tatara: {path}: warning: {warning}", file=sys.stderr)
    if not compiled.docs:
        print(f"tatara: {path}: nothing to write: no defpoint, defephemeral or defenvmatrix form, "
              "or only matrices that expand to nothing", file=sys.stderr)
        return 1
    if args.dry_run:
        print(format_rows(compiled.rows))
        return 0
    sys.stdout.write(yaml.safe_dump_all(compiled.docs, sort_keys=False, explicit_start=True))
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
    comp.add_argument("file", help="a .lisp file of (defpoint …) / (defephemeral …) / (defenvmatrix …) forms")
    comp.add_argument("-n", "--namespace", default=None, help="metadata.namespace of the output")
    comp.add_argument("--dry-run", action="store_true",
                      help="print the table of names (and matrix coordinates) instead of the manifests")
    comp.set_defaults(func=_compile)
    crds = sub.add_parser("crds", help="print every CRD tatara installs (its own + Flux/DNSEndpoint schemas)")
    crds.set_defaults(func=_crds)
