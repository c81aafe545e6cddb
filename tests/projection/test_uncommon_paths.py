"""Projection paths no other check runs (``sim mutate`` reported their mutants survived unrun):
C1's refusals of a range that excludes its start or is empty and of a source checkpoint that is
no UUID, and C3's WAL look when a WAL object goes (GC) between its listing and its read."""

from __future__ import annotations

import uuid

import pytest
import trio

from slatedb.errors import CloneSourceWithWalError, InvalidArgumentError, InvalidProjectionError
from slatedb.lsm.view import KeyBounds
from slatedb.objstore.base import OVERWRITE, ObjectStore
from slatedb.projection import KeyRange
from slatedb.projection.create import SourceSpec, check_request, create_database
from slatedb.projection.ranges import as_bounds
from slatedb.runtime.production import ProductionRuntime
from tests.clone.helpers import bucket, latest, store, write_wal_only


def test_a_projection_range_must_include_its_start_and_not_be_empty() -> None:
    with pytest.raises(InvalidProjectionError, match="must include its start key"):
        as_bounds(KeyBounds(b"a", False, b"z"))
    with pytest.raises(InvalidProjectionError, match="empty projection range"):
        as_bounds(KeyBounds(b"m", True, b"m"))  # [m, m)
    with pytest.raises(InvalidProjectionError, match="empty projection range"):
        as_bounds(KeyBounds(b"z", True, b"a"))
    for ok in (KeyBounds(b"a", True, b"z"), KeyBounds(None, False, b"z"), KeyBounds(b"a", True, None),
               KeyBounds(b"m", True, b"m", True)):
        assert as_bounds(ok) == ok


def test_a_source_checkpoint_that_is_no_uuid_is_a_typed_error_and_its_text_form_is_taken() -> None:
    src = store(f"{bucket()}/src")
    with pytest.raises(InvalidArgumentError, match="source checkpoint 'not-a-uuid' is not a UUID"):
        check_request("memory://elsewhere/d", [SourceSpec(src, "not-a-uuid", None)])
    cid = uuid.uuid4()
    assert check_request("memory://elsewhere/d", [SourceSpec(src, str(cid), None)])[0].checkpoint == cid


class WalGoneAtRead(ObjectStore):
    """``inner`` on which the first WAL object read after each listing of ``wal/`` is deleted (by
    GC) just before the read."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.url, self.gone, self.armed = inner, inner.url, [], False

    async def get(self, key, byte_range=None):
        if key.startswith("wal/") and self.armed:
            self.armed = False
            self.gone.append(key)
            await self.inner.delete(key)
        return await self.inner.get(key, byte_range)

    async def head(self, key):
        return await self.inner.head(key)

    async def list(self, prefix=""):
        self.armed = self.armed or prefix.startswith("wal/")
        return await self.inner.list(prefix)

    async def put(self, key, data, mode=OVERWRITE):
        return await self.inner.put(key, data, mode)

    async def delete(self, key):
        return await self.inner.delete(key)

    async def copy(self, src_key, dst_key):
        return await self.inner.copy(src_key, dst_key)

    def open_url(self, url):
        return self.inner.open_url(url)

    async def aclose(self):
        await self.inner.aclose()


def test_a_wal_object_gone_between_the_listing_and_its_read_is_skipped_and_the_next_still_read() -> None:
    """C3: a projected source must hold no WAL rows past its replay point. A WAL object listed
    but deleted before its read holds none; the WAL objects after it are still read, and one
    holding rows refuses the projection (taking the gone object for the end of the look let the
    projection through without those rows)."""
    b = bucket()
    wal = f"{b}/wal"
    write_wal_only(wal, {b"z%03d" % i: b"v" for i in range(3)})
    write_wal_only(wal, {b"z%03d" % i: b"w" for i in range(3, 6)})
    src = WalGoneAtRead(store(wal))

    async def main():
        await create_database(store(f"{b}/d"), [SourceSpec(src, None, KeyRange(b"z", None))], ProductionRuntime())

    with pytest.raises(CloneSourceWithWalError):
        trio.run(main)
    assert len(src.gone) == 1  # the refusal came at C3's dry run, the first look
    assert not [c for c in latest(wal).manifest.checkpoints if c.metadata is None]  # released


def test_a_resumed_run_makes_the_final_checkpoints_past_an_entry_without_one() -> None:
    """C6 (``_ensure_finals``) on a resumed run (the manifest written, not yet initialized): an
    entry without a final checkpoint (another engine's) is skipped, not the end of C6: the entry
    after it gets its final checkpoint on its source again (deleted here, as a crash before C6
    would have left it missing)."""
    import attrs

    from slatedb.checkpoint import delete_checkpoint
    from slatedb.checkpoint.ops import find_checkpoint
    from slatedb.format.types import ExternalDb
    from slatedb.manifest.store import ManifestStore
    from tests.projection import test_create as tc

    b = bucket()
    src, _data = tc.world(b)
    cp = tc.given_checkpoint(src)
    sources = ((src, cp, KeyRange(None, b"m")),)
    tc.make(f"{b}/part", *sources)
    cur = latest(f"{b}/part")
    (entry,) = cur.manifest.external_dbs
    no_final = ExternalDb("elsewhere", uuid.uuid4(), None, ())
    edited = attrs.evolve(cur.manifest, external_dbs=(no_final, entry), initialized=False)
    trio.run(ManifestStore(store(f"{b}/part"), ProductionRuntime()).try_write, cur.id + 1, edited)
    rt = ProductionRuntime()
    trio.run(delete_checkpoint, ManifestStore(store(src), rt), rt, entry.final_checkpoint_id)
    assert find_checkpoint(latest(src).manifest, entry.final_checkpoint_id) is None
    done = tc.make(f"{b}/part", *sources)
    assert done.initialized
    assert find_checkpoint(latest(src).manifest, entry.final_checkpoint_id) is not None


def test_a_resumed_run_whose_entry_has_no_checkpoint_left_to_make_its_final_one_from_stops_typed() -> None:
    """C6 on a resumed run when the entry's source checkpoint is gone too and no source offers a
    final checkpoint of that database (the candidates all missing): the run raises
    :class:`CheckpointNotFoundError` naming the external database and leaves the database not
    initialized (C7 never runs), rather than initializing it with an entry whose final checkpoint
    does not exist (CLONE-1). `sim mutate` seed 25: ``k / 1 < len(candidates)`` for ``k + 1``
    went on past the last candidate and initialized it."""
    import attrs

    from slatedb.checkpoint import delete_checkpoint
    from slatedb.checkpoint.ops import find_checkpoint
    from slatedb.errors import CheckpointNotFoundError
    from slatedb.manifest.store import ManifestStore
    from tests.projection import test_create as tc

    b = bucket()
    src, _data = tc.world(b)
    cp = tc.given_checkpoint(src)
    sources = ((src, cp, KeyRange(None, b"m")),)
    tc.make(f"{b}/part", *sources)
    cur = latest(f"{b}/part")
    (entry,) = cur.manifest.external_dbs
    assert entry.source_checkpoint_id == cp
    trio.run(ManifestStore(store(f"{b}/part"), ProductionRuntime()).try_write, cur.id + 1,
             attrs.evolve(cur.manifest, initialized=False))  # as a crash before C6 left it
    rt = ProductionRuntime()
    for gone in (entry.final_checkpoint_id, cp):
        trio.run(delete_checkpoint, ManifestStore(store(src), rt), rt, gone)
    with pytest.raises(CheckpointNotFoundError, match="the external database"):
        tc.make(f"{b}/part", *sources)
    assert not latest(f"{b}/part").manifest.initialized
    assert find_checkpoint(latest(src).manifest, entry.final_checkpoint_id) is None
