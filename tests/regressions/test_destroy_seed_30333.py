"""destroy seed 30333: a GC's ambiguous create of the clone's manifest 4, deleted by a hard
destroy before the read-back, was created again over the destroyed database (DESTROY-3).
tests/manifest/test_gone_is_taken.py holds the rule; this replays the seed."""

from __future__ import annotations

from sim.campaign.sweep import Scenario, run_seed


def test_seed_30333_passes() -> None:
    row = run_seed(Scenario("destroy"), 30333)
    assert row["ok"], row


def test_seqmeta_seed_14273_passes() -> None:
    """The first cut of the rule above called a gone create a plain conflict: seqmeta seed 14273's
    own create had landed and been freed by GC, its edit was applied again, and the counter came
    out one above the commits plus the creates refused at the boundary."""
    row = run_seed(Scenario("seqmeta"), 14273)
    assert row["ok"], row
