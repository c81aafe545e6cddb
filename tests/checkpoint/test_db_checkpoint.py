"""``Db.create_checkpoint`` (sync and trio): scope ALL flushes and pins every write issued before
the call, DURABLE pins what was durable; back-pressure is not waited out; options; fencing."""

from __future__ import annotations

import time

import pytest
import trio

import slatedb
import slatedb.aio
from slatedb import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.errors import CheckpointNotFoundError, ClosedError, FencedError, InvalidArgumentError
from slatedb.format.types import WriterCheckpoint
from slatedb.runtime.production import ProductionRuntime

from ..db.helpers import latest_manifest, memory_store
from .helpers import manifest_at, pinned_contents

QUIET = {"compactor_options": None, "flush_interval": "1h", "l0_sst_size_bytes": 4096, "l0_max_ssts": 64}


def open_mem(store, **overrides):
    return slatedb.Db.open("memory://test", settings={**QUIET, **overrides}, store=store)


def test_scope_all_pins_every_write_issued_before_the_call():
    store = memory_store()
    with open_mem(store) as db:
        expected = {}
        for i in range(300):  # several memtables cut (4 KiB), the last one live
            db.put(b"k%04d" % i, b"v%d" % i)
            expected[b"k%04d" % i] = b"v%d" % i
        db.delete(b"k0007")
        del expected[b"k0007"]
        got = db.create_checkpoint(CheckpointScope.ALL)
        assert isinstance(got, CheckpointCreateResult)
        m = manifest_at(store, got.manifest_id)
        assert got.manifest_id == latest_manifest(store)[0]  # the manifest that adds the checkpoint
        # Everything went to L0: the pinned WAL range is empty, and the pinned state is complete.
        assert len(m.l0) >= 2 and m.wal_id_last_seen == m.replay_after_wal_id
        assert pinned_contents(store, got.manifest_id) == expected
        assert [c.id for c in m.checkpoints if c.metadata is None] == [got.id]
        assert any(isinstance(c.metadata, WriterCheckpoint) for c in m.checkpoints)  # the writer's own
        # Later writes (and flushes) do not change what the checkpoint pins.
        db.put(b"k0001", b"later")
        db.put(b"zzz", b"later")
        db.flush(wal=False)
        assert pinned_contents(store, got.manifest_id) == expected
        assert db.get(b"k0001") == b"later"


def test_scope_all_does_not_wait_for_back_pressure_and_pins_the_wal_instead():
    store = memory_store()
    with open_mem(store, l0_max_ssts=1) as db:
        db.put(b"first", b"1")
        db.flush(wal=False)  # L0 is now full: the L0 flusher waits for a compactor
        expected = {b"first": b"1"}
        for i in range(200):
            db.put(b"k%04d" % i, b"x" * 20)
            expected[b"k%04d" % i] = b"x" * 20
        start = time.monotonic()
        got = db.create_checkpoint(CheckpointScope.ALL, CheckpointOptions(name="bp"))
        assert time.monotonic() - start < 5
        m = manifest_at(store, got.manifest_id)
        assert len(m.l0) == 1  # nothing more reached L0 ...
        assert m.wal_id_last_seen > m.replay_after_wal_id  # ... the WAL range covers the rest
        assert pinned_contents(store, got.manifest_id) == expected


def test_scope_all_with_l0_already_past_its_limit_flushes_nothing_more():
    """L0 can hold more than ``l0_max_ssts`` (written under a larger limit, then reopened with a
    smaller one): scope ALL finds L0 full at once (``checkpoint_flush_blocked`` with the count)
    and pins the WAL instead of waiting for an L0 flush that back-pressure holds."""

    class Recorder(ProductionRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.events: list[tuple[str, dict]] = []

        def event(self, kind, **fields):
            self.events.append((kind, fields))
            super().event(kind, **fields)

    store = memory_store()
    with open_mem(store) as db:
        for i in range(3):
            db.put(b"l0-%d" % i, b"v")
            db.flush(wal=False)
    rt = Recorder()
    with slatedb.Db.open("memory://test", settings={**QUIET, "l0_max_ssts": 2}, store=store, runtime=rt) as db:
        db.put(b"k", b"v")
        got = db.create_checkpoint(CheckpointScope.ALL)
        m = manifest_at(store, got.manifest_id)
        assert len(m.l0) == 3 and m.wal_id_last_seen > m.replay_after_wal_id
        assert [f for k, f in rt.events if k == "checkpoint_flush_blocked"] == [{"l0": 3}]
        assert pinned_contents(store, got.manifest_id) == {b"l0-0": b"v", b"l0-1": b"v", b"l0-2": b"v", b"k": b"v"}


def test_scope_durable_pins_what_was_durable_without_flushing():
    store = memory_store()
    with open_mem(store) as db:
        db.put(b"a", b"1")
        h = db.put(b"b", b"2")
        db.flush()  # WAL written: durable, not in L0
        assert h.durable
        db.put(b"c", b"3")  # only in the memtable and the WAL buffer
        before = latest_manifest(store)[1]
        got = db.create_checkpoint(CheckpointScope.DURABLE)
        m = manifest_at(store, got.manifest_id)
        assert m.l0 == before.l0 and m.replay_after_wal_id == before.replay_after_wal_id
        assert pinned_contents(store, got.manifest_id) == {b"a": b"1", b"b": b"2"}
        assert db.get(b"c") == b"3"
        assert db.stats["l0_ssts"] == 0


def test_options_source_and_errors():
    store = memory_store()
    with open_mem(store) as db:
        db.put(b"a", b"1")
        first = db.create_checkpoint(options=CheckpointOptions(lifetime_s=3600, name="one"))
        copy = db.create_checkpoint(CheckpointScope.DURABLE, CheckpointOptions(source=first.id, name="two"))
        assert copy.manifest_id == first.manifest_id and copy.id != first.id
        m = latest_manifest(store)[1]
        named = {c.name: c for c in m.checkpoints if c.name}
        assert named["one"].checkpoint_expire_time_s > time.time() + 3500
        assert named["two"].checkpoint_expire_time_s == 0
        with pytest.raises(CheckpointNotFoundError):
            db.create_checkpoint(options=CheckpointOptions(source=__import__("uuid").uuid4()))
        with pytest.raises(InvalidArgumentError):
            db.create_checkpoint("all")  # type: ignore[arg-type]
        db.put(b"still", b"writable")
    with pytest.raises(ClosedError):
        db.create_checkpoint()


def test_a_fenced_writer_cannot_checkpoint():
    store = memory_store()
    old = open_mem(store)
    try:
        old.put(b"a", b"1")
        with open_mem(store) as new:
            new.put(b"b", b"2")
            with pytest.raises(FencedError):
                old.create_checkpoint(CheckpointScope.DURABLE)
            assert new.create_checkpoint().manifest_id == latest_manifest(store)[0]
    finally:
        old.close()


def test_aio_create_checkpoint():
    store = memory_store()

    async def main():
        async with slatedb.aio.Db.open("memory://test", settings=QUIET, store=store) as db:
            await db.put(b"a", b"1")
            got = await db.create_checkpoint(CheckpointScope.ALL, CheckpointOptions(name="aio"))
            assert pinned_contents(store, got.manifest_id) == {b"a": b"1"}
            return got

    got = trio.run(main)
    assert [c.name for c in latest_manifest(store)[1].checkpoints if c.id == got.id] == ["aio"]


def test_options_none_or_a_dict_are_taken_and_anything_else_is_refused_at_the_call():
    """``options=None`` means the defaults and a dict of CheckpointOptions' fields is taken, as
    ``ReadOptions``, ``ScanOptions`` and ``DbReaderOptions`` are; anything else, or an unknown
    field, is an ``InvalidArgumentError`` naming it before anything is flushed. Before: an
    ``AttributeError`` ('NoneType' object has no attribute 'lifetime_s') from the runtime
    thread, after scope ALL had already flushed the memtable to L0."""
    store = memory_store()
    with open_mem(store) as db:
        db.put(b"a", b"1")
        for bad in ("x", 5, ["name"]):
            with pytest.raises(InvalidArgumentError, match="CheckpointOptions"):
                db.create_checkpoint(CheckpointScope.ALL, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="lifetime"):
            db.create_checkpoint(options={"lifetime": 5})
        with pytest.raises(InvalidArgumentError, match="lifetime"):
            CheckpointOptions(lifetime=5)  # type: ignore[call-arg]
        assert db.stats["l0_ssts"] == 0  # nothing flushed by a refused call
        plain = db.create_checkpoint(CheckpointScope.DURABLE, None)  # type: ignore[arg-type]
        named = db.create_checkpoint(options={"name": "from-dict", "lifetime_s": 60})
        cps = {c.id: c for c in latest_manifest(store)[1].checkpoints}
        assert cps[plain.id].checkpoint_expire_time_s == 0 and cps[plain.id].name is None
        assert cps[named.id].name == "from-dict" and cps[named.id].checkpoint_expire_time_s > 0

    async def main():
        async with slatedb.aio.Db.open("memory://test", settings=QUIET, store=store) as db:
            with pytest.raises(InvalidArgumentError, match="CheckpointOptions"):
                await db.create_checkpoint(CheckpointScope.ALL, "x")  # type: ignore[arg-type]
            got = await db.create_checkpoint(options={"name": "aio-dict"})
            made = await slatedb.admin.create_checkpoint(store, {"name": "admin-dict"})
            with pytest.raises(InvalidArgumentError, match="CheckpointOptions"):
                await slatedb.admin.create_checkpoint(store, "x")
            return got, made

    got, made = trio.run(main)
    names = {c.id: c.name for c in latest_manifest(store)[1].checkpoints}
    assert names[got.id] == "aio-dict" and names[made.id] == "admin-dict"
