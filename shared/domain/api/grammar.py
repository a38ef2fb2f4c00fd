"""String fields with a grammar, checked by the API server at admission (docs/wire-format.md#grammars).

Each alias is a plain ``str`` to the decoder (it accepts what the reference accepts); the annotations only
reach the generated CRDs (``tools/crd.py`` copies ``extra_json_schema``), so ``kubectl apply`` refuses a
value that would fail later, naming the field. Two encodings, as for tagged unions:

- outside lists and maps: ``x-kubernetes-validations`` (CEL ``matches``) with a message in words, and a
  ``maxLength`` that keeps the rule's estimated cost inside the API server's budget;
- inside a list or map (where a CEL rule's cost is multiplied by the collection's unbounded size): an
  OpenAPI ``pattern`` (the API server's message quotes the expression).
"""

from __future__ import annotations

from typing import Annotated, Final

from msgspec import Meta

__all__ = [
    "CHART_REF_PATTERN",
    "CHART_VERSION_PATTERN",
    "DNS_LABEL_PATTERN",
    "DURATION_PATTERN",
    "LABEL_VALUE_PATTERN",
    "PID_PATTERN",
    "ChartRef",
    "ChartVersion",
    "DnsLabelInList",
    "Duration",
    "LabelValueInMap",
    "ParentPid",
]

_UNITS: Final = (
    "nanos|nsec|ns|usec|us|µs|millis|msec|ms|seconds|second|secs|sec|s|minutes|minute|min|mins|m"
    "|hours|hour|hr|hrs|h|days|day|d|weeks|week|wk|wks|w|months|month|M|years|year|yr|yrs|y"
)

DURATION_PATTERN: Final = rf"^\s*(0|([0-9][0-9\s]*(\.[0-9]+)?\s*({_UNITS})\s*)+)\s*$"
"""humantime 2.3's grammar (docs/wire-format.md#durations): ``0``, or one or more ``<number><unit>``
items, concatenated or separated by whitespace, a decimal fraction allowed; units case-sensitive
(``M`` months, ``m`` minutes). Overflow and fractions that are not whole nanoseconds still fail at use."""

PID_PATTERN: Final = r"^$|^[^\s.]+(\.[^\s.]+)*\.[0-9]+$"
"""A PID path (``seph.1``, ``seph.1.7``, ``<hash>.3``): dot-separated segments without whitespace,
ending with a sequence number; or empty (a root)."""

DNS_LABEL_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
"""An RFC 1123 label: ``[a-z0-9-]``, not starting or ending with ``-`` (1–63 characters via maxLength)."""

LABEL_VALUE_PATTERN: Final = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
"""A Kubernetes label value: empty, or alphanumerics, ``-``, ``_``, ``.``, starting and ending with an
alphanumeric (at most 63 characters via maxLength)."""

_SUBDOMAIN: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_OCI_HOST: Final = r"[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]+)?"
_OCI_PATH: Final = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"

CHART_REF_PATTERN: Final = (rf"^(oci://{_OCI_HOST}(/{_OCI_PATH})*"
                            rf"|({_SUBDOMAIN}/)?[A-Za-z0-9_.-]+)$")
"""A chart reference as rendering reads it (docs/wire-format.md#grammars): ``oci://<registry>[/<path>…]``
(an OCI registry host, an optional port, lowercase repository path components as the OCI distribution
spec has them), or ``[<HelmRepository name>/]<chart>``: a DNS subdomain (the HelmRepository's name),
then a chart name in Helm's characters (letters, digits, ``.``, ``_``, ``-``)."""

_CV: Final = (r"v?([0-9]+|[xX*])(\.([0-9]+|[xX*]))?(\.([0-9]+|[xX*]))?"
              r"(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?")
_OP: Final = r"(=|!=|>|<|>=|=>|<=|=<|~|~>|\^)?"
_TERM: Final = rf"({_CV}\s+-\s+{_CV}|{_OP}\s*{_CV})"
_AND: Final = rf"\s*{_TERM}\s*((\s+|,\s*){_TERM}\s*)*"

_OCI_TAG: Final = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"

CHART_VERSION_PATTERN: Final = rf"^$|^{_AND}(\|\|{_AND})*$|^{_OCI_TAG}$"
"""A chart version as Flux reads it (docs/wire-format.md#grammars): empty (the latest); a semver
constraint as Masterminds semver v3 parses it for a HelmRepository chart (``||``-separated alternatives
of comparisons joined by spaces or commas, each an optional operator ``=``, ``!=``, ``>``, ``<``, ``>=``,
``<=``, ``~``, ``~>``, ``^`` and a version ``[v]<major>[.<minor>[.<patch>]][-<pre>][+<build>]`` whose
numbers may be ``x``, ``X`` or ``*``, or a hyphen range ``<v> - <v>``); or an OCI tag (``oci://``
charts take the version as the OCIRepository's ``ref.tag``: a word character, then up to 127 word
characters, ``.`` or ``-``)."""


def _cel(pattern: str, message: str, max_length: int) -> Meta:
    return Meta(extra_json_schema={
        "maxLength": max_length,
        "x-kubernetes-validations": [{"rule": f"self.matches(r'{pattern}')", "message": message}],
    })


Duration = Annotated[str, _cel(
    DURATION_PATTERN,
    "must be a duration: a number and a unit, e.g. 30s, 15m, 1h30m or 2h 15m (units ns, us, ms, s, m, h, d, "
    "w, M, y)",
    128,
)]
"""A humantime duration string, checked at admission."""

ParentPid = Annotated[str, _cel(
    PID_PATTERN,
    "must be the PID path of the parent Process, e.g. seph.1 (dot-separated, ending with a number), or empty",
    1024,
)]
"""A parent PID path, checked at admission."""

DnsLabelInList = Annotated[str, Meta(extra_json_schema={"maxLength": 63, "pattern": DNS_LABEL_PATTERN})]
"""A DNS label inside a list, checked at admission by ``pattern``."""

LabelValueInMap = Annotated[str, Meta(extra_json_schema={"maxLength": 63, "pattern": LABEL_VALUE_PATTERN})]
"""A Kubernetes label value inside a map, checked at admission by ``pattern``."""

ChartRef = Annotated[str, _cel(
    CHART_REF_PATTERN,
    "must be a chart reference: oci://<registry>/<repository path> (e.g. oci://ghcr.io/org/charts/app) or "
    "[<HelmRepository name>/]<chart> (e.g. bitnami/nginx)",
    512,
)]
"""``aplicacao.chartRef``, checked at admission."""

ChartVersion = Annotated[str, _cel(
    CHART_VERSION_PATTERN,
    "must be a chart version, a semver range or an OCI tag, e.g. 1.2.3, 1.x, ^1.2, >=1.0.0 <2.0.0, * or latest "
    "(empty: the latest)",
    256,
)]
"""``aplicacao.version``, checked at admission."""
