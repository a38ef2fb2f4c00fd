"""The local node's container images, built for real with buildah and cached as OCI archives.

No registry outside can be reached, so every image a local pod runs is built here (README.md#a-real-node):

- **base** (:data:`BASE_IMAGE`): Debian bookworm made by ``mmdebstrap`` from Debian's packages
  (:data:`BASE_PACKAGES`: Python 3.11 with venv and pip), turned into a one-layer image. It stands in for
  ``python:3.11-slim-bookworm``, the ``FROM`` of the project's ``Containerfile``. Keyed by its package list.
- **pause** (:data:`PAUSE_IMAGE`): Kubernetes's own ``build/pause/linux/pause.c`` from the pinned
  ``k8s.io/kubernetes`` module, compiled statically with the flags of upstream's ``build/pause/Makefile``,
  in an image ``FROM scratch`` like upstream's. containerd's sandbox image; the binary is also the PID 1 of
  the node's sandbox (:mod:`tools.controlplane.sandbox`).
- **tatara** (:func:`ImageBuilder.tatara`): the project's ``Containerfile`` with ``PYTHON_IMAGE`` set to the
  base, keyed by the content of its build context.
- **echo** (:data:`ECHO_IMAGE`): the examples' workload, ``tools/images/echo`` (a tiny HTTP server on the
  base), so Flux's HelmReleases wait on real Deployments.

buildah runs with ``--isolation chroot`` and ``--pull=never`` on storage of its own under the cache folder
(never ``/var/lib/containers``), each command in a private mount namespace (``unshare --mount``) so its
overlay mounts never reach the host. The host's CA bundle is mounted into builds so pip trusts what the
host trusts. Archives: ``<cache>/images/<name>-<key>.tar``; a build that already has its archive is skipped.

``python -m tools.controlplane.images`` builds the base and pause images (what ``make control-plane`` caches).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.controlplane.build import BuildError, Toolchain, default_cache_dir, run_go

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]

BASE_SUITE = "bookworm"
BASE_PACKAGES = ("ca-certificates", "python3", "python3-pip", "python3-venv", "python-is-python3")
"""What the base image holds beyond Debian's ``minbase`` variant: the Python the Containerfile needs
(``python`` on PATH, ``pip wheel``, ``venv``)."""
BASE_MIRRORS = (
    f"deb http://deb.debian.org/debian {BASE_SUITE} main",
    f"deb http://deb.debian.org/debian {BASE_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {BASE_SUITE}-security main",
)

PAUSE_VERSION = "3.10.2"
"""The ``TAG`` of ``build/pause/Makefile`` in the pinned Kubernetes release."""
PAUSE_IMAGE = f"localhost/tatara/pause:{PAUSE_VERSION}"
ECHO_IMAGE = "localhost/tatara/echo:1"
TATARA_REPOSITORY = "localhost/tatara/tatara"

CONTEXT_PATHS = ("Containerfile", ".containerignore", "pyproject.toml", "constraints.txt", "README.md", "shared",
                 "reconciler", "pool_reconciler", "export_worker")
"""What the Containerfile copies (and itself): the content the tatara image is keyed by."""

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


class ImageError(RuntimeError):
    """A tool the image build needs is missing, or a build step failed (the message has its output)."""


def _digest(parts: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:12]


def base_key(packages: Sequence[str] = BASE_PACKAGES) -> str:
    """The base image's cache key: its suite, mirrors, apt options and package list."""
    return _digest(s.encode() for s in (BASE_SUITE, *BASE_MIRRORS, *apt_options(), *sorted(packages)))


def base_image() -> str:
    """The base image's reference, tagged by :func:`base_key`."""
    return f"localhost/tatara/base:{BASE_SUITE}-{base_key()}"


def context_files(root: Path, paths: Sequence[str] = CONTEXT_PATHS) -> list[Path]:
    """Every file under ``paths`` of ``root`` that a build copies, sorted (caches and bytecode left out)."""
    skip = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    out: list[Path] = []
    for rel in paths:
        path = root / rel
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            for p in path.rglob("*"):
                parts = p.relative_to(root).parts
                if p.is_file() and not skip.intersection(parts) and p.suffix != ".pyc" \
                        and not any(part.endswith(".egg-info") for part in parts):
                    out.append(p)
    return sorted(out)


def context_key(root: Path, extra: Sequence[str] = ()) -> str:
    """A key over the names and contents of :func:`context_files` and ``extra`` strings."""
    files = context_files(root)
    return _digest([*(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() for p in files),
                    *(e.encode() for e in extra)])


@dataclass(frozen=True)
class ImageBuilder:
    """buildah on its own storage; OCI archives in ``root``."""

    root: Path

    @classmethod
    def default(cls) -> ImageBuilder:
        return cls(default_cache_dir() / "images")

    def archive(self, name: str, key: str) -> Path:
        return self.root / f"{name}-{key}.tar"

    # -- the images -----------------------------------------------------------------

    def base(self) -> Path:
        """The base image's OCI archive (made with mmdebstrap on first use, about two minutes).

        Raises:
            ImageError: mmdebstrap or buildah is missing or failed.
        """
        out = self.archive("base", base_key())
        with self._building("base", out) as wanted:
            if wanted:
                self._make_base(out)
        return out

    def _make_base(self, out: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="tatara-base-", dir=self._tmp()) as tmp:
            ctx = Path(tmp)
            rootfs = ctx / "rootfs.tar"
            started = time.monotonic()
            self._run(["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                       *(f"--aptopt={opt}" for opt in apt_options()), "--dpkgopt=path-exclude=/usr/share/doc/*",
                       "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
                       BASE_SUITE, str(rootfs), *BASE_MIRRORS], what="mmdebstrap (the base image)")
            (ctx / "Containerfile").write_text(
                "# The base of the local node's images: Debian bookworm from Debian's packages (mmdebstrap).\n"
                "FROM scratch\nADD rootfs.tar /\n"
                "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8\n"
                'CMD ["/bin/sh"]\n')
            self._bud(ctx, base_image())
            self._push(base_image(), out)
            log.info("built the base image in %.0f s", time.monotonic() - started)

    def pause_binary(self) -> Path:
        """Kubernetes's ``pause``, compiled from the pinned module's source (gcc, static).

        Raises:
            ImageError: gcc is missing or failed. BuildError: the module could not be downloaded.
        """
        out = self.root / f"pause-{PAUSE_VERSION}" / "pause"
        with self._building("pause-binary", out) as wanted:
            if wanted:
                source = kubernetes_source() / "build" / "pause" / "linux" / "pause.c"
                out.parent.mkdir(parents=True, exist_ok=True)
                partial = _partial(out)
                self._run(["gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{PAUSE_VERSION}-tatara",
                           "-o", str(partial), str(source)], what="gcc (the pause binary)")
                partial.rename(out)
        return out

    def pause(self) -> Path:
        """The pause image's OCI archive."""
        binary = self.pause_binary()
        out = self.archive("pause", _digest([binary.read_bytes()]))
        with self._building("pause", out) as wanted:
            if wanted:
                with tempfile.TemporaryDirectory(prefix="tatara-pause-", dir=self._tmp()) as tmp:
                    ctx = Path(tmp)
                    shutil.copy2(binary, ctx / "pause")
                    (ctx / "Containerfile").write_text(
                        "# Kubernetes's pause container, as build/pause/Dockerfile of the pinned release makes it.\n"
                        'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n')
                    self._bud(ctx, PAUSE_IMAGE)
                self._push(PAUSE_IMAGE, out)
        return out

    def tatara(self, root: Path = REPO_ROOT) -> tuple[str, Path]:
        """The project's image from ``root``'s Containerfile on the base: ``(reference, OCI archive)``; the
        reference's tag is the context's key, so a changed source is a new image.

        Raises:
            ImageError: a build step failed.
        """
        key = context_key(root, [base_key()])
        ref = f"{TATARA_REPOSITORY}:dev-{key}"
        out = self.archive("tatara", key)
        base = self.base()
        with self._building("tatara", out) as wanted:
            if wanted:
                self._load(base, base_image())
                started = time.monotonic()
                self._bud(root, ref, build_args={"PYTHON_IMAGE": base_image()}, containerfile=root / "Containerfile")
                self._push(ref, out)
                log.info("built %s in %.0f s", ref, time.monotonic() - started)
        return ref, out

    def echo(self, root: Path = REPO_ROOT) -> Path:
        """The examples' workload image (``tools/images/echo``) on the base."""
        ctx = root / "tools" / "images" / "echo"
        key = _digest([*(p.name.encode() + b"\0" + p.read_bytes() for p in sorted(ctx.iterdir()) if p.is_file()),
                       base_key().encode()])
        out = self.archive("echo", key)
        base = self.base()
        with self._building("echo", out) as wanted:
            if wanted:
                self._load(base, base_image())
                self._bud(ctx, ECHO_IMAGE, build_args={"BASE_IMAGE": base_image()})
                self._push(ECHO_IMAGE, out)
        return out

    # -- buildah --------------------------------------------------------------------

    @contextlib.contextmanager
    def _building(self, name: str, out: Path) -> Iterator[bool]:
        """Hold the lock of image ``name`` (one file lock per name, so a build that needs another image takes that
        one first, never inside); yields whether ``out`` still has to be made. Concurrent runs (``make test``
        beside ``make run``) build once and the later ones find the archive."""
        if out.exists():
            yield False
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield not out.exists()

    def _tmp(self) -> Path:
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return tmp

    def _buildah(self, *args: str) -> list[str]:
        storage = self.root / "buildah"
        return ["unshare", "--mount", "--propagation", "private", "buildah", f"--root={storage / 'root'}",
                f"--runroot={storage / 'run'}", "--storage-driver=overlay", *args]

    def _bud(self, context: Path, ref: str, build_args: dict[str, str] | None = None,
             containerfile: Path | None = None) -> None:
        volumes = [f"--volume={HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro"] if HOST_CA_BUNDLE.exists() else []
        args = [f"--build-arg={k}={v}" for k, v in (build_args or {}).items()]
        self._run(self._buildah("bud", "--isolation=chroot", "--pull=never", "--layers=false", *volumes, *args,
                                f"--file={containerfile or context / 'Containerfile'}", f"--tag={ref}", str(context)),
                  what=f"buildah bud ({ref})")

    def _push(self, ref: str, out: Path) -> None:
        partial = _partial(out)
        partial.unlink(missing_ok=True)
        self._run(self._buildah("push", "--quiet", ref, f"oci-archive:{partial}:{ref}"), what=f"buildah push ({ref})")
        partial.rename(out)

    def _load(self, archive: Path, ref: str) -> None:
        """Make ``ref`` (from ``archive``) present in buildah's storage, for a ``FROM``."""
        probe = subprocess.run(self._buildah("inspect", "--type=image", ref), capture_output=True, check=False)
        if probe.returncode != 0:
            image_id = self._run(self._buildah("pull", "--quiet", f"oci-archive:{archive}"),
                                 what=f"buildah pull ({ref})").strip().splitlines()[-1]
            self._run(self._buildah("tag", image_id, ref), what=f"buildah tag ({ref})")

    def _run(self, args: Sequence[str], what: str) -> str:
        tool = args[0] if args[0] != "unshare" else "buildah"
        if shutil.which(tool) is None:
            raise ImageError(f"`{tool}` is not installed (Debian package {tool}); `make node-deps` installs the "
                             "node's Debian packages")
        self.root.mkdir(parents=True, exist_ok=True)
        log.debug("running %s", " ".join(args))
        proc = subprocess.run(list(args), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise ImageError(f"{what} failed (exit {proc.returncode}):\n{tail}")
        return proc.stdout


def _partial(out: Path) -> Path:
    """A name beside ``out`` that only this process writes (renamed to ``out`` when complete)."""
    return out.with_name(f"{out.name}.{os.getpid()}.partial")


@functools.cache
def apt_options() -> tuple[str, ...]:
    """The apt options mmdebstrap is given: the host's own ``Acquire::Check-Valid-Until`` and
    ``Acquire::Check-Date`` when it turns them off (a registry that mirrors a snapshot of Debian serves Release
    files past their Valid-Until date, and the host's apt is then configured for it); none otherwise, so apt
    checks the dates as it should."""
    try:
        dump = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(f'{key} "false"' for key in ("Acquire::Check-Valid-Until", "Acquire::Check-Date")
                 if f'{key} "false";' in dump.splitlines())


def kubernetes_source() -> Path:
    """The pinned ``k8s.io/kubernetes`` module's source folder in Go's module cache (downloaded if missing).

    Raises:
        BuildError: ``go`` is missing or the download failed.
    """
    version = Toolchain.default().kubernetes_version
    with tempfile.TemporaryDirectory() as tmp:
        info = json.loads(run_go("mod", "download", "-json", f"k8s.io/kubernetes@{version}", cwd=Path(tmp),
                                 purpose="the pause binary", env={"GOFLAGS": "-mod=mod"}))
    return Path(info["Dir"])


def main() -> int:
    """Build the base and pause images if missing; print their archives."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    builder = ImageBuilder.default()
    try:
        for archive in (builder.base(), builder.pause()):
            print(archive)
    except (ImageError, BuildError) as err:
        print(f"images: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
