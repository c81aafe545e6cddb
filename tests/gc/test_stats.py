"""A pass's counts (``GcTally``, frozen into ``GcStats``): a pass that did nothing is the zero
value (one shared value, no totals to add), anything counted or flagged is not."""

from __future__ import annotations

from slatedb.gc.collector import GcTally
from slatedb.gc.stats import GcStats


def _frozen(*adds: tuple[str, int], **flags: object) -> GcStats:
    tally = GcTally()
    for name, n in adds:
        tally.add(name, n)
    if flags:
        tally.set(**flags)
    return tally.freeze()


def test_a_pass_that_did_nothing_is_the_zero_value() -> None:
    assert _frozen() == GcStats() and _frozen(("checkpoints_expired", 0)) == GcStats()
    assert _frozen() is _frozen(("ssts_deleted", 0))


def test_anything_counted_or_flagged_is_kept() -> None:
    assert _frozen(("ssts_deleted", 1), ("ssts_deleted", 2)) == GcStats(ssts_deleted=3)
    assert _frozen(db_destroyed=True, destroyed_objects=0) == GcStats(db_destroyed=True)
    assert _frozen(("checkpoints_expired", 0), ("wal_deleted", 1)).as_dict() == dict(GcStats(wal_deleted=1).as_dict())
    total = GcStats()
    for stats in (_frozen(), _frozen(("wal_deleted", 2)), _frozen(), _frozen(("boundary_advances", 1))):
        total = total + stats
    assert total == GcStats(wal_deleted=2, boundary_advances=1)
