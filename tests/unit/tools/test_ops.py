"""The pure parts of ``tatara ps`` / ``tatara signal``: tree building, formatting, signal validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from shared.domain.api.codec import decode
from shared.domain.api.process import Process
from shared.domain.api.signal import ProcessSignal
from tools.ops import SignalError, build_tree, format_age, format_ps, parse_signal
from tools.opscli import compile_lisp

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def proc(name: str, *, pid: str | None = None, parent: str | None = None, phase: str = "Running",
         ns: str = "default", age: timedelta = timedelta(seconds=30), spec_parent: str | None = None) -> Process:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": ns,
                     "creationTimestamp": (NOW - age).strftime("%Y-%m-%dT%H:%M:%SZ")},
        "spec": {"identity": {"parent": spec_parent} if spec_parent else {},
                 "classification": {"pointType": "Gate", "substrate": "Compute", "horizon": {"kind": "Bounded"},
                                    "calm": "Monotone", "dataClassification": "Internal"},
                 "intent": {"flux": {"gitRepository": "infra", "path": "./"}}},
    }
    if pid is not None or phase != "Pending":
        body["status"] = {"phase": phase, **({"pid": pid} if pid else {}), **({"parent": parent} if parent else {})}
    return decode(msgspec.json.encode(body), Process)


@pytest.mark.parametrize(("text", "expected"), [
    ("SIGHUP", ProcessSignal.SIGHUP), ("HUP", ProcessSignal.SIGHUP), ("hup", ProcessSignal.SIGHUP),
    ("sigterm", ProcessSignal.SIGTERM), ("KILL", ProcessSignal.SIGKILL), ("usr1", ProcessSignal.SIGUSR1),
    ("SIGCONT", ProcessSignal.SIGCONT), ("Stop", ProcessSignal.SIGSTOP),
])
def test_signals_parse_in_canonical_and_short_forms_any_case(text: str, expected: ProcessSignal) -> None:
    assert parse_signal(text) is expected


@pytest.mark.parametrize("text", ["", "SIGINT", "INT", "9", " HUP", "SIGHUP ", "SIG", "HUPX"])
def test_unknown_signals_are_rejected_naming_the_accepted_ones(text: str) -> None:
    with pytest.raises(SignalError) as err:
        parse_signal(text)
    assert repr(text) in str(err.value)
    assert "SIGHUP (HUP)" in str(err.value)


@pytest.mark.parametrize(("delta", "text"), [
    (timedelta(seconds=0), "0s"), (timedelta(seconds=119), "119s"), (timedelta(minutes=5), "5m"),
    (timedelta(hours=3), "3h"), (timedelta(days=4), "4d"), (timedelta(seconds=-5), "0s"),
])
def test_age_is_kubectl_style(delta: timedelta, text: str) -> None:
    assert format_age(NOW - delta, NOW) == text


def test_age_without_timestamp_is_unknown() -> None:
    assert format_age(None, NOW) == "<unknown>"


def test_children_nest_under_the_process_holding_their_parent_pid() -> None:
    procs = [
        proc("child-b", pid="fam.1.3", parent="fam.1"),
        proc("other", pid="zzz.2"),
        proc("parent", pid="fam.1"),
        proc("child-a", pid="fam.1.2", spec_parent="fam.1"),  # parent from spec before status.parent is written
        proc("grandchild", pid="fam.1.2.4"),  # parent from its own PID path
        proc("waiting", phase="Pending"),
    ]
    tree = [(depth, p.metadata.name) for depth, p in build_tree(procs)]
    assert tree == [(0, "parent"), (1, "child-a"), (2, "grandchild"), (1, "child-b"), (0, "other"),
                    (0, "waiting")]


def test_an_orphan_is_a_root_and_a_cycle_still_lists_everyone_once() -> None:
    orphan = proc("orphan", pid="gone.1.9", parent="gone.1")
    a = proc("a", pid="a.1", parent="b.1")
    b = proc("b", pid="b.1", parent="a.1")
    names = [p.metadata.name for _, p in build_tree([orphan, a, b])]
    assert sorted(names) == ["a", "b", "orphan"]
    assert len(names) == 3


def test_ps_output_is_a_forest_with_pid_phase_and_age() -> None:
    out = format_ps([proc("parent", pid="fam.1", age=timedelta(minutes=7)),
                     proc("kid", pid="fam.1.2", parent="fam.1", phase="Attested"),
                     proc("new", phase="Pending", ns="other")], NOW)
    lines = out.splitlines()
    assert lines[0].split() == ["NAMESPACE", "PID", "PHASE", "AGE", "PROCESS"]
    assert lines[1].split() == ["default", "fam.1", "Running", "7m", "parent"]
    assert lines[2].split() == ["default", "fam.1.2", "Attested", "30s", "\\_", "kid"]
    assert lines[2].endswith(" \\_ kid")
    assert lines[3].split() == ["other", "-", "Pending", "30s", "new"]
    assert lines[1].index("fam.1") == lines[0].index("PID")


def test_compile_turns_defpoint_and_defephemeral_into_process_manifests() -> None:
    src = """
    (defpoint obs :classification (:point-type Gate :substrate Observability :horizon (:kind Bounded)
                                   :calm Monotone :data-classification Internal)
                  :intent (:flux (:git-repository "infra" :path "./apps")))
    (defephemeral eph :aplicacao (:chart-ref "oci://x/y" :version "1.0.0" :profile "p"
                                  :release-name "r" :target-namespace "t") :ttl "5m")
    """
    docs = compile_lisp(src, "demo")
    assert [(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"]) for d in docs] == [
        ("Process", "obs", "demo"), ("Process", "eph", "demo")]
    assert docs[0]["spec"]["intent"]["flux"]["path"] == "./apps"
    assert docs[1]["spec"]["lifetime"]["ephemeral"]["ttl"] == "5m"
    for doc in docs:
        decode(msgspec.json.encode(doc), Process)
