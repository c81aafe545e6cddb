"""db seed 581: a fenced writer's open met a WAL object its successor had already collected.

Writer w2 fenced at wal/27 and replayed wal/1..; its GET of wal/6 stalled for ~880 virtual s.
Meanwhile w3 fenced w2, replayed the same objects, flushed them to L0, advanced
``replay_after_wal_id`` and its GC deleted wal/6. w2's GET then came back "not found" and its
open raised ``CorruptionError: ... WAL object missing from the replay range (0, 27)``. Nothing
was lost (the rows were in w3's L0): w2 was fenced, and that is what open now says. Fix:
``replay_wal`` re-reads the manifest epoch on a missing object (``FencedError`` when a newer
writer exists) before calling it corruption.
"""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import CorruptionError, FencedError
from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import replay_wal
from sim.scenarios.db import run_db_workload
from tests.db.helpers import memory_store


def test_seed_581_passes():
    result = run_db_workload(581)
    assert result.ok, result.violations


def _world(writer_epoch: int):
    store = memory_store()
    rt = ProductionRuntime()
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=writer_epoch))
    store.put_now("wal/00000000000000000001.sst", b"")  # wal/2, inside the range (1, 3), is gone
    return store, rt, ms


def test_a_missing_wal_object_after_a_newer_writer_is_fencing():
    store, rt, ms = _world(writer_epoch=3)  # a newer writer (epoch 3) took over from us (epoch 2)
    with pytest.raises(FencedError, match="epoch 2 was fenced by a writer with epoch 3"):
        trio.run(lambda: replay_wal(store, rt, 1, 3, after_seq=0, manifests=ms, epoch=2))


def test_a_missing_wal_object_while_still_the_writer_is_corruption():
    store, rt, ms = _world(writer_epoch=2)
    with pytest.raises(CorruptionError, match="WAL object missing from the replay range"):
        trio.run(lambda: replay_wal(store, rt, 1, 3, after_seq=0, manifests=ms, epoch=2))
    with pytest.raises(CorruptionError):  # without a manifest store: corruption, as before
        trio.run(lambda: replay_wal(store, rt, 1, 3, after_seq=0))
