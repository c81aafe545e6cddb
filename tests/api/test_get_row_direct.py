"""``get_key_value`` (sync and async) and a transaction's commit-time conflict reads read an
uncached block on the caller's thread where the store can (a local directory), as ``get``
does (``ReadPath.get_row_direct``), instead of a hop to the engine's loop for each block: the
hop is ~400 us of CPU a read under asyncio, and the sync API's portal a thread hand-off."""

from __future__ import annotations

import asyncio

import pytest
import trio

import slatedb
import slatedb.aio as aio

N = 3000
KEYS = [b"k%05d" % i for i in range(0, N, 37)]


def _value(i: int) -> bytes:
    return b"v%05d" % i + b"x" * 40


def _load(path) -> None:
    with slatedb.Db.open(f"file://{path}", {"compactor_options": None, "l0_sst_size_bytes": 65536}) as db:
        for i in range(N):
            db.put(b"k%05d" % i, _value(i))


def _count_slow(core) -> list:
    calls: list = []
    real = core.get_row_slow

    async def counting(*args):  # the read through the engine's loop
        calls.append(args[0])
        return await real(*args)

    core.get_row_slow = counting
    return calls


def _expected_values() -> list:
    return [_value(int(k[1:])) for k in KEYS]


def test_sync_get_key_value_and_a_commits_conflict_reads_of_a_local_directory_stay_on_the_callers_thread(tmp_path) -> None:
    _load(tmp_path)
    with slatedb.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:
        calls = _count_slow(db._core)
        got = [db.get_key_value(k) for k in KEYS]
        assert [kv.value for kv in got] == _expected_values() and all(kv.seq > 0 for kv in got)
        assert db.get_key_value(b"k99999") is None and db.get_key_value(b"k00001~") is None
        assert calls == []
    with slatedb.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:  # cold again
        calls = _count_slow(db._core)
        txn = db.begin("serializable_snapshot")
        txn.mark_read(KEYS)  # read-set keys whose rows the commit reads from cold blocks
        txn.put(b"new", b"1")
        txn.commit()
        assert calls == [] and db.get(b"new") == b"1"


async def _async_reads(path) -> tuple[list, list]:
    async with aio.Db.open(f"file://{path}", {"compactor_options": None}) as db:
        calls = _count_slow(db._core)
        got = [await db.get_key_value(k) for k in KEYS]
        got.append(await db.get_key_value(b"k99999"))
        txn = await db.begin("serializable_snapshot")
        await txn.mark_read([b"k02999"])
        await txn.put(b"new", b"1")
        await txn.commit()
        return got, calls


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_async_get_key_value_of_a_local_directory_reads_on_the_callers_thread(tmp_path, library) -> None:
    _load(tmp_path)
    got, calls = asyncio.run(_async_reads(tmp_path)) if library == "asyncio" else trio.run(_async_reads, tmp_path)
    assert [kv.value for kv in got[:-1]] == _expected_values() and got[-1] is None
    assert calls == []


async def _async_scan(path) -> tuple[list, list]:
    async with aio.Db.open(f"file://{path}", {"compactor_options": None}) as db:
        calls: list = []
        real = db._core.load_blocks

        async def counting(*args):  # a block load through the engine's loop
            calls.append(args[1:])
            return await real(*args)

        db._core.load_blocks = counting
        rows = [kv async for kv in db.scan(b"k00100", b"k02500")]
        return rows, calls


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_an_async_scan_of_a_local_directory_reads_its_blocks_on_the_callers_thread(tmp_path, library) -> None:
    """As the sync API's scan: a cold block batch of a local directory is a copy out of a memory
    map, not a hop to the engine's loop (another store, a failed read: through the loop)."""
    _load(tmp_path)
    rows, calls = asyncio.run(_async_scan(tmp_path)) if library == "asyncio" else trio.run(_async_scan, tmp_path)
    assert rows == [(b"k%05d" % i, _value(i)) for i in range(100, 2500)]
    assert calls == []


def test_a_long_async_scan_of_a_local_directory_lets_the_loops_other_tasks_run(tmp_path) -> None:
    """Reading blocks on the caller's thread must not make a scan one long step of the loop: it
    yields after each block read (as it suspended at each load through the engine before), so a
    task beside it runs during the scan, and a cancellation can land there."""
    _load(tmp_path)

    async def main() -> tuple[int, int]:
        async with aio.Db.open(f"file://{tmp_path}", {"compactor_options": None}) as db:
            ticks, rows, scanning = 0, 0, True

            async def beside() -> None:
                nonlocal ticks
                while scanning:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.ensure_future(beside())
            await asyncio.sleep(0)  # the task is running
            ticks = 0
            async for _kv in db.scan():
                rows += 1
            scanning = False
            await task
            return rows, ticks

    rows, ticks = asyncio.run(main())
    assert rows == N and ticks > 0


async def _gets_beside_a_task(path, library: str) -> tuple[list, int, list]:
    """Cold gets and get_key_values of a local directory in one loop, a task counting its turns
    beside them; the loop's reads through the engine counted (there must be none)."""
    sleep0 = asyncio.sleep if library == "asyncio" else trio.sleep
    async with aio.Db.open(f"file://{path}", {"compactor_options": None}) as db:
        calls = _count_slow(db._core)
        state = {"ticks": 0, "reading": True}

        async def beside() -> None:
            while state["reading"]:
                state["ticks"] += 1
                await sleep0(0)

        async def reads() -> list:
            await sleep0(0)  # the task beside is running
            state["ticks"] = 0
            got = []
            for k in KEYS:
                got.append(await db.get(k))
                got.append((await db.get_key_value(k)).value)
            ticks = state["ticks"]
            state["reading"] = False
            return got, ticks

        if library == "asyncio":
            task = asyncio.ensure_future(beside())
            got, ticks = await reads()
            await task
        else:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(beside)
                got, ticks = await reads()
        return got, ticks, calls


@pytest.mark.parametrize("library", ["asyncio", "trio"])
def test_a_loop_of_cold_async_gets_of_a_local_directory_lets_the_loops_other_tasks_run(tmp_path, library) -> None:
    """As an async scan does (d86a96b): a get that read a block on the caller's thread yields to
    the loop once it has its answer, so a long loop of cold gets is not one step of the loop
    (another task starved, no cancellation landing); a get answered from memory or the block
    cache does not yield (the database reopened: its blocks are cold)."""
    _load(tmp_path)
    got, ticks, calls = (asyncio.run(_gets_beside_a_task(tmp_path, library)) if library == "asyncio"
                         else trio.run(_gets_beside_a_task, tmp_path, library))
    assert got == [v for v in _expected_values() for _ in (0, 1)]
    assert calls == [] and ticks > 0
