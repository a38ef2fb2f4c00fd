"""Build kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl and etcd from their Go modules.

None of them is packaged for this platform, so they are compiled from the Go module
proxy (README.md#local-control-plane, "Build"):

- a wrapper module is generated in the cache folder; it ``replace``s every staging module
  that ``k8s.io/kubernetes``'s own go.mod requires at ``v0.0.0`` with the matching
  ``v0.<minor>.<patch>`` tag (read from that go.mod, never hard-coded), copies the release's
  ``go`` and ``godebug`` lines (GODEBUG defaults come from the main module), then
  ``go get -tool``s the commands and ``go build``s them with upstream's version
  ldflags;
- etcd is built at the version the Kubernetes release itself pins, so the wrapper adds
  no requirement upstream does not already have;
- ``GOTOOLCHAIN=local``: a requirement that needs a newer Go fails loudly instead of
  downloading a toolchain.

Binaries are cached under ``<cache>/control-plane/k8s-<ver>_etcd-<ver>/bin`` (keyed by
version) and rebuilt only when missing; a file lock serializes concurrent builders.
Go's own module and build caches (GOMODCACHE, GOCACHE) make a rebuild after a clean
clone take about a minute instead of a cold build's many minutes.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KUBERNETES_VERSION = "v1.36.3"
"""Pinned ``k8s.io/kubernetes`` release (served by the Go module proxy; go line 1.26.0)."""

ETCD_VERSION = "v3.6.8"
"""Pinned etcd server: the version k8s.io/kubernetes v1.36.x itself requires."""

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl", "etcd")
"""The control plane's binaries, the node's kubelet and kube-scheduler, and kubectl at the same version (built
from the same module)."""

_PACKAGES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubelet": "k8s.io/kubernetes/cmd/kubelet",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}

_STAGING_REQUIREMENT = re.compile(r"^\s*(?:require\s+)?(k8s\.io/[A-Za-z0-9._-]+)\s+v0\.0\.0\s*(?://.*)?$")


class BuildError(RuntimeError):
    """A ``go`` command failed; the message holds the command and the tail of its output."""


def default_cache_dir() -> Path:
    """``$TATARA_CACHE_DIR``, else ``<checkout>/.cache`` in a source checkout, else ``~/.cache/tatara``."""
    env = os.environ.get("TATARA_CACHE_DIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "tatara"


def run_go(*args: str, cwd: Path, purpose: str, env: Mapping[str, str | None] | None = None) -> str:
    """Run ``go args`` in ``cwd`` with the local toolchain only (``GOTOOLCHAIN=local``, ``CGO_ENABLED=0``)
    and ``env`` on top (a None value removes the variable); return its stdout.

    Raises:
        BuildError: ``go`` is not on PATH (naming ``purpose``), or the command failed (with its output's tail).
    """
    go = shutil.which("go")
    if go is None:
        raise BuildError(f"`go` is not on PATH; install Go >= 1.26 to build {purpose}")
    full_env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    log.info("running go %s", " ".join(args))
    proc = subprocess.run([go, *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise BuildError(f"go {' '.join(args)} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


def build_once(root: Path, is_built: Callable[[], bool], build: Callable[[], None]) -> None:
    """Run ``build`` unless ``is_built()``; concurrent callers (parallel test runs) serialize on a file lock
    in ``root`` and the later ones find the work done."""
    if is_built():
        return
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not is_built():
            build()


def print_built(name: str, version: str, ensure: Callable[[], Path | Sequence[Path]], *, cached: bool) -> int:
    """The ``python -m`` entry of a pinned tool: ``ensure()`` builds it if missing and returns its path(s),
    printed one per line on stdout; stderr says how it came (cached, or built in N s).

    Returns:
        0, or 1 with the reason on stderr when the build fails (:class:`BuildError`).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.monotonic()
    try:
        built = ensure()
    except BuildError as err:
        print(f"{name}: {err}", file=sys.stderr)
        return 1
    note = "cached" if cached else f"built in {time.monotonic() - started:.0f} s"
    print(f"{name} {version} ({note})", file=sys.stderr)
    for path in [built] if isinstance(built, Path) else built:
        print(path)
    return 0


@dataclass(frozen=True)
class CachedBinary:
    """One executable at ``path``, made by ``build()`` when missing (under :func:`build_once`'s lock in
    ``path``'s folder)."""

    path: Path
    build: Callable[[], None]

    def ensure(self) -> Path:
        """``path``, built first if it is not there.

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        build_once(self.path.parent, lambda: os.access(self.path, os.X_OK), self.build)
        return self.path


@dataclass(frozen=True)
class Toolchain:
    """Where the binaries of one pinned version pair live."""

    root: Path
    kubernetes_version: str = KUBERNETES_VERSION
    etcd_version: str = ETCD_VERSION

    @classmethod
    def default(cls) -> Toolchain:
        key = f"k8s-{KUBERNETES_VERSION}_etcd-{ETCD_VERSION}"
        return cls(default_cache_dir() / "control-plane" / key)

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    def binary(self, name: str) -> Path:
        """Path of one of :data:`BINARIES` (it may not exist yet)."""
        return self.bin_dir / name

    def is_built(self) -> bool:
        return all(os.access(self.binary(n), os.X_OK) for n in BINARIES)

    def ensure_built(self) -> Path:
        """Build whatever is missing and return :attr:`bin_dir`.

        Raises:
            BuildError: ``go`` is not installed or a ``go`` command failed.
        """
        build_once(self.root, self.is_built, self._build)
        return self.bin_dir

    # -- the build itself -------------------------------------------------------------

    def _go(self, *args: str, cwd: Path) -> str:
        return run_go(*args, cwd=cwd, purpose="the local control plane", env={"GOFLAGS": "-mod=mod"})

    def wrapper_go_mod(self, upstream_go_mod: str) -> str:
        """The wrapper module's go.mod for ``upstream_go_mod`` (k8s.io/kubernetes's own go.mod text).

        One ``replace`` per ``k8s.io/<x> v0.0.0`` requirement, at ``v0.<minor>.<patch>``.

        Raises:
            BuildError: the upstream go.mod lists no staging requirement (format changed).
        """
        staging = sorted({m.group(1) for line in upstream_go_mod.splitlines()
                          if (m := _STAGING_REQUIREMENT.match(line))})
        if not staging:
            raise BuildError("k8s.io/kubernetes go.mod has no `k8s.io/* v0.0.0` requirements to replace")
        staging_version = "v0." + self.kubernetes_version.removeprefix("v").split(".", 1)[1]
        go_line = re.search(r"^go\s+(\S+)", upstream_go_mod, re.M)
        godebug = re.findall(r"^godebug\s+.+$", upstream_go_mod, re.M)
        lines = ["module tatara.local/controlplane", "", f"go {go_line.group(1) if go_line else '1.26.0'}", ""]
        lines += [*godebug, ""] if godebug else []
        lines.append("replace (")
        lines += [f"\t{mod} => {mod} {staging_version}" for mod in staging]
        lines += [")", ""]
        return "\n".join(lines)

    def _ldflags(self) -> str:
        version = self.kubernetes_version
        major, minor = version.removeprefix("v").split(".")[:2]
        values = {
            "gitVersion": version,
            "gitMajor": major,
            "gitMinor": minor,
            "gitTreeState": "archive",
            "buildDate": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        flags = ["-s", "-w"]
        for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
            flags += [f"-X {pkg}.{k}={v}" for k, v in values.items()]
        return " ".join(flags)

    def _build(self) -> None:
        src = self.root / "src"
        if src.exists():
            shutil.rmtree(src)  # a half-written go.mod from an interrupted build
        src.mkdir(parents=True)
        started = time.monotonic()
        info = json.loads(self._go("mod", "download", "-json", f"k8s.io/kubernetes@{self.kubernetes_version}",
                                   cwd=src))
        upstream = Path(info["GoMod"]).read_text()
        (src / "go.mod").write_text(self.wrapper_go_mod(upstream))
        self._go("get", "-tool", *(f"{pkg}@{self.etcd_version if name == 'etcd' else self.kubernetes_version}"
                                   for name, pkg in _PACKAGES.items()), cwd=src)
        resolved = (src / "go.mod").read_text()
        if re.search(r"^\s*k8s\.io/\S+ v0\.0\.0\s*$", resolved, re.M):
            raise BuildError("a k8s.io staging module is still required at v0.0.0 after replacing")
        staging_bin = self.root / "bin.partial"
        shutil.rmtree(staging_bin, ignore_errors=True)
        staging_bin.mkdir()
        for name, pkg in _PACKAGES.items():
            ldflags = self._ldflags() if name != "etcd" else "-s -w"
            self._go("build", "-trimpath", f"-ldflags={ldflags}", "-o", str(staging_bin / name), pkg, cwd=src)
        shutil.rmtree(self.bin_dir, ignore_errors=True)
        staging_bin.rename(self.bin_dir)
        log.info("built %s in %.0f s", ", ".join(BINARIES), time.monotonic() - started)
