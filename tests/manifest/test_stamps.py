"""What manifest edits write besides their main change: the times they stamp (seconds, floored,
``destroyed_at_s`` never 0), the compactor's pin on the replaced manifest, the id of a new
database's first manifest, and the bounds of the values they accept. Each test pins a value a
scenario cannot see (a time off by a fraction, an id one too high, a bound never reached) and that
a reader of the manifest -- the official wheel, GC, ``slatedb-admin`` -- does."""

from __future__ import annotations

import uuid

import attrs
import pytest
import trio

from slatedb.errors import InvalidArgumentError
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import Checkpoint, ManifestV2, WriterCheckpoint
from slatedb.manifest import Attempt, ManifestStore, WriterFence, apply_edit, manifest_key
from slatedb.manifest.checkpoints import MAX_U32, expire_time_s, make_checkpoint, pinned_for_commit
from slatedb.manifest.compaction import CompactionSpec, L0Source, RunSource
from slatedb.manifest.edits import HardDestroy, SoftDestroy
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from ..checkpoint.helpers import ClockRuntime

#: A wall clock 999 ms into a second: a stamp that rounds, or divides by anything but 1000, shows.
NOW_MS = 1_700_000_123_999
NOW_S = 1_700_000_123


def _uuid(n: int) -> uuid.UUID:
    return uuid.UUID(int=n)


def _cp(n: int, expire_s: int, **kw) -> Checkpoint:
    return Checkpoint(_uuid(n), 1, checkpoint_expire_time_s=expire_s, checkpoint_create_time_s=1, **kw)


def test_the_compactor_pin_keeps_live_checkpoints_and_pins_the_replaced_manifest() -> None:
    writer = _cp(1, 0, metadata=WriterCheckpoint(3))
    forever, live, expired = _cp(2, 0), _cp(3, NOW_S + 1), _cp(5, NOW_S - 1)
    m = ManifestV2(writer_epoch=3, checkpoints=(writer, forever, live, expired))
    got = pinned_for_commit(m, 7, NOW_MS, _uuid(9), 900.0)
    # Expired checkpoints are dropped, 0 never expires; the pin goes last.
    assert got[:-1] == (writer, forever, live)
    assert got[-1] == Checkpoint(_uuid(9), 7, checkpoint_expire_time_s=NOW_S + 900, checkpoint_create_time_s=NOW_S)


@pytest.mark.parametrize("now_ms,stamp_s", [(NOW_MS, NOW_S), (0, 1), (999, 1)], ids=["now", "epoch-0", "epoch-999ms"])
def test_destroy_edits_stamp_now_in_whole_seconds_never_zero(now_ms: int, stamp_s: int) -> None:
    """``destroyed_at_s`` is now in seconds, floored; never 0, which means "not destroyed"."""
    m = ManifestV2(writer_epoch=3, checkpoints=(_cp(1, 0, metadata=WriterCheckpoint(3)),))
    soft = apply_edit(m, SoftDestroy(WriterFence(3)), Attempt(1, now_ms))
    assert soft.result == soft.manifest.destroyed_at_s == stamp_s
    assert soft.manifest.checkpoints == ()  # the writer checkpoint goes with the mark
    hard = apply_edit(m, HardDestroy(), Attempt(1, now_ms))
    assert hard.result == hard.manifest.destroyed_at_s == stamp_s


def test_checkpoint_times() -> None:
    assert expire_time_s(NOW_MS, None) == 0  # never expires
    assert expire_time_s(NOW_MS, 60) == NOW_S + 61  # 0.999 s into the second: rounded up
    assert expire_time_s(NOW_S * 1000, 60) == NOW_S + 60
    assert expire_time_s(0, 0) == 1  # 0 would mean "never"
    with pytest.raises(InvalidArgumentError, match="u32"):
        expire_time_s(NOW_MS, float(MAX_U32))
    cp = make_checkpoint(_uuid(1), 4, NOW_MS, lifetime_s=None, name="n")
    assert (cp.manifest_id, cp.checkpoint_expire_time_s, cp.checkpoint_create_time_s, cp.name) == (4, 0, NOW_S, "n")


def test_compaction_spec_ids_are_u32() -> None:
    src = (L0Source(make_ulid()),)
    assert CompactionSpec(src, MAX_U32).destination == MAX_U32
    for bad in (MAX_U32 + 1, -1):
        with pytest.raises(InvalidArgumentError, match="not a u32"):
            CompactionSpec(src, bad)
        with pytest.raises(InvalidArgumentError, match="not a u32"):
            CompactionSpec((RunSource(bad),), 0)
    assert CompactionSpec((RunSource(MAX_U32),), 0).run_ids == (MAX_U32,)


def make_ulid():
    from ulid import ULID

    return ULID.from_int(1 << 90)


def test_a_new_database_starts_at_manifest_1_and_a_second_create_loses() -> None:
    rt = ClockRuntime("stamps", start_ms=NOW_MS)

    async def main() -> None:
        store = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://stamps")
        ms = ManifestStore(store, rt)
        first = await ms.create_initial(ManifestV2())
        assert first is not None and first.id == 1
        assert [m.key for m in store.list_now("manifest/")] == [manifest_key(1)]
        assert await ms.create_initial(attrs.evolve(ManifestV2(), writer_epoch=5)) is None  # lost: None, not an error
        assert (await ms.read_latest()).manifest == ManifestV2()
        other = MemoryStore(MemoryBucket(), rt.now_ms, url="memory://stamps-force")
        assert (await ManifestStore(other, rt).create_initial(ManifestV2(), first_id=4)).id == 4
        assert other.get_now(manifest_key(4)).data == encode_manifest(ManifestV2())

    trio.run(main)


def test_a_soft_destroy_that_lost_the_race_keeps_the_first_time_and_drops_its_writer_checkpoint() -> None:
    """The loser of two soft destroys bumped the epoch of the destroyed manifest (a writer
    checkpoint of its own); its mark keeps the winner's time and drops that checkpoint, which
    never expires and would keep GC from ever removing the database (destroy.md S4)."""
    user = _cp(2, NOW_S + 60)
    m = ManifestV2(writer_epoch=5, destroyed_at_s=77, checkpoints=(user, _cp(1, 0, metadata=WriterCheckpoint(5))))
    got = apply_edit(m, SoftDestroy(WriterFence(5)), Attempt(1, NOW_MS))
    assert got.result == got.manifest.destroyed_at_s == 77 and got.manifest.checkpoints == (user,)
    done = apply_edit(got.manifest, SoftDestroy(WriterFence(5)), Attempt(2, NOW_MS))
    assert done.manifest is None and done.landed and done.result == 77  # nothing left to do
