"""A destroy deletes its database's objects only (spec/protocols/destroy.md H1, H4, S5,
DESTROY-8): another database stored below its path (``a/b``, or ``a/wal/b`` inside one of the
database's own directories) and a user's file beside it are left, with every row, on ``memory://``
and on a local directory (``file://``). Before DESTROY-8 a hard destroy of ``a`` deleted ``a/b``
(every object under the root), and GC's removal of a soft-destroyed ``a`` deleted ``a/wal/b``
(every object of the directories it lists)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import slatedb
from slatedb.destroy import destroy_url
from slatedb.errors import NotFoundError
from slatedb.gc import GarbageCollector
from slatedb.objstore.url import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .helpers import NO_COMPACTOR, bucket

#: Databases stored below the destroyed one's path: beside its directories, and inside one.
NESTED = ("b", "wal/b")
NOTES = "NOTES.txt"


class Later(ProductionRuntime):
    """The production runtime, its clock an hour ahead: a soft destroy's grace has passed."""

    def now_ms(self) -> int:
        return super().now_ms() + 3_600_000


@pytest.fixture(params=["memory", "file"])
def base(request, tmp_path: Path) -> str:
    return f"{bucket()}/x" if request.param == "memory" else f"file://{tmp_path}/x"


def put_rows(url: str, rows: dict[bytes, bytes]) -> None:
    with slatedb.Db.open(url, settings=NO_COMPACTOR) as db:
        for k, v in rows.items():
            db.put(k, v, durable=True)


def rows(url: str) -> dict[bytes, bytes]:
    with slatedb.Db.open(url, settings=NO_COMPACTOR, create="never") as db:
        return dict(db.scan())


def keys(url: str) -> list[str]:
    async def main() -> list[str]:
        store = resolve_store(url)
        try:
            return [m.key for m in await store.list("")]
        finally:
            await store.aclose()
    return trio.run(main)


def put_object(url: str, key: str, data: bytes) -> None:
    async def main() -> None:
        store = resolve_store(url)
        try:
            await store.put(key, data)
        finally:
            await store.aclose()
    trio.run(main)


def make_world(base: str) -> str:
    """The database ``a``, the databases nested below it, a user's file at its root."""
    a = f"{base}/a"
    put_rows(a, {b"ka": b"va"})
    for name in NESTED:
        put_rows(f"{a}/{name}", {b"k-" + name.encode(): b"v-" + name.encode()})
    put_object(a, NOTES, b"mine")
    return a


def assert_nested_rows(a: str) -> None:
    for name in NESTED:
        assert rows(f"{a}/{name}") == {b"k-" + name.encode(): b"v-" + name.encode()}, name


def assert_nested_intact(a: str) -> None:
    """The nested databases hold their rows, the user's file is there, nothing of ``a`` is."""
    assert_nested_rows(a)
    left = keys(a)
    assert NOTES in left
    assert not any(k.startswith(("manifest/", "compacted/", "compactions/", "gc/")) for k in left), left
    assert all(k == NOTES or k.startswith(("b/", "wal/b/")) for k in left), left


def test_a_hard_destroy_leaves_the_databases_nested_below_it(base: str) -> None:
    a = make_world(base)
    trio.run(lambda: destroy_url(a, soft=False))
    assert_nested_intact(a)
    # Run again: nothing of the database is left, so it is done (H1), the nested ones untouched.
    trio.run(lambda: destroy_url(a, soft=False))
    assert_nested_intact(a)
    # A database made again at the path starts empty; the nested ones are not its leftovers.
    put_rows(a, {b"again": b"1"})
    assert rows(a) == {b"again": b"1"}
    assert_nested_rows(a)


def test_gc_removing_a_soft_destroyed_database_leaves_the_databases_nested_below_it(base: str) -> None:
    a = make_world(base)
    trio.run(lambda: destroy_url(a, soft=True))

    async def collect() -> None:
        store = resolve_store(a)
        try:
            gc = GarbageCollector(store, Later(), db_delete_grace_s=60.0)
            await gc.run_once()
            assert gc.finished
        finally:
            await store.aclose()

    trio.run(collect)
    assert_nested_intact(a)


def test_hard_destroy_of_a_path_holding_only_other_objects_is_done(base: str) -> None:
    """H1: no object of a database's layout and no manifest: nothing to destroy (not
    ``NotFoundError``); what lies there stays."""
    a = f"{base}/a"
    put_rows(f"{a}/b", {b"k": b"v"})
    put_object(a, NOTES, b"mine")
    trio.run(lambda: destroy_url(a, soft=False))
    assert rows(f"{a}/b") == {b"k": b"v"}
    assert NOTES in keys(a)
    with pytest.raises(NotFoundError):  # a soft destroy needs a manifest to mark
        trio.run(lambda: destroy_url(a, soft=True))


def test_hard_destroy_of_objects_of_the_layout_without_a_manifest_refuses(base: str) -> None:
    """H1: objects of a database's layout but no manifest: not a database, nothing deleted."""
    a = f"{base}/a"
    put_object(a, "wal/00000000000000000001.sst", b"")
    put_object(a, NOTES, b"mine")
    with pytest.raises(NotFoundError, match="wal/00000000000000000001.sst"):
        trio.run(lambda: destroy_url(a, soft=False))
    assert sorted(keys(a)) == [NOTES, "wal/00000000000000000001.sst"]


#: Objects a bulk load leaves under its database's root (bulk-load.md): an open marker and an
#: intent, and a sharded load's shard database (a manifest, a WAL object, an SST).
LOAD = "01JDQ4ZZ6V8W7F0S3X2KQH0N1R"
SHARD = f"shards/{LOAD}/000003-1-01JDQ50A1B2C3D4E5F6G7H8J9K"
LOAD_OBJECTS = (f"bulk-load/{LOAD}/open", f"bulk-load/{LOAD}/000003-1-01JDQ50A1B2C3D4E5F6G7H8J9K",
                f"{SHARD}/manifest/00000000000000000001.manifest", f"{SHARD}/wal/00000000000000000001.sst",
                f"{SHARD}/compacted/01JDQ50A1B2C3D4E5F6G7H8J9M.sst")


@pytest.mark.parametrize("soft", [True, False], ids=["soft-then-gc", "hard"])
def test_a_destroy_deletes_the_bulk_loads_objects_too(base: str, soft: bool) -> None:
    """S5 as H4: a bulk load's ``bulk-load/`` and ``shards/`` objects are the database's
    (``is_db_key``); GC's removal listed only the five engine directories and left them for
    ever. What is not the database's (a nested database, a user's file) still stays."""
    a = make_world(base)
    for key in LOAD_OBJECTS:
        put_object(a, key, b"x")
    trio.run(lambda: destroy_url(a, soft=soft))
    if soft:
        async def collect() -> None:
            store = resolve_store(a)
            try:
                gc = GarbageCollector(store, Later(), db_delete_grace_s=60.0)
                await gc.run_once()
                assert gc.finished
            finally:
                await store.aclose()
        trio.run(collect)
    assert not any(k.startswith(("bulk-load/", "shards/")) for k in keys(a)), keys(a)
    assert_nested_intact(a)
