"""``named_by_older_manifests`` (slatedb/spark/load_pins.py, LOAD-6): which of a load's staged
SSTs an older stored manifest still names, newest manifest first, stopping once every candidate
is found."""

from __future__ import annotations

from ulid import ULID

from slatedb.format.types import CompactedSsTableV2, ManifestV2, SsTableInfo
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from slatedb.spark.load_pins import named_by_older_manifests
from tests.db.helpers import memory_store

INFO = SsTableInfo(first_entry=b"a", last_entry=b"z", filter_offset=100, filter_len=20, index_offset=120, index_len=30)


def naming(*ids: ULID) -> ManifestV2:
    return ManifestV2(initialized=True, ssts=tuple(CompactedSsTableV2(i, INFO, 2) for i in ids))


async def test_older_manifests_are_read_newest_first_and_the_look_stops_once_every_candidate_is_found() -> None:
    """The newest manifests are the likeliest to name a load's SSTs (those a compaction rewrote
    since): manifest 4 names both candidates, so it is the only one read; manifests 1-3 (one
    naming a candidate, one naming nothing) are not (`sim mutate` seed 23: the ids sorted oldest
    first read all four for the same answer, unnoticed)."""
    a, b, other = ULID.from_int(1), ULID.from_int(2), ULID.from_int(3)
    ms = ManifestStore(memory_store(), ProductionRuntime())
    for mid, m in enumerate([naming(), naming(a), naming(other), naming(a, b), naming()], start=1):
        await ms.try_write(mid, m)
    reads: list[int] = []
    real_read = ms.read

    async def read(mid: int):
        reads.append(mid)
        return await real_read(mid)

    ms.read = read  # type: ignore[method-assign]
    assert await named_by_older_manifests(ms, {a, b}, 0, 5) == {a, b}
    assert reads == [4]
    reads.clear()
    assert await named_by_older_manifests(ms, {a, other}, 0, 5) == {a, other}  # found across two
    assert reads == [4, 3]
    reads.clear()
    assert await named_by_older_manifests(ms, {b, ULID.from_int(9)}, 0, 5) == {b}  # one never found: all read
    assert reads == [4, 3, 2, 1]
