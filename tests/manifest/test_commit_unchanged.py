"""``ManifestStore.commit_unchanged``: the answer of ``commit``'s first attempt when it writes
nothing (found without awaiting: GC's checkpoint expiry runs its commit shielded, and in most
passes nothing expires); None when that attempt would write, list the WAL or refuse, so that the
caller's ``commit`` does it."""

from __future__ import annotations

import uuid

import pytest
import trio

from slatedb.errors import CheckpointNotFoundError
from slatedb.format.types import ManifestV2
from slatedb.manifest.checkpoints import make_checkpoint
from slatedb.manifest.edits import AddReaderCheckpoint, DeleteCheckpoint, ExpireCheckpoints
from slatedb.manifest.store import Committed, ManifestStore, StoredManifest
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def _store(manifest: ManifestV2) -> tuple[ManifestStore, object]:
    ms = ManifestStore(memory_store(), ProductionRuntime())
    return ms, trio.run(ms.try_write, 1, manifest)


def test_nothing_to_expire_is_commits_answer_without_a_write() -> None:
    live = make_checkpoint(uuid.uuid4(), 1, 0)  # never expires
    ms, stored = _store(ManifestV2(initialized=True, writer_epoch=1, checkpoints=(live,)))
    got = ms.commit_unchanged(ExpireCheckpoints(), stored)
    assert got == Committed(stored, (), written=False)
    assert got == trio.run(lambda: ms.commit(ExpireCheckpoints(), current=stored))
    assert trio.run(ms.list_ids) == [1]


def test_an_attempt_that_writes_lists_the_wal_or_refuses_is_left_to_commit() -> None:
    expired = make_checkpoint(uuid.uuid4(), 1, 0, lifetime_s=1.0)  # expired long ago
    ms, stored = _store(ManifestV2(initialized=True, writer_epoch=1, checkpoints=(expired,)))
    assert ms.commit_unchanged(ExpireCheckpoints(), stored) is None  # it would write
    # Lists the WAL (after the read, in commit): even one that would write nothing is left to
    # commit (its checkpoint is there already).
    assert ms.commit_unchanged(AddReaderCheckpoint(expired.id), stored) is None
    gone = DeleteCheckpoint(uuid.uuid4())
    assert ms.commit_unchanged(gone, stored) is None  # refused: commit() raises it
    with pytest.raises(CheckpointNotFoundError):
        trio.run(lambda: ms.commit(gone, current=stored))
    assert trio.run(ms.list_ids) == [1]  # commit_unchanged never writes
    committed = trio.run(lambda: ms.commit(ExpireCheckpoints(), current=stored))
    assert committed.written and committed.result == (expired,)


def test_commit_checks_the_manifest_it_builds_on_once_per_id(monkeypatch) -> None:
    """``commit`` checks the manifest it builds on (``check_manifest`` walks every entry) once per
    manifest id, however the id reaches it: two commits that write nothing on manifest 1000, the
    second given an equal id that is another int object, check it once (`sim mutate` seed 23:
    ``is not`` for ``!=`` checked it again at every commit, unnoticed)."""
    import slatedb.manifest.store as store_mod

    checked: list[int] = []
    real_check = store_mod.check_manifest
    monkeypatch.setattr(store_mod, "check_manifest", lambda m, mid: (checked.append(mid), real_check(m, mid))[1])
    live = make_checkpoint(uuid.uuid4(), 1, 0)  # never expires: ExpireCheckpoints writes nothing
    ms = ManifestStore(memory_store(), ProductionRuntime())
    stored = trio.run(ms.try_write, 1000, ManifestV2(initialized=True, writer_epoch=1, checkpoints=(live,)))
    for mid in (stored.id, int(str(stored.id))):
        got = trio.run(lambda: ms.commit(ExpireCheckpoints(), current=StoredManifest(mid, stored.manifest)))
        assert not got.written and got.stored.id == 1000
    assert checked == [1000]
