"""Sharding: static, Flux's convention (docs/architecture.md#sharding), and dynamic, a ring of instances that a
sharder assigns objects to (docs/architecture.md#dynamic-sharding; the runtime's part is
:mod:`shared.kube.sharding`, this module gives it tatara's keys: :func:`ring`).

Each controller instance takes ``--watch-label-selector``, a Kubernetes label selector applied to the
informers of the objects it owns (the reconciler's Processes; the pool reconciler's pools and
allocations). A shard instance runs with ``sharding.fluxcd.io/key=<shard>``; the unsharded instance with
``!sharding.fluxcd.io/key`` takes what no shard claims; an empty selector (the default) watches
everything, as before sharding. The objects' label :data:`SHARD_KEY` is the one Flux's controllers shard
on, so a Process on shard X renders Flux objects a Flux shard X reconciles (:func:`shard_labels`).

This module is pure: :func:`parse_selector` parses the selector grammar of the API server
(``k8s.io/apimachinery/pkg/labels``: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``,
``k``, ``!k``, ``k>n``, ``k<n``, comma-separated, all must hold) so a bad flag fails at start-up with
status 2 rather than as a 400 on the first LIST, and :meth:`Selector.matches` tells whether an object's
labels are this instance's (for an object read outside the informers, e.g. the pool an allocation names).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from shared.domain.group import GROUP, key
from shared.kube.ring import Ring

__all__ = [
    "DRAIN_LABEL_PREFIX",
    "RING_LABEL",
    "SHARD_KEY",
    "SHARD_LABEL_PREFIX",
    "UNSHARDED_SELECTOR",
    "Requirement",
    "Selector",
    "check_label_value",
    "combine_selectors",
    "parse_selector",
    "ring",
    "shard_labels",
    "shard_of",
    "shard_selector",
]

SHARD_KEY: Final = "sharding.fluxcd.io/key"
"""The label Flux shards on; tatara's instances shard on the same one."""

UNSHARDED_SELECTOR: Final = f"!{SHARD_KEY}"
"""The selector of the instance that takes every object no shard claims."""

RING_LABEL: Final = key("ring")
"""Label of a dynamic-sharding member Lease; value: the ring's name (docs/architecture.md#dynamic-sharding)."""

SHARD_LABEL_PREFIX: Final = f"shard.{GROUP}"
"""``shard.tatara.pleme.io/<ring>``: the label the sharder sets on an object; value: the member it is assigned to."""

DRAIN_LABEL_PREFIX: Final = f"drain.{GROUP}"
"""``drain.tatara.pleme.io/<ring>``: present (value ``true``) while the sharder waits for an object's member to
hand it over."""

Operator = Literal["=", "!=", "in", "notin", "exists", "!", "gt", "lt"]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME_RE: Final = re.compile(_NAME)
_PREFIX_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_TOKEN_RE: Final = re.compile(r"\s*(==|!=|=|!|\(|\)|,|>|<|[^\s=!(),<>]+)")


def _check_key(key: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX_RE.fullmatch(prefix)):
        raise ValueError(f"invalid label key {key!r}: the prefix must be a DNS subdomain")
    if not name or len(name) > 63 or not _NAME_RE.fullmatch(name):
        raise ValueError(f"invalid label key {key!r}: the name must be 1-63 characters of [A-Za-z0-9-_.], "
                         "beginning and ending with a letter or digit")


def _check_value(value: str) -> None:
    if value and (len(value) > 63 or not _NAME_RE.fullmatch(value)):
        raise ValueError(f"invalid label value {value!r}: at most 63 characters of [A-Za-z0-9-_.], "
                         "beginning and ending with a letter or digit")


@dataclass(frozen=True)
class Requirement:
    """One term of a selector: ``key``, an operator, and its values (one for ``=``/``!=``/``gt``/``lt``,
    any number for ``in``/``notin``, none for ``exists``/``!``)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfy it; ``!=`` and ``notin`` hold for an object without the key, as the
        API server reads them."""
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case "=" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case "exists":
                return present
            case "!":
                return not present
            case "gt" | "lt":
                if not present or not value.lstrip("-").isdigit():
                    return False
                bound = int(self.values[0])
                return int(value) > bound if self.operator == "gt" else int(value) < bound
        return False  # pragma: no cover - the operators above are all there are


@dataclass(frozen=True)
class Selector:
    """A parsed label selector: every requirement must hold; none (the empty selector) matches all."""

    text: str
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with ``labels`` is selected."""
        found = labels or {}
        return all(r.matches(found) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True for the empty selector (every object)."""
        return not self.requirements


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[str] = []
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            found = _TOKEN_RE.match(text, position)
            if found is None:  # pragma: no cover - every character begins some token
                raise ValueError(f"unexpected character at {position}")
            self.items.append(found.group(1))
            position = found.end()
        self.index = 0

    def peek(self) -> str | None:
        return self.items[self.index] if self.index < len(self.items) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ValueError("the selector ends too early")
        self.index += 1
        return token


_OPERATORS: Final[Mapping[str, Operator]] = {"=": "=", "==": "=", "!=": "!=", "in": "in", "notin": "notin",
                                              ">": "gt", "<": "lt"}


def _value_set(tokens: _Tokens) -> tuple[str, ...]:
    if tokens.take() != "(":
        raise ValueError("expected '(' after in / notin")
    values: list[str] = []
    while True:
        token = tokens.take()
        if token == ")" and not values:
            break
        if token in (",", ")"):
            values.append("")  # `k in (a,)`: an empty value
        else:
            values.append(token)
            token = tokens.take()
        if token == ")":
            break
        if token != ",":
            raise ValueError(f"expected ',' or ')' in a value set, got {token!r}")
    return tuple(values)


def _requirement(tokens: _Tokens) -> Requirement:
    token = tokens.take()
    if token == "!":
        key = tokens.take()
        _check_key(key)
        return Requirement(key, "!")
    key = token
    _check_key(key)
    following = tokens.peek()
    if following is None or following == ",":
        return Requirement(key, "exists")
    operator = _OPERATORS.get(tokens.take())
    if operator is None:
        raise ValueError(f"expected an operator after {key!r}, got {following!r}")
    if operator in ("in", "notin"):
        values = _value_set(tokens)
        if not values:
            raise ValueError(f"{key} {operator} needs at least one value")
    else:
        after = tokens.peek()
        values = ("",) if after is None or after == "," else (tokens.take(),)
        if operator in ("gt", "lt") and not values[0].lstrip("-").isdigit():
            raise ValueError(f"{key} {following} needs an integer, got {values[0]!r}")
    for value in values:
        if operator not in ("gt", "lt"):
            _check_value(value)
    return Requirement(key, operator, values)


def parse_selector(text: str) -> Selector:
    """Parse a label selector as the API server does; the empty text is the selector of every object.

    Raises:
        ValueError: the text is not a selector (the message says where), or names an invalid key or value.
    """
    tokens = _Tokens(text)
    requirements: list[Requirement] = []
    while tokens.peek() is not None:
        requirements.append(_requirement(tokens))
        separator = tokens.peek()
        if separator is None:
            break
        if tokens.take() != ",":
            raise ValueError(f"expected ',' between requirements, got {separator!r}")
        if tokens.peek() is None:
            raise ValueError("the selector ends with ','")
    return Selector(text.strip(), tuple(requirements))


def shard_selector(shard: str | None) -> str:
    """The ``--watch-label-selector`` of shard ``shard``; None: the unsharded instance's."""
    return UNSHARDED_SELECTOR if shard is None else f"{SHARD_KEY}={shard}"


def shard_of(labels: Mapping[str, str] | None) -> str | None:
    """The shard an object with ``labels`` is on; None: unsharded (no :data:`SHARD_KEY` label)."""
    return (labels or {}).get(SHARD_KEY)


def shard_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    """The labels an object derived from one with ``labels`` carries to stay on its shard: ``{SHARD_KEY:
    shard}``, or nothing for an unsharded one (a Process's rendered Flux objects, a pool's members)."""
    shard = shard_of(labels)
    return {} if shard is None else {SHARD_KEY: shard}


def check_label_value(what: str, value: str) -> None:
    """Raise ValueError naming ``what`` unless ``value`` is a non-empty label value (1-63 characters of
    [A-Za-z0-9-_.], beginning and ending with a letter or digit): a ring or member name is one."""
    if not value:
        raise ValueError(f"{what} must not be empty")
    try:
        _check_value(value)
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None


def ring(name: str) -> Ring:
    """The keys of dynamic-sharding ring ``name``: member Leases labelled :data:`RING_LABEL` = ``name``, objects
    labelled ``shard.tatara.pleme.io/<name>`` = their member and ``drain.tatara.pleme.io/<name>`` while moving.

    Raises:
        ValueError: ``name`` is not a label value (it is also a label key's name part).
    """
    check_label_value("the ring name", name)
    return Ring(name=name, lease_label=RING_LABEL, shard_label=f"{SHARD_LABEL_PREFIX}/{name}",
                drain_label=f"{DRAIN_LABEL_PREFIX}/{name}")


def combine_selectors(*selectors: str) -> str:
    """The selector every one of ``selectors`` must hold for (empty ones skipped): their requirements joined."""
    return ",".join(s.strip() for s in selectors if s.strip())
