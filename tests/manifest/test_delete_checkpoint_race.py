"""Two processes delete the same checkpoint (checkpoints-gc.md step 4, edit ``DeleteCheckpoint``):
the one whose create loses the race to the other's delete re-reads, finds the checkpoint gone and
reports the delete done, writing nothing -- "already applied when retried and the id is gone"
(slatedb/manifest/edits.py). A first attempt that finds no such checkpoint still refuses with
:class:`CheckpointNotFoundError`. `sim mutate` seed 25: ``ManifestStore.commit`` not marking the
attempt after a ``ManifestConflict`` as retried survived: no check raced two deletes."""

from __future__ import annotations

import uuid

import pytest
import trio

from slatedb.errors import CheckpointNotFoundError
from slatedb.format.types import ManifestV2
from slatedb.manifest.checkpoints import make_checkpoint
from slatedb.manifest.edits import DeleteCheckpoint
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def test_a_delete_that_loses_the_race_to_another_delete_of_the_same_checkpoint_is_done() -> None:
    cp = make_checkpoint(uuid.uuid4(), 1, 0)  # never expires
    store = memory_store()
    mine, theirs = ManifestStore(store, ProductionRuntime()), ManifestStore(store, ProductionRuntime())
    stored = trio.run(mine.try_write, 1, ManifestV2(initialized=True, writer_epoch=1, checkpoints=(cp,)))
    won = trio.run(lambda: theirs.commit(DeleteCheckpoint(cp.id)))
    assert won.written and won.stored.id == 2 and won.stored.manifest.checkpoints == ()
    # Ours was applied to manifest 1 (the read before theirs landed): its create of 2 conflicts,
    # the retry reads 2 and finds the checkpoint gone.
    lost = trio.run(lambda: mine.commit(DeleteCheckpoint(cp.id), current=stored))
    assert not lost.written and lost.stored.id == 2 and lost.result is None
    assert trio.run(mine.list_ids) == [1, 2]
    # Without a lost race the same edit on the same manifest refuses: nothing to delete.
    with pytest.raises(CheckpointNotFoundError):
        trio.run(lambda: mine.commit(DeleteCheckpoint(cp.id)))
    assert trio.run(mine.list_ids) == [1, 2]
