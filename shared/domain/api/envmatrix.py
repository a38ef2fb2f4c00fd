"""``EnvMatrixSpec`` (``defenvmatrix``): one EphemeralSpec base fanned out into N named environments.

— docs/wire-format.md#envmatrixspec. No cluster object exists for a matrix: ``tatara compile``
renders each generated environment as a Process, with optional breathe Band objects alongside
(:func:`breathe_bands`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any, ClassVar, Final, Literal

import msgspec

from shared.domain.api.ephemeral import EphemeralSpec
from shared.domain.api.intent import AplicacaoIntent
from shared.domain.api.wire import UInt32, UInt64, WireStruct
from shared.domain.canonical_json import canonical_json, format_float

__all__ = [
    "CARTESIAN",
    "MAGIC_PATHS",
    "USIZE_MAX",
    "BreatheDimension",
    "BreatheEnvelope",
    "EnvMatrixSpec",
    "ExplicitSelect",
    "MatrixAxis",
    "MatrixBudget",
    "NamedEphemeral",
    "SelectStrategy",
    "apply_axis",
    "breathe_bands",
    "slug",
    "slug_value",
]

USIZE_MAX: Final = 2**64 - 1
"""Where :meth:`EnvMatrixSpec.selection_size` saturates (the reference counts in a 64-bit ``usize``)."""

CARTESIAN: Final = "Cartesian"
"""The bare-string spelling of the default :data:`SelectStrategy`."""

MAGIC_PATHS: Final = {"@version": "version", "@profile": "profile", "@chart-ref": "chart_ref"}
"""Axis paths that set an ``aplicacao`` field instead of writing into ``valuesOverlay``."""


class MatrixAxis(WireStruct):
    """One dimension of a matrix: a name, where its value goes, and its values.

    ``path`` is a dot path into ``aplicacao.valuesOverlay`` (``""`` merges an object value into the
    overlay's root), or one of ``@version``, ``@profile``, ``@chart-ref``. ``values`` should be an
    array; anything else, including an empty array, contributes zero values.
    """

    _omit_when_default: ClassVar[frozenset[str]] = frozenset({"path"})

    name: str
    path: str = ""
    values: Any

    @property
    def length(self) -> int:
        """``L[i]``: the number of values (0 when ``values`` is not an array)."""
        return len(self.values) if isinstance(self.values, list) else 0


class ExplicitSelect(WireStruct):
    """``{"Explicit": [[i0, i1, …], …]}``: coordinate tuples, one zero-based value index per axis."""

    explicit: list[list[UInt64]] = msgspec.field(name="Explicit")


SelectStrategy = Literal["Cartesian"] | ExplicitSelect
"""Which coordinates a matrix generates: ``"Cartesian"`` (every combination, the default) or
:class:`ExplicitSelect`."""


class MatrixBudget(WireStruct):
    """Caps on a matrix. ``maxEnvs`` 0 means no cap; ``maxConcurrent``, when set, overrides the
    base's ``maxConcurrent`` on every generated spec."""

    max_envs: UInt32 = 0
    cost_ceiling: str | None = None
    """Free text such as ``$5/h``; written on the breathe objects as an annotation."""
    max_concurrent: UInt32 | None = None


class BreatheDimension(WireStruct):
    """One breathe band: ``kind`` (``memory``/``mem``, ``cpu``, ``storage``/``disk``), floor and ceiling."""

    kind: str
    floor: str
    ceiling: str


class BreatheEnvelope(WireStruct):
    """Resource bands rendered next to every generated environment (breathe.pleme.io/v1 Bands)."""

    dimensions: list[BreatheDimension]
    cooldown_seconds: UInt64 = 60
    dry_run: bool = True
    target_kind: str = "Deployment"


class NamedEphemeral(WireStruct):
    """One environment of an expanded matrix: its name and its EphemeralSpec."""

    name: str
    spec: EphemeralSpec


class EnvMatrixSpec(WireStruct):
    """A permutation generator: fans ``base`` out along ``axes`` into named EphemeralSpecs."""

    base: EphemeralSpec
    axes: list[MatrixAxis]
    select: SelectStrategy = CARTESIAN
    budget: MatrixBudget = MatrixBudget()
    breathe: BreatheEnvelope | None = None

    def lengths(self) -> list[int]:
        """``L[i]`` of every axis, in order."""
        return [axis.length for axis in self.axes]

    def _valid_tuple(self, coordinate: list[int], lengths: list[int]) -> bool:
        return len(coordinate) == len(lengths) and all(c < n for c, n in zip(coordinate, lengths, strict=True))

    def coordinates(self) -> Iterator[list[int]]:
        """The selected coordinates in order (docs/wire-format.md#coordinates), lazily.

        Cartesian: ``[[]]`` with no axes, nothing when an axis is empty, otherwise every
        mixed-radix digit list with axis 0 changing fastest. Explicit: the tuples of the right
        length whose every index is in range, in the given order, duplicates kept.
        """
        lengths = self.lengths()
        if isinstance(self.select, ExplicitSelect):
            return (list(c) for c in self.select.explicit if self._valid_tuple(c, lengths))
        if any(n == 0 for n in lengths):
            return iter(())
        # itertools.product varies its last argument fastest: feed it the axes reversed.
        ranges = [range(n) for n in reversed(lengths)]
        return (list(reversed(c)) for c in itertools.product(*ranges))

    def selection_size(self) -> int:
        """How many coordinates :meth:`coordinates` yields, without building them; the Cartesian
        product saturates at :data:`USIZE_MAX`."""
        lengths = self.lengths()
        if isinstance(self.select, ExplicitSelect):
            return sum(1 for c in self.select.explicit if self._valid_tuple(c, lengths))
        size = 1
        for n in lengths:
            size *= n
        return min(size, USIZE_MAX)

    def invalid_tuples(self) -> list[tuple[int, list[int]]]:
        """``(position, tuple)`` of every Explicit tuple :meth:`coordinates` drops (wrong length or an
        index out of range); empty for Cartesian. For diagnostics: expansion drops them silently."""
        if not isinstance(self.select, ExplicitSelect):
            return []
        lengths = self.lengths()
        return [(i, list(c)) for i, c in enumerate(self.select.explicit) if not self._valid_tuple(c, lengths)]

    def selected(self) -> list[list[int]]:
        """The coordinates :meth:`expand` materializes: :meth:`coordinates`, the first
        ``budget.maxEnvs`` when that is > 0."""
        coordinates: Iterator[list[int]] = self.coordinates()
        if self.budget.max_envs > 0:
            coordinates = itertools.islice(coordinates, self.budget.max_envs)
        return list(coordinates)

    def diagnostics(self) -> list[str]:
        """What in this matrix the expansion silently drops or ignores, one sentence each, for a
        compiler to report (docs/lisp.md#defenvmatrix); expansion itself never fails:

        an axis without values (the matrix is empty), an ``@…`` path that is not one of
        :data:`MAGIC_PATHS` (written into the overlay as a key), a dot path with an empty segment, a
        non-string value at a magic path (ignored), an Explicit tuple of the wrong length or out of
        range (dropped), a ``maxEnvs`` below the selection size (the rest dropped).
        """
        out: list[str] = []
        for axis in self.axes:
            where = f"axis {axis.name!r}"
            if axis.length == 0:
                out.append(f"{where} has no values (values must be a non-empty list): the matrix expands to nothing")
            if axis.path.startswith("@") and axis.path not in MAGIC_PATHS:
                known = ", ".join(MAGIC_PATHS)
                out.append(
                    f"{where}: path {axis.path!r} names no field (one of {known}); "
                    "it is written into valuesOverlay as a key"
                )
            elif axis.path and "" in axis.path.split("."):
                out.append(f"{where}: path {axis.path!r} has an empty segment")
            if axis.path in MAGIC_PATHS and isinstance(axis.values, list):
                for i, value in enumerate(axis.values):
                    if not isinstance(value, str):
                        out.append(f"{where}: value {i} is not a string; {axis.path} ignores it")
        lengths = self.lengths()
        for i, coordinate in self.invalid_tuples():
            if len(coordinate) != len(lengths):
                why = f"has {len(coordinate)} indices for {len(lengths)} axes"
            else:
                why = "is out of range for axis lengths " + "x".join(map(str, lengths))
            out.append(f"select Explicit tuple {i} {coordinate} {why}: dropped")
        size = self.selection_size()
        cap = self.budget.max_envs
        if 0 < cap < size:
            out.append(f"budget maxEnvs {cap} is below the {size} selected environments: {size - cap} dropped")
        return out

    def expand(self, matrix_name: str) -> list[NamedEphemeral]:
        """The environments of this matrix, in coordinate order (docs/wire-format.md#expand).

        At most ``budget.maxEnvs`` (when > 0; the rest are dropped silently). Each is ``base`` with
        every axis's value applied (:func:`apply_axis`), ``maxConcurrent`` overridden by the budget's
        when set, named ``matrix_name`` plus ``-<slug(axis)>-<slug_value(value)>`` per axis (never
        slugged or truncated as a whole), and ``aplicacao.releaseName`` set to that name.
        """
        out: list[NamedEphemeral] = []
        for coordinate in self.selected():
            aplicacao = self.base.aplicacao
            suffixes: list[str] = []
            for axis, index in zip(self.axes, coordinate, strict=True):
                value = axis.values[index]
                aplicacao = apply_axis(aplicacao, axis.path, value)
                suffixes.append(f"{slug(axis.name)}-{slug_value(value)}")
            name = matrix_name if not self.axes else "-".join([matrix_name, *suffixes])
            aplicacao = msgspec.structs.replace(aplicacao, release_name=name)
            spec = msgspec.structs.replace(self.base, aplicacao=aplicacao)
            if self.budget.max_concurrent is not None:
                spec = msgspec.structs.replace(spec, max_concurrent=self.budget.max_concurrent)
            out.append(NamedEphemeral(name=name, spec=spec))
        return out


def apply_axis(aplicacao: AplicacaoIntent, path: str, value: Any) -> AplicacaoIntent:
    """``aplicacao`` with one axis value applied (docs/wire-format.md#apply-axis); never mutates it.

    ``@version``/``@profile``/``@chart-ref`` set that field when ``value`` is a string and are
    ignored otherwise; any other path writes into ``valuesOverlay`` (made ``{}`` when not an object):
    ``""`` merges an object value into the root (a non-object does nothing), a dot path descends,
    creating ``{}`` for missing keys and replacing non-objects, and sets the last segment.
    """
    magic = MAGIC_PATHS.get(path)
    if magic is not None:
        if not isinstance(value, str):
            return aplicacao
        return msgspec.structs.replace(aplicacao, **{magic: value})
    overlay = aplicacao.values_overlay
    root: dict[str, Any] = copy.deepcopy(overlay) if isinstance(overlay, dict) else {}
    if path == "":
        if isinstance(value, dict):
            root.update(copy.deepcopy(value))
    else:
        *parents, last = path.split(".")
        node = root
        for segment in parents:
            child = node.get(segment)
            if not isinstance(child, dict):
                child = node[segment] = {}
            node = child
        node[last] = copy.deepcopy(value)
    return msgspec.structs.replace(aplicacao, values_overlay=root)


def slug(text: str) -> str:
    """ASCII-lowercased; every run of characters other than ASCII letters and digits becomes one
    ``-``; ``-`` trimmed from both ends; ``x`` when nothing is left (docs/wire-format.md#slugs)."""
    out: list[str] = []
    for ch in text:
        if ch.isascii() and ch.isalnum():
            out.append(ch.lower())
        elif not out or out[-1] != "-":
            out.append("-")
    return "".join(out).strip("-") or "x"


def slug_value(value: Any) -> str:
    """A value's name segment: a string slugged, a bool as ``true``/``false``, a number's JSON text
    slugged (``1.5`` → ``1-5``), anything else its compact JSON text slugged (``[1,2]`` → ``1-2``)."""
    if isinstance(value, str):
        return slug(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return slug(str(value))
    if isinstance(value, float):
        return slug(format_float(value))
    return slug(canonical_json(value, sort_keys=True).decode())


_BAND_KINDS: Final = {
    "memory": ("MemoryBand", "memory"),
    "mem": ("MemoryBand", "memory"),
    "cpu": ("CpuBand", "cpu"),
    "storage": ("StorageBand", "storage"),
    "disk": ("StorageBand", "storage"),
}

BREATHE_API_VERSION: Final = "breathe.pleme.io/v1"
COST_CEILING_ANNOTATION: Final = "breathe.pleme.io/cost-ceiling"


def breathe_bands(matrix: EnvMatrixSpec, env: NamedEphemeral) -> list[dict[str, Any]]:
    """The breathe Band objects of one environment (docs/wire-format.md#breathe-bands): none
    without ``breathe``; otherwise one per dimension whose kind is recognized (ASCII
    case-insensitive), in order, unknown kinds dropped and duplicates kept."""
    if matrix.breathe is None:
        return []
    envelope = matrix.breathe
    aplicacao = env.spec.aplicacao
    annotations: dict[str, str] = {}
    if matrix.budget.cost_ceiling is not None:
        annotations[COST_CEILING_ANNOTATION] = matrix.budget.cost_ceiling
    out: list[dict[str, Any]] = []
    for dimension in envelope.dimensions:
        known = _BAND_KINDS.get(_ascii_lower(dimension.kind))
        if known is None:
            continue
        kind, segment = known
        out.append(
            {
                "apiVersion": BREATHE_API_VERSION,
                "kind": kind,
                "metadata": {
                    "name": f"{env.name}-{segment}",
                    "namespace": env.name if aplicacao.target_namespace is None else aplicacao.target_namespace,
                    "labels": {"matrix-env": env.name},
                    "annotations": dict(annotations),
                },
                "spec": {
                    "targetRef": {
                        "kind": envelope.target_kind,
                        "name": env.name if aplicacao.release_name is None else aplicacao.release_name,
                    },
                    "floor": dimension.floor,
                    "ceiling": dimension.ceiling,
                    "cooldownSeconds": envelope.cooldown_seconds,
                    "dryRun": envelope.dry_run,
                },
            }
        )
    return out


def _ascii_lower(text: str) -> str:
    return "".join(ch.lower() if ch.isascii() else ch for ch in text)
