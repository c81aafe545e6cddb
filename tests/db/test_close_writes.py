"""What a clean close writes (writer.md step 12; CKPT-4), counted at the object store: the WAL object of
the last rows, their L0 SST, then **one** manifest -- the L0 flush's ``AddL0`` drops the writer
checkpoint itself instead of refreshing it, so no second manifest follows to release it. A close
with nothing left to flush still releases the checkpoint (one manifest). The database reopens
with every row, in this engine and (tests/interop) in the official one."""

from __future__ import annotations

import slatedb
from slatedb.errors import SlateDBError
from slatedb.manifest.checkpoints import is_writer_checkpoint
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime

from .helpers import latest_manifest

SETTINGS = {"compactor_options": None, "flush_interval": "1h", "manifest_poll_interval": "1h"}


class RecordingStore(MemoryStore):
    """A memory store that records the key of every put."""

    def __init__(self) -> None:
        super().__init__(MemoryBucket(), ProductionRuntime().now_ms, url="memory://close")
        self.puts: list[str] = []

    async def put(self, key, data, mode=None):  # type: ignore[override]
        self.puts.append(key)
        return await (super().put(key, data) if mode is None else super().put(key, data, mode))


def _open(store: RecordingStore) -> slatedb.Db:
    return slatedb.Db.open("memory://close", settings=SETTINGS, store=store)


def _writer_checkpoints(store: RecordingStore) -> list:
    return [c for c in latest_manifest(store)[1].checkpoints if is_writer_checkpoint(c)]


def test_close_after_writes_writes_one_manifest_after_the_wal_object_and_the_sst() -> None:
    store = RecordingStore()
    db = _open(store)
    for i in range(500):
        db.put(b"key%05d" % i, b"value%05d" % i)
    assert _writer_checkpoints(store), "an open writer holds its checkpoint"
    before_id, before = latest_manifest(store)
    store.puts.clear()
    db.close()
    kinds = [key.split("/")[0] for key in store.puts]
    assert kinds == ["wal", "compacted", "manifest"], store.puts
    after_id, after = latest_manifest(store)
    assert after_id == before_id + 1
    assert len(after.l0) == len(before.l0) + 1 and after.last_l0_seq == 500
    assert not _writer_checkpoints(store), "the close's L0 commit dropped the writer checkpoint"
    with _open(store) as db:
        assert [k for k, _ in db.scan()] == [b"key%05d" % i for i in range(500)]


def test_close_with_nothing_to_flush_still_releases_the_writer_checkpoint() -> None:
    store = RecordingStore()
    db = _open(store)
    db.put(b"k", b"v")
    db.flush(wal=False)  # the row is in L0: the close has nothing to flush
    assert _writer_checkpoints(store), "an L0 flush of a writer that is not closing refreshes its checkpoint"
    store.puts.clear()
    db.close()
    assert [key.split("/")[0] for key in store.puts] == ["manifest"], store.puts
    assert not _writer_checkpoints(store)
    with _open(store) as db:
        assert db.get(b"k") == b"v"


def test_a_close_whose_database_fails_as_its_flush_returns_writes_no_manifest() -> None:
    """A background task that fails the database while the close flushes (the manifest poll
    meeting a store error, say) stops it for good: the close then skips the release of the
    writer checkpoint, and a failed writer writes no manifest; the checkpoint stays, as after
    a crash, for the next writer to replace."""
    store = RecordingStore()
    db = _open(store)
    db.put(b"k", b"v")
    db.flush(wal=False)  # nothing left to flush: the close's release would write the one manifest
    core = db._core
    flush = core.flush_memtable

    async def flush_then_fail() -> None:
        await flush()
        core._fail(SlateDBError("a background task failed"))

    core.flush_memtable = flush_then_fail
    store.puts.clear()
    db.close()
    assert store.puts == []
    assert _writer_checkpoints(store)
    with _open(store) as db:
        assert db.get(b"k") == b"v"


# -- CKPT-5: the in-process compactor's startup pin goes with the close ----------------------------

WITH_COMPACTOR = {**SETTINGS, "compactor_options": {"poll_interval": "1h"}}


def _open_with_compactor(store: RecordingStore, **extra) -> slatedb.Db:
    return slatedb.Db.open("memory://close", settings={**WITH_COMPACTOR, **extra}, store=store)


def _wait_for_compactor_pin(store: RecordingStore) -> set:
    """The ids of the non-writer checkpoints once the in-process compactor's startup is done:
    its claim in the manifest and then its first ``.compactions`` file (written after the claim:
    a test that clears ``store.puts`` between the two would see the compactor's write, as one
    loaded run did)."""
    import time
    for _ in range(3000):
        m = latest_manifest(store)[1]
        if m.compactor_epoch and any(k.startswith("compactions/") for k in store.puts):
            return {c.id for c in m.checkpoints if not is_writer_checkpoint(c)}
        time.sleep(0.01)
    raise AssertionError("the in-process compactor never finished its startup")


def test_close_drops_its_compactors_startup_pin_in_its_one_manifest() -> None:
    store = RecordingStore()
    db = _open_with_compactor(store)
    pins = _wait_for_compactor_pin(store)
    assert len(pins) == 1, "the compactor's claim pins the manifest it replaced"
    for i in range(100):
        db.put(b"key%05d" % i, b"v")
    before_id = latest_manifest(store)[0]
    db.close()
    after_id, after = latest_manifest(store)
    assert after_id == before_id + 1, "one manifest (the writer may first lose a race to the claim it never adopted)"
    assert len(after.l0) == 1 and after.checkpoints == (), "no writer checkpoint, no startup pin"


def test_close_with_nothing_to_flush_drops_the_startup_pin_with_the_writer_checkpoint() -> None:
    store = RecordingStore()
    db = _open_with_compactor(store)
    _wait_for_compactor_pin(store)
    before_id = latest_manifest(store)[0]
    store.puts.clear()
    db.close()
    assert {key.split("/")[0] for key in store.puts} == {"manifest"}, store.puts
    after_id, after = latest_manifest(store)
    assert after_id == before_id + 1 and after.checkpoints == ()


def test_a_hard_destroy_right_after_a_close_is_not_refused() -> None:
    """open, write, close, hard destroy: the official engine allows it at once (its compactor pins
    only at compaction commits); ours refused for ``checkpoint_lifetime`` (15 min) while the
    startup pin lived. A user's own checkpoint still refuses it (DESTROY-1)."""
    import functools

    import trio

    from slatedb.checkpoint import CheckpointOptions
    from slatedb.destroy import destroy
    from slatedb.errors import InvalidDeletionError

    store = RecordingStore()
    db = _open_with_compactor(store)
    _wait_for_compactor_pin(store)
    db.put(b"k", b"v")
    db.close()
    trio.run(functools.partial(destroy, store, ProductionRuntime(), soft=False))
    assert store.list_now("") == [], "every object deleted"

    store = RecordingStore()
    with _open_with_compactor(store) as db:
        _wait_for_compactor_pin(store)
        db.put(b"k", b"v")
        db.create_checkpoint(options=CheckpointOptions(lifetime_s=3600))
    try:
        trio.run(functools.partial(destroy, store, ProductionRuntime(), soft=False))
    except InvalidDeletionError as e:
        assert "1 active checkpoint" in str(e)
    else:
        raise AssertionError("a user's checkpoint must refuse a hard destroy")
