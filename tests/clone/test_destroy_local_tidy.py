"""A destroy on a local directory leaves no trace of the database (destroy.md "What a destroy
leaves"): no ``.slatedb-locks`` lock directory, no empty ``manifest/``, ``wal/``, ... directory,
and no empty root -- as ``rm -r`` of the path would. Before, a hard destroy of ``file:///x/a``
left ``a/`` with ``.slatedb-locks/``, ``manifest/``, ``wal/`` and ``compacted/`` in it. What
holds anything not the database's (a database nested below, a user's file) stays, and so does a
lock file another process holds; a process whose store made a directory before the destroy
removed it makes it again at its next put."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb.destroy import destroy_url
from slatedb.format.layout import DB_OBJECT_DIRECTORIES
from slatedb.gc import GarbageCollector
from slatedb.errors import ObjectNotFoundError
from slatedb.objstore.base import CREATE_IF_ABSENT, PutMode
from slatedb.objstore.local import LocalStore
from slatedb.objstore.url import resolve_store

from .helpers import NO_COMPACTOR
from .test_destroy_nested import Later, put_object, put_rows, rows


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("soft", [False, True], ids=["hard", "soft-then-gc"])
def test_a_destroy_leaves_no_directory_behind(tmp_path: Path, soft: bool) -> None:
    a = f"file://{tmp_path}/a"
    put_rows(a, {b"k": b"v"})
    put_rows(a, {b"k2": b"v2"})  # a second writer: update-if-match, overwrites -> lock files
    assert (tmp_path / "a" / ".slatedb-locks").is_dir()
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
    assert not (tmp_path / "a").exists(), tree(tmp_path / "a")
    put_rows(a, {b"again": b"1"})  # made again at the path
    assert rows(a) == {b"again": b"1"}


def test_a_destroy_leaves_what_is_not_the_databases_and_only_that(tmp_path: Path) -> None:
    a = f"file://{tmp_path}/a"
    put_rows(a, {b"k": b"v"})
    put_rows(f"{a}/b", {b"kb": b"vb"})
    put_object(a, "NOTES.txt", b"mine")
    (tmp_path / "a" / "mine").mkdir()  # a user's (empty) directory
    trio.run(lambda: destroy_url(a, soft=False))
    top = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert top == ["NOTES.txt", "b", "mine"], top
    assert rows(f"{a}/b") == {b"kb": b"vb"}


def test_a_lock_another_process_holds_stays_and_a_stale_store_makes_its_directories_again(tmp_path: Path) -> None:
    root = tmp_path / "a"

    async def main() -> None:
        stale = LocalStore(str(root))  # a process that wrote before the destroy, still running
        await stale.put("gc/manifest.boundary", b"1")
        await stale.put("gc/manifest.boundary", b"2", PutMode.update_if_match((await stale.head("gc/manifest.boundary")).etag))
        await stale.delete("gc/manifest.boundary")
        with pytest.raises(ObjectNotFoundError):  # an update of a missing key leaves its lock file
            await stale.put("gc/x", b"", PutMode.update_if_match('"0-0-0"'))
        locks = sorted((root / ".slatedb-locks").iterdir())
        assert len(locks) == 1
        held = os.open(locks[0], os.O_RDWR)
        fcntl.flock(held, fcntl.LOCK_EX)  # another process is inside a put of that key
        try:
            destroyer = LocalStore(str(root))
            await destroyer.tidy_destroyed_root(DB_OBJECT_DIRECTORIES)
            assert tree(root) == [".slatedb-locks", f".slatedb-locks/{locks[0].name}"]  # only the held lock
        finally:
            os.close(held)
        await destroyer.tidy_destroyed_root(DB_OBJECT_DIRECTORIES)
        assert not root.exists()
        # The stale store had made gc/ and the root ready; both are gone: its puts make them again.
        await stale.put("gc/manifest.boundary", b"3", CREATE_IF_ABSENT)
        assert (await stale.get("gc/manifest.boundary")).data == b"3"
        await stale.put("wal/00000000000000000001.sst", b"", CREATE_IF_ABSENT)  # an empty create (O_EXCL in place)
        await stale.put("gc/manifest.boundary", b"4")  # an overwrite (under its lock)
        assert (await stale.get("gc/manifest.boundary")).data == b"4"

    trio.run(main)


def test_a_lock_directory_removed_before_the_lock_file_is_opened_is_made_again(tmp_path: Path, monkeypatch) -> None:
    """The tidy of a destroy in another process removes the (empty) lock directory between a
    put's ``makedirs`` of it and its open of the lock file: the put makes it again."""
    store = LocalStore(str(tmp_path / "a"))
    real_open, raced = os.open, []

    def racing_open(path, flags, *args, **kwargs):
        if str(path).endswith(".lock") and not raced:
            raced.append(path)
            os.rmdir(os.path.dirname(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", racing_open)
    trio.run(store.put, "gc/manifest.boundary", b"1")  # an overwrite: under the key's lock
    assert raced and (tmp_path / "a" / "gc" / "manifest.boundary").read_bytes() == b"1"
