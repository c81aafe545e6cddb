"""The local-directory backend's atomicity across processes and against partial writes."""

from __future__ import annotations

import multiprocessing
import os

import trio

from slatedb.errors import ObjectAlreadyExistsError, PreconditionFailedError
from slatedb.objstore import CREATE_IF_ABSENT, PutMode
from slatedb.objstore.local import LocalStore


def _increment_worker(root: str, n: int, out) -> None:
    async def main() -> int:
        store = LocalStore(root)
        done = 0
        while done < n:
            got = await store.get("counter")
            try:
                await store.put("counter", str(int(got.data) + 1).encode(), PutMode.update_if_match(got.meta.etag))
                done += 1
            except PreconditionFailedError:
                pass
        return done

    out.put(trio.run(main))


def _create_worker(root: str, i: int, out) -> None:
    async def main() -> bool:
        try:
            await LocalStore(root).put("manifest/00000000000000000002.manifest", f"p{i}".encode(), CREATE_IF_ABSENT)
            return True
        except ObjectAlreadyExistsError:
            return False

    out.put(trio.run(main))


def _run_procs(target, args_list):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, out)) for args in args_list]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_update_if_match_is_atomic_across_processes(tmp_path):
    root = str(tmp_path / "store")

    async def init() -> None:
        await LocalStore(root).put("counter", b"0", CREATE_IF_ABSENT)

    trio.run(init)
    results = _run_procs(_increment_worker, [(root, 40) for _ in range(4)])
    assert sum(results) == 160

    async def read() -> bytes:
        return (await LocalStore(root).get("counter")).data

    assert trio.run(read) == b"160"  # no lost update


def test_create_if_absent_is_atomic_across_processes(tmp_path):
    root = str(tmp_path / "store")
    results = _run_procs(_create_worker, [(root, i) for i in range(6)])
    assert sorted(results) == [False] * 5 + [True]


async def test_no_partial_object_is_ever_visible(tmp_path):
    """A reader racing a writer of a large object sees the whole old or the whole new object."""
    store = LocalStore(str(tmp_path / "s"), fsync=False)
    big_a, big_b = b"a" * 4_000_000, b"b" * 4_000_000
    await store.put("obj", big_a)
    seen: set[bytes] = set()

    async def writer() -> None:
        for i in range(10):
            await store.put("obj", big_b if i % 2 == 0 else big_a)

    async def reader() -> None:
        for _ in range(30):
            data = (await store.get("obj")).data
            seen.add(data[:1] + data[-1:] + str(len(data)).encode())

    async with trio.open_nursery() as n:
        n.start_soon(writer)
        n.start_soon(reader)
    assert seen <= {b"aa4000000", b"bb4000000"}
    # no temporary files are left behind, and they are never listed
    assert [m.key for m in await store.list()] == ["obj"]
    assert not [f for f in os.listdir(store.root) if f.startswith(".slatedb-tmp")]


def _churn_worker(root: str, n: int, out) -> None:
    async def main() -> int:
        store = LocalStore(root)
        for i in range(n):
            await store.put("k", b"%d" % i)  # an overwrite: under k's lock
            await store.delete("k")  # under k's lock, which it then unlinks
        return n

    out.put(trio.run(main))


def _lock_files(root: str) -> list[str]:
    return [f for _d, _, fs in os.walk(os.path.join(root, ".slatedb-locks")) for f in fs]


def test_a_deleted_object_leaves_no_lock_file(tmp_path):
    """Overwrites and deletes lock the key's lock file; deleting the object removes the lock file
    too (before, every key ever overwritten or deleted left one for ever: a database whose GC had
    deleted its objects kept thousands of them, and a destroyed one was not gone)."""
    root = str(tmp_path / "store")

    async def main() -> None:
        store = LocalStore(root)
        for i in range(20):
            await store.put(f"wal/{i:020d}.sst", b"x")
            await store.put(f"wal/{i:020d}.sst", b"y")  # overwrite: locks
        assert len(_lock_files(root)) == 20  # a lock file per object that exists
        for i in range(20):
            await store.delete(f"wal/{i:020d}.sst")

    trio.run(main)
    assert _lock_files(root) == []


def test_lock_files_unlinked_under_contention_keep_writers_exclusive(tmp_path):
    """Processes overwriting and deleting one key at once: a waiter that wins the flock of a lock
    file its holder unlinked locks the key's new lock file instead; nobody deadlocks, every
    operation completes, and nothing is left."""
    root = str(tmp_path / "store")
    assert sum(_run_procs(_churn_worker, [(root, 40) for _ in range(4)])) == 160
    assert _lock_files(root) == []
    # Update-if-match stays atomic with lock files coming and going (a counter next to the churn).
    trio.run(lambda: LocalStore(root).put("counter", b"0", CREATE_IF_ABSENT))
    results = _run_procs(_increment_worker, [(root, 20) for _ in range(3)])
    assert sum(results) == 60


async def test_syncs_of_a_create_empty_and_not(tmp_path, monkeypatch):
    """STORE-7: a create-if-absent is durable when it returns: the object's bytes synced before its name
    appears (temporary file, fsync, link), then its directory synced. An empty object (a WAL
    fence) has no bytes to tear or sync: it is created in place (``O_EXCL``, still exactly one
    winner) and only its directory is synced. (The first put into a new directory also syncs that
    directory into its parent: tests/objstore/test_local_fsync_setting.py; the directories are
    made first here.)"""
    store = LocalStore(str(tmp_path / "s"))
    await store.put("manifest/00000000000000000000.manifest", b"m", CREATE_IF_ABSENT)
    await store.put("wal/00000000000000000000.sst", b"w", CREATE_IF_ABSENT)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        synced.append("dir" if os.path.isdir(path) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    await store.put("manifest/00000000000000000001.manifest", b"m", CREATE_IF_ABSENT)
    assert synced == ["file", "dir"]
    synced.clear()
    meta = await store.put("wal/00000000000000000001.sst", b"", CREATE_IF_ABSENT)
    assert synced == ["dir"]
    assert meta.size_bytes == 0 and meta == await store.head("wal/00000000000000000001.sst")
    try:
        await store.put("wal/00000000000000000001.sst", b"", CREATE_IF_ABSENT)
        raise AssertionError("a second create of an existing empty object succeeded")
    except ObjectAlreadyExistsError:
        pass
    assert sorted(os.listdir(tmp_path / "s" / "wal")) == ["00000000000000000000.sst", "00000000000000000001.sst"]  # no temporary file left
    synced.clear()
    try:
        await store.put("manifest/00000000000000000001.manifest", b"late", CREATE_IF_ABSENT)
        raise AssertionError("a second create of an existing object succeeded")
    except ObjectAlreadyExistsError:
        pass
    # A name already taken is refused before a temporary file is written and synced (a writer's
    # manifest commit that lost to its in-process compactor's pays no sync for it).
    assert synced == []
    assert await store.get("manifest/00000000000000000001.manifest") is not None
    assert (await store.get("manifest/00000000000000000001.manifest")).data == b"m"
