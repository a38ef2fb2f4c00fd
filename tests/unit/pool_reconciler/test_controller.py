"""The allocation controller re-checks bind decisions against the live allocation (issue 6, scenario 7)."""

from __future__ import annotations

from pool_reconciler.controller import needs_live_read
from pool_reconciler.decision import AllocationDecision, MemberPatch


def test_a_bind_or_an_adoption_is_checked_against_the_live_allocation() -> None:
    bound = {"status": {"phase": "Bound"}}
    claim = MemberPatch("m1", {}, "Bind", "7")
    assert needs_live_read(AllocationDecision("Bind", claim=claim, status=bound))
    assert needs_live_read(AllocationDecision("Bind", status=bound))  # adopting a member claimed for us


def test_other_decisions_need_no_extra_read() -> None:
    assert not needs_live_read(AllocationDecision("Queued", status={"status": {"phase": "Queued"}}))
    assert not needs_live_read(AllocationDecision("HeartbeatBound", requeue_after=30.0))
    assert not needs_live_read(AllocationDecision("Release", member_patch=MemberPatch("m1", {}, "Release")))
