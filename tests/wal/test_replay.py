"""``replay_wal`` and the writer's retries: the replay range is exactly ``(after_id, before_id)``
(objects at or below ``after_id`` may be gone: GC deletes what L0 holds), a missing object is
fencing only when a manifest store *and* the replaying writer's epoch say so, and a writer that
is not halted retries a transient WAL write instead of calling itself fenced."""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import CorruptionError, TransientObjectStoreError
from slatedb.format.sst import SstOptions
from slatedb.format.types import ManifestV2
from slatedb.format.wal_sst import encode_wal_sst
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.row import Row, RowKind
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import WalWriter, replay_wal, wal_key
from tests.db.helpers import memory_store


def _row(seq: int) -> Row:
    return Row(b"k%d" % seq, seq, RowKind.VALUE, b"v")


def _put_wal(store, wal_id: int) -> None:
    store.put_now(wal_key(wal_id), encode_wal_sst([_row(wal_id)], SstOptions()).data)


@pytest.mark.parametrize("after_id", [3, 4], ids=["odd", "even"])
def test_replay_reads_exactly_the_ids_between_the_bounds(after_id: int) -> None:
    store = memory_store()
    for i in range(after_id + 1, after_id + 4):  # nothing at or below after_id: collected
        _put_wal(store, i)
    _put_wal(store, after_id + 4)  # at before_id: not replayed
    rows, count = trio.run(lambda: replay_wal(store, ProductionRuntime(), after_id, after_id + 4, after_seq=0))
    assert count == 3 and [r.seq for r in rows] == [after_id + 1, after_id + 2, after_id + 3]


@pytest.mark.parametrize("given", ["manifests", "epoch"])
def test_a_missing_object_without_both_a_manifest_store_and_an_epoch_is_corruption(given: str) -> None:
    """Fencing needs the replaying writer's epoch to compare with the manifest's: with only one
    of the two there is nothing to compare, and the gap is corruption (as with neither)."""
    store = memory_store()
    rt = ProductionRuntime()
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=3))
    _put_wal(store, 2)  # wal/3 inside the range (1, 4) is missing
    kw = {"manifests": ms} if given == "manifests" else {"epoch": 2}
    with pytest.raises(CorruptionError, match="WAL object missing"):
        trio.run(lambda: replay_wal(store, rt, 1, 4, after_seq=0, **kw))


class FailsFirstPut(MemoryStore):
    """The first WAL data write fails with a transient error (it did not apply)."""

    failed = False

    async def put(self, key, data, mode=OVERWRITE):
        if key.startswith("wal/") and data and not self.failed:
            self.failed = True
            raise TransientObjectStoreError(key, "503 Slow Down")
        return await super().put(key, data, mode)


def test_a_writer_that_is_not_halted_retries_a_transient_wal_write() -> None:
    rt = ProductionRuntime()
    store = FailsFirstPut(MemoryBucket(), rt.now_ms, url="memory://retry")
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=2))
    w = trio.run(lambda: WalWriter.fence(store, rt, ms, 2, 0, SstOptions()))
    assert trio.run(w.write, [_row(7)]) == 2
    assert store.failed and not w.halted
    rows, _ = trio.run(lambda: replay_wal(store, rt, 1, 3, after_seq=0))
    assert [r.seq for r in rows] == [7]


class ProbingRuntime(ProductionRuntime):
    """Counts probe hits and keeps the replay events (production ignores both)."""

    def __init__(self) -> None:
        super().__init__()
        self.probes: list[str] = []
        self.replays: list[dict] = []

    def probe(self, name: str) -> None:
        self.probes.append(name)

    def event(self, kind: str, **fields) -> None:
        if kind == "replay":
            self.replays.append(fields)


def test_the_replay_fence_probe_fires_once_per_fence_object_replayed() -> None:
    from slatedb.format.wal_sst import FENCE_BYTES
    from slatedb.runtime import probes

    store = memory_store()
    _put_wal(store, 2)
    store.put_now(wal_key(3), FENCE_BYTES)  # a newer writer's fence in the range
    _put_wal(store, 4)
    rt = ProbingRuntime()
    rows, count = trio.run(lambda: replay_wal(store, rt, 1, 5, after_seq=0))
    assert count == 3 and [r.seq for r in rows] == [2, 4]
    assert rt.probes == [probes.WAL_REPLAY_FENCE]
    assert [(e["rows"], e["fence"]) for e in rt.replays] == [(1, False), (0, True), (1, False)]
