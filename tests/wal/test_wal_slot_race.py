"""RFC 001's race at a writer's next WAL slot: an older writer that listed ``wal/`` late puts its
fence exactly where the current writer writes next (wal-fencing.md step 7).

The current writer's create finds the slot taken; it must read the manifest epoch before doing
anything else: still its own epoch -> the object is an older writer's fence (that writer halts
at its epoch re-check), skip to the next id; a newer epoch -> halt with ``FencedError``, write
nothing more. ``fence-ignored`` (sim/scenarios/catalogue.py) is the switch that skips without reading.
"""

from __future__ import annotations

import attrs
import pytest
import trio

from slatedb.errors import FencedError
from slatedb.format.sst import SstOptions
from slatedb.format.types import ManifestV2
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.manifest.store import ManifestStore
from slatedb.row import Row, RowKind
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import WalWriter, wal_key
from tests.db.helpers import memory_store


def _setup(manifest_epoch: int):
    store = memory_store()
    rt = ProductionRuntime()
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=2))
    w = trio.run(lambda: WalWriter.fence(store, rt, ms, 2, 0, SstOptions()))
    assert w.fence_id == 1
    if manifest_epoch != 2:
        trio.run(ms.try_write, 2, attrs.evolve(ManifestV2(initialized=True), writer_epoch=manifest_epoch))
    return store, rt, ms, w


ROWS = [Row(b"k", 7, RowKind.VALUE, b"v")]


def test_an_older_writers_fence_in_our_next_slot_is_skipped():
    store, rt, ms, w = _setup(manifest_epoch=2)
    store.put_now(wal_key(2), b"")  # epoch 1's late fence lands in our next slot
    assert trio.run(w.write, ROWS) == 3
    assert store.get_now(wal_key(2)).data == b""  # the fence is left as it was
    got = decode_wal_sst(bytes(store.get_now(wal_key(3)).data), wal_key(3))
    assert [r.key for r in got.rows] == [b"k"] and not w.halted
    # And on: the next write takes the next id.
    assert trio.run(w.write, ROWS) == 4


def test_a_newer_writers_fence_in_our_next_slot_halts_us():
    store, rt, ms, w = _setup(manifest_epoch=3)
    store.put_now(wal_key(2), b"")  # epoch 3's fence
    with pytest.raises(FencedError, match="epoch 2 was fenced by a writer with epoch 3"):
        trio.run(w.write, ROWS)
    assert w.halted and [m.key for m in store.list_now("wal/")] == [wal_key(1), wal_key(2)]
    with pytest.raises(FencedError):
        trio.run(w.write, ROWS)


class _Bugged:
    """The production runtime with catalogue switches on (as the simulator's runtime has)."""

    def __init__(self, rt, bugs):
        self._rt, self.bugs = rt, bugs

    def __getattr__(self, name):
        return getattr(self._rt, name)


def test_the_fence_ignored_switch_writes_above_a_newer_fence():
    """The catalogue switch at this site, shown doing the wrong thing the check exists for."""
    store, rt, ms, w = _setup(manifest_epoch=3)
    w.runtime = _Bugged(rt, frozenset({"fence-ignored"}))
    store.put_now(wal_key(2), b"")
    assert trio.run(w.write, ROWS) == 3  # a zombie wrote above the newer writer's fence


class _Recording(ProductionRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, dict]] = []

    def event(self, kind, **fields):
        self.events.append((kind, fields))


def test_a_fence_whose_slot_is_taken_moves_up_and_says_so_in_the_trace(monkeypatch):
    """Steps 3-4 of the fence itself: the slot above the listing is taken (a racing writer's
    fence, created after our listing); the manifest still holds our epoch, so we fence at the
    next id. Both creates are traced as fence creates (the timeline and the FENCE checks tell a
    fence from a data write by it)."""
    from slatedb.wal import writer as writer_mod

    store = memory_store()
    rt = _Recording()
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=2))
    listed = writer_mod.list_wal_ids

    async def list_then_race(s, r):
        ids = await listed(s, r)
        store.put_now(wal_key(1), b"")  # the racing writer's fence lands after our listing
        return ids

    monkeypatch.setattr(writer_mod, "list_wal_ids", list_then_race)
    w = trio.run(lambda: WalWriter.fence(store, rt, ms, 2, 0, SstOptions()))
    assert w.fence_id == 2
    creates = [f for k, f in rt.events if k == "create" and f["path"].startswith("wal/")]
    assert creates == [{"path": wal_key(1), "outcome": "exists", "epoch": 2, "fence": True},
                       {"path": wal_key(2), "outcome": "ok", "epoch": 2, "fence": True}]
    assert ("fence_written", {"epoch": 2, "id": 2}) in rt.events


def test_a_data_write_is_traced_as_a_data_create_both_when_its_slot_is_free_and_when_taken():
    """The other half of the trace contract above: a WAL *data* object's creates say
    ``fence: False`` (the destroy and fencing checks, and the timeline, count data objects by it),
    the taken slot's ``exists`` and the create one slot up alike."""
    store, _rt, ms, w = _setup(manifest_epoch=2)
    rt = _Recording()
    w.runtime = rt
    store.put_now(wal_key(2), b"")  # an older writer's late fence in our next slot
    assert trio.run(w.write, ROWS) == 3
    creates = [f for k, f in rt.events if k == "create" and f["path"].startswith("wal/")]
    assert creates == [{"path": wal_key(2), "outcome": "exists", "epoch": 2, "fence": False},
                       {"path": wal_key(3), "outcome": "ok", "epoch": 2, "fence": False}]
