"""``Cel`` boundary conditions: compile, bound and evaluate a CEL expression over a snapshot.

— docs/behaviour.md#cel-conditions; the difference from the reference:
docs/divergences.md#boundary-cel. The evaluator is the ``common-expression-language`` package (the
Rust ``cel`` interpreter behind a Python binding; the CEL language is the cel-spec's).

An expression sees three variables (:func:`activation`):

* ``process``: the Process as JSON (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``),
  exactly as the reference writes it;
* ``children``: its children and the objects its conditions name, each
  ``{apiVersion, kind, namespace, name, ready, stalled, reason, message, status}`` (``ready`` null
  when unknown), sorted by kind, namespace and name; ``childProcesses``: the Processes whose parent
  is this one, each ``{namespace, name, phase, status}``;
* ``now``: the reconcile instant, a CEL ``timestamp``.

CEL has no unbounded loops, but comprehensions over lists multiply. Every expression is bounded
before it runs (:func:`check_bounds`: at most :data:`MAX_SOURCE` characters and
:data:`MAX_COMPREHENSION_NESTING` nested comprehension macros). Those static bounds do not bound the
cost: chained comprehensions can double a value's size at each step (``[1].map(x, [x, x]).map(…)``),
so comparing it costs 2ⁿ. The reconciler therefore runs every evaluation in a worker process
(:func:`run_bounded`, driven by :mod:`reconciler.cel_runner`) under a CPU-time limit
(:data:`MAX_CPU_SECONDS`) and a memory limit (:data:`MAX_MEMORY_BYTES`) that the kernel enforces
by ending the worker. Evaluation itself is a pure function of the expression and the variables it
reads (:func:`referenced`; no clock, no memory of earlier passes), so a result may be reused for
inputs with the same :func:`inputs_digest`. Compiled programs are cached by source text.
"""

from __future__ import annotations

import functools
import hashlib
import resource
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

import msgspec

from shared.domain.api.codec import to_wire
from shared.domain.api.process import Process

if TYPE_CHECKING:
    import cel

__all__ = [
    "ERROR_PREFIXES",
    "MAX_COMPREHENSION_NESTING",
    "MAX_CPU_SECONDS",
    "MAX_MEMORY_BYTES",
    "MAX_SOURCE",
    "VARIABLES",
    "CelError",
    "CelResult",
    "activation",
    "check_bounds",
    "compile_expression",
    "compile_problem",
    "constant_type_error",
    "cost_exceeded",
    "evaluate_expression",
    "inputs_digest",
    "is_error",
    "referenced",
    "run_bounded",
]

MAX_SOURCE: Final = 1024
"""Longest expression accepted, in characters."""

MAX_COMPREHENSION_NESTING: Final = 2
"""Deepest nesting of the comprehension macros (``all``, ``exists``, ``exists_one``, ``map``,
``filter``): two nested loops over lists of a few hundred items take milliseconds."""

_MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})

MAX_CPU_SECONDS: Final = 0.25
"""CPU time one evaluation may use (user + system, of the worker process). An expression over a
Process and a few hundred children takes microseconds to a few milliseconds; Kubernetes bounds a CEL
expression at about 0.1 s of work (its per-expression cost limit)."""

MAX_MEMORY_BYTES: Final = 128 * 1024 * 1024
"""Address space one worker may grow by beyond what it held when it started evaluating: a real
expression's values are a few MB; the reconciler, its worker and this stay under the chart's 512Mi."""

VARIABLES: Final = ("process", "children", "childProcesses", "now")
"""The variables an expression may read (:func:`activation`)."""


ERROR_PREFIXES: Final = (
    "CEL expression does not compile",
    "CEL evaluation error",
    "CEL expression returned",
    "CEL expression exceeded its cost",
)
"""How the messages of :func:`evaluate_expression` that are not a false result begin."""


_RETURNED: Final = "CEL expression returned {kind}, not a bool"
"""The message of a result that is not a bool (:func:`evaluate_expression`)."""

_TRANSIENT_KINDS: Final = frozenset({"null"})
"""Result kinds that may become a bool with other inputs: ``null`` is how an unknown value reads (a
child's ``ready`` before its controller reports, an optional field not written yet)."""


def constant_type_error(message: str | None) -> str | None:
    """The result kind when ``message`` says an expression ran to its end and gave a value of a kind
    other than bool or null (``string``, ``int``, ``double``, ``bytes``, ``list``, ``map``, …), else None.

    Such a type error does not fix itself (docs/behaviour.md#cel-conditions): every lookup the
    expression made found its key, and the kinds of the values it reads are fixed by the objects'
    schemas, so the same expression gives the same kind again. A runtime error (a missing key, an
    object not there yet), an exceeded cost and a ``null`` result are not constant."""
    prefix, _, suffix = _RETURNED.partition("{kind}")
    if message is None or not message.startswith(prefix) or not message.endswith(suffix):
        return None
    kind = message[len(prefix):len(message) - len(suffix)]
    return None if kind in _TRANSIENT_KINDS else kind


def is_error(message: str | None) -> bool:
    """True for a message of an evaluation that gave no bool (:data:`ERROR_PREFIXES`)."""
    return message is not None and message.startswith(ERROR_PREFIXES)


class CelError(ValueError):
    """An expression that cannot be run: too long, too deeply nested, or not CEL (the parser's text)."""


@dataclass(frozen=True)
class CelResult:
    """One evaluation: ``value`` True/False, or None with ``error`` saying why there is no bool."""

    value: bool | None
    error: str = ""


def check_bounds(source: str) -> None:
    """Raise :class:`CelError` when ``source`` is longer than :data:`MAX_SOURCE` or nests
    comprehension macros deeper than :data:`MAX_COMPREHENSION_NESTING`.

    The nesting is read from the text: string literals and ``//`` comments are skipped, and a
    ``(`` that follows ``.<macro>`` opens a comprehension until its matching ``)``.
    """
    if len(source) > MAX_SOURCE:
        raise CelError(f"expression is {len(source)} characters long; at most {MAX_SOURCE} are allowed")
    stack: list[bool] = []
    depth = deepest = 0
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if ch in "\"'":
            i = _skip_string(source, i)
            continue
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch == "(":
            is_macro = _macro_before(source, i)
            stack.append(is_macro)
            if is_macro:
                depth += 1
                deepest = max(deepest, depth)
        elif ch == ")" and stack and stack.pop():
            depth -= 1
        i += 1
    if deepest > MAX_COMPREHENSION_NESTING:
        raise CelError(f"comprehensions nested {deepest} deep; at most {MAX_COMPREHENSION_NESTING} are allowed")


def _skip_string(source: str, start: int) -> int:
    """The index just past the string literal opening at ``start`` (``'…'``, ``"…"`` or tripled)."""
    quote = source[start]
    triple = source.startswith(quote * 3, start)
    delimiter = quote * 3 if triple else quote
    raw = start > 0 and source[start - 1] in "rR"
    i = start + len(delimiter)
    while i < len(source):
        if source[i] == "\\" and not raw:
            i += 2
            continue
        if source.startswith(delimiter, i):
            return i + len(delimiter)
        i += 1
    return len(source)


def _macro_before(source: str, paren: int) -> bool:
    j = paren - 1
    while j >= 0 and source[j].isspace():
        j -= 1
    end = j + 1
    while j >= 0 and (source[j].isalnum() or source[j] == "_"):
        j -= 1
    name = source[j + 1 : end]
    while j >= 0 and source[j].isspace():
        j -= 1
    return name in _MACROS and j >= 0 and source[j] == "."


@functools.lru_cache(maxsize=512)
def compile_expression(source: str) -> cel.Program:
    """The bounded, compiled program of ``source`` (cached by text). Raises :class:`CelError`."""
    check_bounds(source)
    # imported on the first compile, not with the module: the package's __init__ loads its command-line
    # interface too (prompt_toolkit, typer), a tenth of a second of every start (docs/runtime.md#start)
    import cel

    try:
        return cel.compile(source)
    except Exception as err:  # the binding raises ValueError; anything else is still a compile failure
        raise CelError(_first_line(str(err))) from None


def compile_problem(source: object) -> str | None:
    """Why ``source`` cannot be a Cel condition's expression (not a string, out of bounds, not CEL),
    or None when it compiles."""
    if not isinstance(source, str):
        return "params.expression must be a string"
    try:
        compile_expression(source)
    except CelError as err:
        return f"CEL expression does not compile: {err}"
    return None


def referenced(source: str) -> tuple[str, ...]:
    """Which of :data:`VARIABLES` ``source`` reads, in that order (the parser's static analysis:
    ``Program.variables()``). Raises :class:`CelError` when it does not compile."""
    names = set(compile_expression(source).variables())
    return tuple(v for v in VARIABLES if v in names)


def inputs_digest(source: str, variables: Mapping[str, Any]) -> bytes:
    """SHA-256 of ``source`` and the JSON of the variables it reads (:func:`referenced`; ``now`` as
    RFC 3339): two evaluations with equal digests have the same inputs, hence the same result.
    Raises :class:`CelError` when ``source`` does not compile."""
    read = {name: variables.get(name) for name in referenced(source)}
    body = msgspec.json.encode([source, read], order="sorted")
    return hashlib.sha256(body).digest()


def cost_exceeded(cpu_seconds: float = MAX_CPU_SECONDS, memory_bytes: int = MAX_MEMORY_BYTES) -> CelResult:
    """The result of an evaluation whose worker was ended by its limits (:func:`run_bounded`)."""
    return CelResult(None, f"CEL expression exceeded its cost: evaluation stopped at its limit of "
                           f"{cpu_seconds:g} s of CPU time or {memory_bytes // (1024 * 1024)} MiB of memory")


_memory_capped = False


def run_bounded(source: str, variables: Mapping[str, Any], cpu_seconds: float = MAX_CPU_SECONDS,
                memory_bytes: int = MAX_MEMORY_BYTES) -> CelResult:
    """:func:`evaluate_expression` for a **worker process** only (it limits the process it runs in).

    The first call caps the address space at its current size + ``memory_bytes`` (``RLIMIT_AS``);
    each call arms a ``cpu_seconds`` CPU-time timer (``ITIMER_PROF``) whose ``SIGPROF``, left at its
    default action, ends the process. A worker that dies this way (or aborts on a failed allocation)
    is what the caller reads as :func:`cost_exceeded`: the interpreter is native code that no
    Python-level timeout can interrupt.
    """
    global _memory_capped
    # the binding is imported on the first compile (compile_expression); in a fresh worker that import would
    # run under the limits below and spend the budget (a tenth of a second of CPU, its libraries mapped)
    import cel  # noqa: F401

    if not _memory_capped:
        with open("/proc/self/statm") as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = size + memory_bytes if hard == resource.RLIM_INFINITY else min(hard, size + memory_bytes)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
        _memory_capped = True
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
    try:
        return evaluate_expression(source, variables)
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)


def _first_line(text: str) -> str:
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def activation(
    process: Process, children: Mapping[Any, Any], child_processes: tuple[Process, ...], now: datetime
) -> dict[str, Any]:
    """The variables an expression sees (module docstring). ``children`` maps a ref to a
    :class:`reconciler.children.ChildState`."""
    rows = []
    for state in sorted(children.values(), key=lambda s: (s.ref.kind, s.ref.namespace, s.ref.name)):
        status = state.object.get("status")
        rows.append(
            {
                "apiVersion": state.ref.api_version,
                "kind": state.ref.kind,
                "namespace": state.ref.namespace,
                "name": state.ref.name,
                "ready": state.ready,
                "stalled": state.stalled,
                "reason": state.reason,
                "message": state.message,
                "status": to_wire(dict(status)) if isinstance(status, Mapping) else {},
            }
        )
    return {
        "process": to_wire(process),
        "children": rows,
        "childProcesses": [
            {
                "namespace": p.metadata.namespace or "default",
                "name": p.metadata.name or "",
                "phase": p.phase.value,
                "status": to_wire(p.status) if p.status is not None else {},
            }
            for p in child_processes
        ],
        "now": now,
    }


def evaluate_expression(source: str, variables: Mapping[str, Any]) -> CelResult:
    """Evaluate ``source`` over ``variables``. Never raises.

    A compile problem, a runtime error (a missing key, a division by zero, a bad conversion) or a
    non-bool result gives ``value=None`` and an ``error``.
    """
    try:
        program = compile_expression(source)
    except CelError as err:
        return CelResult(None, f"CEL expression does not compile: {err}")
    try:
        value = program.execute(dict(variables))
    except KeyError as err:
        return CelResult(None, f"CEL evaluation error: no such key: {err.args[0] if err.args else err}")
    except Exception as err:
        return CelResult(None, f"CEL evaluation error: {_first_line(str(err)) or type(err).__name__}")
    if not isinstance(value, bool):
        return CelResult(None, _RETURNED.format(kind=_cel_type(value)))
    return CelResult(value)


def _cel_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, timedelta):
        return "duration"
    return type(value).__name__
