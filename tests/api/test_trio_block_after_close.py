"""Under trio, ``async with aio.Db.open(...) as db:`` runs the block inside the nursery of the
engine's background tasks. Found by trying it: ``await db.close()`` inside
the block cancelled that nursery's scope, so the rest of the block was skipped without a word
(code after the close never ran) and the caller's own tasks in the block were cancelled. Now a
close cancels the engine's tasks only (``slatedb.runtime.TaskScopes``, docs/db.md)."""

from __future__ import annotations

import pytest
import trio

import slatedb
import slatedb.aio as aio


def test_the_block_goes_on_after_the_database_closes(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    ran: list[str] = []

    async def main() -> None:
        async with aio.Db.open(url) as db:
            await db.put(b"a", b"1", durable=True)

            async def mine() -> None:  # the caller's own task, in the block
                await trio.sleep(0.2)
                ran.append("own task")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(mine)
                await db.close()
                ran.append("after the close")
                await trio.sleep(0.05)
                ran.append("after a sleep")
                with pytest.raises(slatedb.ClosedError):
                    await db.put(b"b", b"2")
        ran.append("after the block")

    trio.run(main)
    assert ran == ["after the close", "after a sleep", "own task", "after the block"], ran
    with slatedb.Db.open(url) as db:
        assert db.get(b"a") == b"1"


def test_a_reader_block_goes_on_after_the_reader_closes(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url) as db:
        db.put(b"a", b"1", durable=True)
    ran: list[str] = []

    async def main() -> None:
        async with aio.DbReader.open(url) as reader:
            assert await reader.get(b"a") == b"1"
            await reader.close()
            await trio.sleep(0.05)
            ran.append("after the close")
        ran.append("after the block")

    trio.run(main)
    assert ran == ["after the close", "after the block"]
