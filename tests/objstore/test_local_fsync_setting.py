"""The local store's ``fsync`` setting (spec/objstore.md STORE-7 and STORE-8): on by default,
off only when asked for by the URL (``file:///dir?fsync=false``) or the store options, refused
unless it is true or false; honoured by every write a database makes through the store."""

from __future__ import annotations

import os

import pytest

import slatedb
from slatedb.errors import InvalidArgumentError, InvalidUrlError
from slatedb.objstore import resolve_store
from slatedb.objstore.base import CREATE_IF_ABSENT
from slatedb.objstore.local import LocalStore

QUIET = {"compactor_options": None, "garbage_collector_options": None}


@pytest.mark.parametrize(
    "query, options, want",
    [
        ("", None, True),
        ("?fsync=true", None, True),
        ("?fsync=false", None, False),
        ("?fsync=FALSE", None, False),
        ("", {"fsync": "false"}, False),
        ("", {"fsync": False}, False),
        ("?fsync=false", {"fsync": "true"}, True),  # options win over the URL, as for s3://
        ("?fsync=true", {"fsync": "false"}, False),
    ],
)
def test_the_setting_from_the_url_and_the_options(tmp_path, query, options, want) -> None:
    store = resolve_store(f"file://{tmp_path}/db{query}", options=options)
    assert isinstance(store, LocalStore) and store.fsync is want
    assert store.root == f"{tmp_path}/db"  # the query is no part of the directory


@pytest.mark.parametrize(
    "query, options, words",
    [
        ("?fsync=no", None, "must be true or false, got 'no'"),
        ("?fsync=", None, "must be true or false, got ''"),
        ("?fsync=0", None, "must be true or false"),
        ("?fsync=false&fsync=true", None, "more than once"),
        ("?sync=false", None, "unknown file URL parameter(s) ['sync']"),
        ("", {"fsync": "off"}, "file store option 'fsync' must be true or false"),
        ("", {"fsync": 0}, "must be true or false"),
        ("", {"region": "eu"}, "unknown file store option(s) ['region']"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(tmp_path, query, options, words) -> None:
    with pytest.raises(InvalidUrlError) as info:
        resolve_store(f"file://{tmp_path}/db{query}", options=options)
    assert words in str(info.value)
    with pytest.raises(InvalidUrlError):  # through the API too, before anything is written
        slatedb.Db.open(f"file://{tmp_path}/db{query}", store_options=options)
    assert not (tmp_path / "db").exists()


def test_the_constructor_takes_a_bool_only(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="fsync must be a bool"):
        LocalStore(str(tmp_path), fsync="false")  # type: ignore[arg-type]


def _count_syncs(monkeypatch) -> list[str]:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.parametrize("how", ["url", "options"])
def test_a_database_with_fsync_off_syncs_nothing_and_keeps_its_writes(tmp_path, monkeypatch, how) -> None:
    """Open (epoch bump, WAL fence), a durable put (a WAL object), a memtable flush (an L0 SST and
    a manifest), a reader's checkpoint, close: no sync at all; everything is there on reopen."""
    synced = _count_syncs(monkeypatch)
    url = f"file://{tmp_path}/db" + ("?fsync=false" if how == "url" else "")
    options = {"fsync": "false"} if how == "options" else None
    with slatedb.Db.open(url, QUIET, store_options=options) as db:
        db.put(b"k", b"v", durable=True)
        db.put(b"k2", b"v2")
        db.flush(wal=False)
        with slatedb.DbReader.open(url, store_options=options) as reader:
            assert reader.get(b"k2") == b"v2"
    assert synced == []
    with slatedb.Db.open(url, QUIET, store_options=options) as db:
        assert db.get(b"k") == b"v" and db.get(b"k2") == b"v2"
    assert synced == []


def test_a_database_with_fsync_on_syncs_every_object_and_its_directory(tmp_path, monkeypatch) -> None:
    """The default: every object the same steps write is synced, and its directory (STORE-7)."""
    synced = _count_syncs(monkeypatch)
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, QUIET) as db:
        db.put(b"k", b"v", durable=True)
        db.put(b"k2", b"v2")
        db.flush(wal=False)
    root = f"{tmp_path}/db"
    dirs = {os.path.relpath(p, root) for p in synced if os.path.isdir(p)}
    assert {"manifest", "wal", "compacted"} <= dirs, synced
    files = [p for p in synced if not os.path.isdir(p)]
    assert files and all(".slatedb-tmp." in os.path.basename(p) for p in files), files  # bytes synced before the link
    n = len(synced)
    with slatedb.Db.open(url + "?fsync=true", QUIET) as db:
        assert db.get(b"k") == b"v" and db.get(b"k2") == b"v2"
    assert len(synced) > n  # the reopen's epoch bump and WAL fence


async def test_with_fsync_off_a_small_create_runs_on_the_loop(tmp_path, monkeypatch) -> None:
    """Unsynced, a small create-if-absent (a manifest, a WAL fence) is a page-cache write and a
    link: it runs on the event loop's thread, with no worker-thread hand-off. A large one, an
    overwrite (it may wait for another process's flock) and any put with syncs on run in a
    worker thread."""
    import threading

    from slatedb.objstore.base import OVERWRITE
    from slatedb.objstore.local import INLINE_CREATE_MAX_BYTES

    where: list[str] = []
    real_link = os.link
    loop_thread = threading.get_ident()

    def link(src, dst, *a, **k):
        where.append("loop" if threading.get_ident() == loop_thread else "worker")
        return real_link(src, dst, *a, **k)

    monkeypatch.setattr(os, "link", link)
    off, on = LocalStore(str(tmp_path / "off"), fsync=False), LocalStore(str(tmp_path / "on"))
    await off.put("manifest/00000000000000000001.manifest", b"m", CREATE_IF_ABSENT)
    await off.put("wal/00000000000000000001.sst", b"x" * INLINE_CREATE_MAX_BYTES, CREATE_IF_ABSENT)
    await off.put("wal/00000000000000000002.sst", b"x" * (INLINE_CREATE_MAX_BYTES + 1), CREATE_IF_ABSENT)
    await on.put("manifest/00000000000000000001.manifest", b"m", CREATE_IF_ABSENT)
    assert where == ["loop", "loop", "worker", "worker"]
    assert (await off.get("manifest/00000000000000000001.manifest")).data == b"m"
    with pytest.raises(Exception) as info:
        await off.put("manifest/00000000000000000001.manifest", b"m2", CREATE_IF_ABSENT)
    assert type(info.value).__name__ == "ObjectAlreadyExistsError"  # still one winner (STORE-2)

    replaced: list[str] = []
    real_replace = os.replace

    def replace(src, dst, *a, **k):
        replaced.append("loop" if threading.get_ident() == loop_thread else "worker")
        return real_replace(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", replace)
    await off.put("compacted/x.sst", b"s", OVERWRITE)
    assert replaced == ["worker"]


async def test_with_fsync_on_a_directory_a_put_creates_is_synced_into_its_parent(tmp_path, monkeypatch) -> None:
    """STORE-7: an object's directory sync makes its name durable, not the name of the directory
    holding it. A put that creates directories (a new database's ``manifest/``, ``wal/``; the
    root the store created) syncs each into its parent, parents first, once; syncs off, none."""
    synced = _count_syncs(monkeypatch)
    root = tmp_path / "new" / "db"
    store = LocalStore(str(root))  # creates new/ and new/db: synced by the first put, not here
    assert synced == []
    await store.put("a/b/k", b"v", CREATE_IF_ABSENT)
    rel = [os.path.relpath(p, tmp_path) for p in synced]
    # new's name (in tmp), db's (in new), a's (in db), b's (in a); then the object: its bytes, its directory
    assert rel[:4] == [".", "new", "new/db", "new/db/a"], rel
    assert rel[4].startswith("new/db/a/b/.slatedb-tmp.") and rel[5] == "new/db/a/b", rel
    synced.clear()
    await store.put("a/b/k2", b"v", CREATE_IF_ABSENT)
    assert [os.path.relpath(p, tmp_path) for p in synced][-1] == "new/db/a/b" and len(synced) == 2  # no parent again
    synced.clear()
    await store.put("a/c/k", b"", CREATE_IF_ABSENT)  # an empty object's in-place create too
    assert [os.path.relpath(p, tmp_path) for p in synced] == ["new/db/a", "new/db/a/c"]
    synced.clear()
    off = LocalStore(str(tmp_path / "off" / "db"), fsync=False)
    await off.put("a/b/k", b"v", CREATE_IF_ABSENT)
    assert synced == []
