"""An ambiguous create of a sequenced id whose object is gone when read back counts as taken
(sequenced-metadata.md step 3): the commit goes back to step 1 instead of creating the id again.

destroy seed 30333: a GC detaching a clone created the clone's manifest 4; the reply was lost,
the retry found it existing, and the GC stalled 17 s before reading it back. A hard destroy of
the clone deleted manifest 4 meanwhile (everything but the latest, destroyed, manifest), the
read-back found nothing and the GC created manifest 4 again, a manifest adding a checkpoint
behind a destroyed one, which the hard destroyer's last listing could miss: a lone manifest of a
destroyed database (DESTROY-3). Switch ``sequenced-gone-recreated`` restores the re-create.
"""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import TransientObjectStoreError
from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestConflict, ManifestStore, manifest_key
from slatedb.runtime import probes, switches
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def _store_whose_create_reply_is_lost_and_object_deleted_before_the_read_back():
    """Manifest 2's first create applies but its reply is lost; the retry finds it existing; a
    destroyer deletes it before the creator reads it back."""
    store = memory_store()
    real_put, real_get = store.put, store.get
    key = manifest_key(2)
    lost = []

    async def put(k, data, mode=None):
        meta = await real_put(k, data, mode) if mode is not None else await real_put(k, data)
        if k == key and not lost:
            lost.append(k)
            raise TransientObjectStoreError(k, "reply lost")
        return meta

    async def get(k, byte_range=None):
        if k == key:
            store.delete_now(k)  # the destroyer, while the creator stalled
        return await real_get(k, byte_range)

    store.put, store.get = put, get
    return store, key


def _commit_two(bugs: frozenset[str] = frozenset()):
    store, key = _store_whose_create_reply_is_lost_and_object_deleted_before_the_read_back()
    rt = ProductionRuntime()
    rt.bugs = bugs
    hits: list[str] = []
    rt.probe = hits.append  # type: ignore[method-assign]
    ms = ManifestStore(store, rt)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True, writer_epoch=1))
    return store, key, ms, hits


def test_an_ambiguous_create_whose_object_is_gone_counts_as_taken() -> None:
    store, key, ms, hits = _commit_two()
    with pytest.raises(ManifestConflict):
        trio.run(ms.try_write, 2, ManifestV2(initialized=True, writer_epoch=2))
    assert key not in store._bucket.objects  # not created again
    assert probes.CREATE_GONE_TAKEN in hits


def test_with_the_switch_the_create_lands_again_on_the_destroyed_database() -> None:
    store, key, ms, hits = _commit_two(frozenset({switches.SEQUENCED_GONE_RECREATED}))
    trio.run(ms.try_write, 2, ManifestV2(initialized=True, writer_epoch=2))  # "committed"
    assert key in store._bucket.objects  # created again after the destroyer deleted it
    assert probes.CREATE_GONE_TAKEN not in hits


def test_gone_behind_the_boundary_may_have_landed_and_is_refused_as_such() -> None:
    """Gone behind the GC boundary: a GC freed it after others built on it, and it may have been
    our own attempt that landed, so the outcome is the boundary check's refusal (re-apply the
    edit, looking for its change first), not a plain conflict. seqmeta seed 14273 took it for a
    conflict and its counter came out one above the commits and refusals it could account for."""
    from slatedb.errors import ObjectVersionBehindBoundaryError

    store, key, ms, hits = _commit_two()
    store.put_now("gc/manifest.boundary", b"5")
    with pytest.raises(ObjectVersionBehindBoundaryError):
        trio.run(ms.try_write, 2, ManifestV2(initialized=True, writer_epoch=2))
    assert key not in store._bucket.objects and probes.CREATE_GONE_TAKEN in hits
