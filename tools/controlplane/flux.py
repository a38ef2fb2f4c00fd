"""Build the real Flux controllers, the OCI registry and ``oras`` from their published Go modules.

None of them is packaged for this platform, so they are compiled like the local control plane
(:mod:`tools.controlplane.build`, README.md#real-flux-locally, docs/architecture.md#real-flux):

- each component gets its own wrapper module in the cache folder (the three controllers pin
  different ``go-digest`` versions, so one shared module cannot hold them all); its go.mod copies
  the upstream go.mod's ``go`` line and every **versioned** ``replace`` (path replaces such as
  ``api => ./api`` only make sense inside upstream's own repository and are dropped), plus the
  small :data:`EXTRA_REPLACES` table for what the Go module proxy refuses to serve; then
  ``go get -tool <module>@<version>`` and ``go build``;
- ``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``: a requirement on a newer Go fails loudly.

Each component is cached by name and version under ``<cache>/flux/<name>-<version>/`` (``bin/`` and,
for a controller, ``crds/``: its CRDs copied from the module's ``config/crd/bases``), built only when
missing, under a file lock. Usage: ``python -m tools.controlplane.flux`` builds what is missing and
prints the ``bin`` folders.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tools.controlplane.build import BuildError, build_once, default_cache_dir, print_built, run_go

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GoComponent:
    """One binary (or a few) built from a published Go module at a pinned version.

    ``package`` is the main package's import path; ``crds`` is whether the module ships Flux CRDs
    under ``config/crd/bases``; ``ldflags`` are appended to ``-s -w`` (upstream's version stamp);
    ``tags`` are Go build tags; ``also`` names more ``(binary, package)`` pairs built from the same
    wrapper module (containerd's ``ctr`` and shim beside ``containerd``).
    """

    name: str
    module: str
    version: str
    package: str
    crds: bool = False
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    also: tuple[tuple[str, str], ...] = ()

    @property
    def binaries(self) -> tuple[tuple[str, str], ...]:
        """Every ``(binary name, package)`` this component builds, the main one first."""
        return ((self.name, self.package), *self.also)


SOURCE_CONTROLLER = GoComponent("source-controller", "github.com/fluxcd/source-controller", "v1.9.6",
                                "github.com/fluxcd/source-controller", crds=True)
KUSTOMIZE_CONTROLLER = GoComponent("kustomize-controller", "github.com/fluxcd/kustomize-controller", "v1.9.6",
                                   "github.com/fluxcd/kustomize-controller", crds=True)
HELM_CONTROLLER = GoComponent("helm-controller", "github.com/fluxcd/helm-controller", "v1.6.4",
                              "github.com/fluxcd/helm-controller", crds=True)
REGISTRY = GoComponent("registry", "github.com/distribution/distribution/v3", "v3.1.2",
                       "github.com/distribution/distribution/v3/cmd/registry",
                       ldflags=("-X github.com/distribution/distribution/v3/version.version=v3.1.2",))
ORAS = GoComponent("oras", "oras.land/oras", "v1.3.6", "oras.land/oras/cmd/oras",
                   ldflags=("-X oras.land/oras/internal/version.Version=1.3.6",
                            "-X oras.land/oras/internal/version.BuildMetadata=",
                            "-X oras.land/oras/internal/version.GitTreeState=clean"))

COMPONENTS: tuple[GoComponent, ...] = (REGISTRY, ORAS, SOURCE_CONTROLLER, KUSTOMIZE_CONTROLLER, HELM_CONTROLLER)
"""Pinned versions the Go module proxy serves and that build with Go 1.26 (helm-controller v1.7.x is refused)."""

CONTROLLERS: tuple[GoComponent, ...] = (SOURCE_CONTROLLER, KUSTOMIZE_CONTROLLER, HELM_CONTROLLER)

EXTRA_REPLACES: Mapping[str, Mapping[str, str]] = {
    # The proxy refuses v0.18.3 (the version v1.9.6 requires); v0.18.0 differs only in dependency bumps.
    "source-controller": {"github.com/fluxcd/pkg/artifact": "v0.18.0"},
}
"""Per component: module => version replaced on top of upstream's own ``replace`` lines."""

_REPLACE_SINGLE = re.compile(r"^\s*replace\s+(\S+)(?:\s+(v\S+))?\s+=>\s+(\S+)(?:\s+(\S+))?\s*(?://.*)?$")
_REPLACE_IN_BLOCK = re.compile(r"^\s*(\S+)(?:\s+(v\S+))?\s+=>\s+(\S+)(?:\s+(\S+))?\s*(?://.*)?$")


def versioned_replaces(upstream_go_mod: str) -> list[str]:
    """The ``old[ version] => new version`` lines of ``upstream_go_mod``'s replaces that name a module
    version (a replace to a local path, without a version, is dropped), in file order."""
    out: list[str] = []
    in_block = False
    for line in upstream_go_mod.splitlines():
        stripped = line.strip()
        if in_block:
            if stripped.startswith(")"):
                in_block = False
                continue
            match = _REPLACE_IN_BLOCK.match(line)
        elif re.match(r"^replace\s*\($", stripped):
            in_block = True
            continue
        else:
            match = _REPLACE_SINGLE.match(line)
        if match and match.group(4):
            old, old_version, new, new_version = match.groups()
            lhs = f"{old} {old_version}" if old_version else old
            out.append(f"{lhs} => {new} {new_version}")
    return out


def wrapper_go_mod(component: GoComponent, upstream_go_mod: str,
                   extras: Mapping[str, str] | None = None) -> str:
    """The wrapper module's go.mod for ``component`` given its upstream go.mod text: upstream's ``go``
    and ``godebug`` lines, its versioned replaces, then ``extras`` (module => version)."""
    go_line = re.search(r"^go\s+(\S+)", upstream_go_mod, re.M)
    godebug = re.findall(r"^godebug\s+.+$", upstream_go_mod, re.M)
    lines = [f"module tatara.local/flux/{component.name}", "", f"go {go_line.group(1) if go_line else '1.26.0'}", ""]
    lines += [*godebug, ""] if godebug else []
    replaces = versioned_replaces(upstream_go_mod)
    replaces += [f"{mod} => {mod} {version}" for mod, version in (extras or {}).items()]
    if replaces:
        lines.append("replace (")
        lines += [f"\t{line}" for line in replaces]
        lines += [")", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Built:
    """Where one built component lives: ``<root>/bin/<name>`` and, for a controller, ``<root>/crds/*.yaml``."""

    component: GoComponent
    root: Path = field(default_factory=Path)

    @classmethod
    def default(cls, component: GoComponent) -> Built:
        return cls(component, default_cache_dir() / "flux" / f"{component.name}-{component.version}")

    @property
    def binary(self) -> Path:
        return self.root / "bin" / self.component.name

    def binary_named(self, name: str) -> Path:
        """Path of one of the component's :attr:`GoComponent.binaries` (it may not exist yet)."""
        return self.root / "bin" / name

    @property
    def crd_dir(self) -> Path:
        return self.root / "crds"

    def is_built(self) -> bool:
        if not all(os.access(self.binary_named(name), os.X_OK) for name, _ in self.component.binaries):
            return False
        return not self.component.crds or any(self.crd_dir.glob("*.yaml"))

    def ensure_built(self) -> Path:
        """Build the binary (and copy the CRDs) if missing; return the binary's path.

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        build_once(self.root, self.is_built, self._build)
        return self.binary

    def _go(self, *args: str, cwd: Path) -> str:
        return run_go(*args, cwd=cwd, purpose=self.component.name, env={"GOFLAGS": "-mod=mod"})

    def _build(self) -> None:
        comp = self.component
        src = self.root / "src"
        shutil.rmtree(src, ignore_errors=True)  # a half-written go.mod from an interrupted build
        src.mkdir(parents=True)
        started = time.monotonic()
        info = json.loads(self._go("mod", "download", "-json", f"{comp.module}@{comp.version}", cwd=src))
        upstream = Path(info["GoMod"]).read_text()
        (src / "go.mod").write_text(wrapper_go_mod(comp, upstream, EXTRA_REPLACES.get(comp.name)))
        self._go("get", "-tool", *(f"{package}@{comp.version}" for _, package in comp.binaries), cwd=src)
        partial = self.root / "bin.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        ldflags = " ".join(("-s", "-w", *comp.ldflags))
        tags = [f"-tags={','.join(comp.tags)}"] if comp.tags else []
        for name, package in comp.binaries:
            self._go("build", "-trimpath", *tags, f"-ldflags={ldflags}", "-o", str(partial / name), package, cwd=src)
        if comp.crds:
            bases = Path(info["Dir"]) / "config" / "crd" / "bases"
            crds = sorted(bases.glob("*.yaml"))
            if not crds:
                raise BuildError(f"{comp.module}@{comp.version} has no CRDs under config/crd/bases")
            shutil.rmtree(self.crd_dir, ignore_errors=True)
            self.crd_dir.mkdir()
            for crd in crds:
                shutil.copyfile(crd, self.crd_dir / crd.name)
        shutil.rmtree(self.root / "bin", ignore_errors=True)
        partial.rename(self.root / "bin")
        log.info("built %s %s in %.0f s", comp.name, comp.version, time.monotonic() - started)


def ensure_all_built(components: tuple[GoComponent, ...] = COMPONENTS) -> dict[str, Built]:
    """Build every component that is missing (one after another: each ``go build`` uses every core);
    return them by name.

    Raises:
        BuildError: ``go`` is not installed or a ``go`` command failed.
    """
    out: dict[str, Built] = {}
    for comp in components:
        built = Built.default(comp)
        built.ensure_built()
        out[comp.name] = built
    return out


def main() -> int:
    """Build what is missing, print each binary's path; exit 1 with the reason when a build fails."""
    return print_built("flux", "controllers, registry, oras",
                       lambda: [b.binary for b in ensure_all_built().values()],
                       cached=all(Built.default(c).is_built() for c in COMPONENTS))


if __name__ == "__main__":
    sys.exit(main())
