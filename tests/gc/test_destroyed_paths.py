"""slatedb/gc/destroyed.py paths no other check runs (``sim mutate``: their mutants survived
unrun): releasing a parent's final checkpoint when there is none to release or no parent left,
a shard whose manifest does not decode pinning nothing, and the report of objects that appear
after a destroy's first listing."""

from __future__ import annotations

import uuid

import trio

from slatedb import admin
from slatedb.checkpoint import CheckpointOptions
from slatedb.errors import InvalidDbStateError
from slatedb.format.types import ExternalDb
from slatedb.gc.destroyed import delete_latest_last, release_parent_checkpoint, shard_pinned
from slatedb.lsm.paths import SstLocator
from slatedb.runtime.production import ProductionRuntime
from tests.clone.helpers import bucket, latest, store, write


class Recording(ProductionRuntime):
    def __init__(self) -> None:
        super().__init__("gc")
        self.events: list[tuple[str, dict]] = []

    def event(self, kind: str, **fields) -> None:
        self.events.append((kind, fields))


def test_a_parents_final_checkpoint_is_released_only_when_there_is_one_and_a_parent_left() -> None:
    b = bucket()
    parent = f"{b}/parent"
    write(parent, {b"k": b"v"})
    cp = trio.run(admin.create_checkpoint, store(parent), CheckpointOptions(lifetime_s=None)).id
    rt = ProductionRuntime()
    locator = SstLocator(store(f"{b}/child"), rt)

    def release(db: ExternalDb) -> bool:
        return trio.run(release_parent_checkpoint, locator, rt, db)

    assert release(ExternalDb(parent, uuid.uuid4(), None, ())) is False  # no final checkpoint: nothing to do
    assert any(c.id == cp for c in latest(parent).manifest.checkpoints)
    assert release(ExternalDb(f"{b}/gone", uuid.uuid4(), cp, ())) is False  # no parent left: nothing holds it
    assert release(ExternalDb(parent, uuid.uuid4(), cp, ())) is True
    assert not any(c.id == cp for c in latest(parent).manifest.checkpoints)


async def test_a_shard_whose_manifest_does_not_decode_pins_nothing() -> None:
    b = bucket()
    root = "shards/L1/000000-0-U"
    st = store(b)
    st.put_now(f"{root}/manifest/00000000000000000001.manifest", b"not a manifest")
    assert await shard_pinned(st, ProductionRuntime(), root) is False
    # ... while one holding an active checkpoint is pinned (the path the corrupt one shares)
    write(f"{b}/{root}2", {b"k": b"v"})
    shard = store(f"{b}/{root}2")
    await admin.create_checkpoint(shard, CheckpointOptions(lifetime_s=None))
    assert await shard_pinned(st, ProductionRuntime(), f"{root}2") is True


def _bucket_with_late_objects(keys: set[str], late: list[str]):
    """A bucket's listing and delete over ``keys``; ``late`` objects appear at the first delete
    (a straggling writer's). Returns ``(list_keys, delete, deleted)``."""
    deleted: list[str] = []

    async def list_keys() -> list[str]:
        return sorted(keys)

    async def delete(key: str) -> None:
        if not deleted:
            keys.update(late)
        deleted.append(key)
        keys.discard(key)

    return list_keys, delete, deleted


async def test_objects_that_appear_after_the_first_listing_are_deleted_and_reported() -> None:
    """DESTROY-4: a listing after every other delete finds four objects written meanwhile (a
    straggling writer's); they go, the latest manifest last, and the event names how many and
    the first three."""
    keys = {"compacted/01A.sst", "manifest/00000000000000000001.manifest", "manifest/00000000000000000002.manifest"}
    late = [f"wal/{i:020d}.sst" for i in range(1, 5)]
    list_keys, delete, deleted = _bucket_with_late_objects(keys, late)

    rt = Recording()
    assert await delete_latest_last(rt, "memory://x", list_keys, delete) == 3 + 4
    assert deleted[-1] == "manifest/00000000000000000002.manifest" and set(late) <= set(deleted)
    assert [f for k, f in rt.events if k == "destroy_late_objects"] == [
        {"root": "memory://x", "objects": 4, "keys": late[:3]}]


async def test_objects_not_the_databases_are_kept_and_reported_once() -> None:
    """DESTROY-8: a listed object that is not of the database's layout (a user's file under the
    root) is left, and the first listing reports it (``destroy_foreign_kept``, the probe
    ``destroy.foreign-kept``) -- once, though late objects make a second listing that holds it
    again."""
    keys = {"compacted/01A.sst", "manifest/00000000000000000001.manifest", "notes.txt"}
    late = ["wal/00000000000000000001.sst"]
    list_keys, delete, deleted = _bucket_with_late_objects(keys, late)

    rt = Recording()
    assert await delete_latest_last(rt, "memory://x", list_keys, delete) == 3
    assert keys == {"notes.txt"} and "notes.txt" not in deleted
    assert [f for k, f in rt.events if k == "destroy_foreign_kept"] == [
        {"root": "memory://x", "objects": 1, "keys": ["notes.txt"]}]


def _bucket_written_to(stops_after: int):
    """A database's objects and a straggling writer that puts one new WAL object during the
    deletes after each of the first ``stops_after`` listings. Returns ``(list_keys, delete, keys)``."""
    keys = {"compacted/01A.sst", "manifest/00000000000000000001.manifest", "manifest/00000000000000000002.manifest"}
    listings: list[int] = []
    written: set[int] = set()

    async def list_keys() -> list[str]:
        listings.append(len(listings) + 1)
        return sorted(keys)

    async def delete(key: str) -> None:
        n = len(listings)
        if n <= stops_after and n not in written:
            written.add(n)
            keys.add(f"wal/{n:020d}.sst")
        keys.discard(key)

    return list_keys, delete, keys


async def test_a_destroy_lists_five_times_before_giving_up_on_a_database_still_written() -> None:
    """destroy.md H4: the destroy lists again while a listing finds new objects, at most 5
    listings. A writer that stops after the 3rd listing: the 4th finds its last object, the 5th
    nothing else, and the latest manifest goes. One that writes after the 4th too: the 5th still
    finds a new object (deleted), so ``InvalidDbStateError`` with the latest manifest kept (a
    re-run finishes)."""
    list_keys, delete, keys = _bucket_written_to(3)
    assert await delete_latest_last(Recording(), "memory://x", list_keys, delete) == 3 + 3
    assert keys == set()

    list_keys, delete, keys = _bucket_written_to(4)
    try:
        await delete_latest_last(Recording(), "memory://x", list_keys, delete)
    except InvalidDbStateError as e:
        assert "after 5 listings" in str(e), e
    else:
        raise AssertionError("a database still written after the 4th listing was removed")
    assert keys == {"manifest/00000000000000000002.manifest"}  # the latest manifest kept
