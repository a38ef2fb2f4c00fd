"""Build Jaeger v2 (``cmd/jaeger``), the tracing backend the tests and ``tatara up`` send spans to, from its
published Go module.

Jaeger is not packaged for this platform, so it is compiled like the Flux controllers
(:mod:`tools.controlplane.flux`, docs/runtime.md#traces): module ``github.com/jaegertracing/jaeger`` at
**v1.76.0** (the release its changelog calls "v1.76.0 / v2.13.0": one tag of the module carries both
lines, and ``cmd/jaeger`` is the v2 binary), one wrapper module that copies upstream's ``go`` line and its
versioned ``replace`` (``github.com/Shopify/sarama``, which makes ``go install pkg@version`` refuse the
module), ``go get -tool`` and ``go build -trimpath`` with ``CGO_ENABLED=0`` like upstream's
``scripts/makefiles/BuildBinaries.mk``. Upstream stamps ``internal/version`` from git
(``scripts/makefiles/BuildInfo.mk``); here ``latestVersion`` is the v2 version and ``date`` the module's
release time from the Go module proxy, so two builds are the same binary.

The UI assets are not part of the Go module (upstream builds them from a separate repository), so the
binary serves the query API (``/api/services``, ``/api/traces``) and a placeholder page; that is all
the tests use. Cached under ``<cache>/jaeger/jaeger-v1.76.0/bin/jaeger``;
``python -m tools.controlplane.jaeger`` builds it when missing and prints its path.
"""

from __future__ import annotations

import sys

from tools.controlplane.build import default_cache_dir, print_built
from tools.controlplane.flux import Built, GoComponent

_PKG = "github.com/jaegertracing/jaeger"
JAEGER_MODULE_VERSION = "v1.76.0"
"""Pinned ``github.com/jaegertracing/jaeger`` module version (Go module proxy; go line 1.24.6, so it builds
with Go 1.26)."""

JAEGER_VERSION = "v2.13.0"
"""The Jaeger v2 release the module version carries (upstream's CHANGELOG.md, "v1.76.0 / v2.13.0")."""

_RELEASE_DATE = "2025-12-03T16:07:08Z"
"""The module version's time as the Go module proxy reports it (``go mod download -json``'s ``.info``)."""

JAEGER = GoComponent(
    "jaeger", _PKG, JAEGER_MODULE_VERSION, f"{_PKG}/cmd/jaeger",
    ldflags=(f"-X {_PKG}/internal/version.latestVersion={JAEGER_VERSION}",
             f"-X {_PKG}/internal/version.date={_RELEASE_DATE}"),
)


def built() -> Built:
    """Where the Jaeger binary is cached (it may not be built yet)."""
    return Built(JAEGER, default_cache_dir() / "jaeger" / f"jaeger-{JAEGER_MODULE_VERSION}")


def main() -> int:
    """Build Jaeger if missing and print its path; exit 1 with the reason when the build fails."""
    target = built()
    return print_built("jaeger", f"{JAEGER_VERSION} (module {JAEGER_MODULE_VERSION})", target.ensure_built,
                       cached=target.is_built())


if __name__ == "__main__":
    sys.exit(main())
