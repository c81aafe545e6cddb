"""Closing a database while other tasks of the same program are using it.

Found by trying it: under asyncio, a scan needing a block read in one task while another task
closed the database crashed the engine's runtime thread (``TrioInternalError``: the call was
spawned as a system task on a loop already shutting down) and the scanning task waited for good.
Now such a call gets ``ClosedError``."""

from __future__ import annotations

import asyncio

import slatedb
import slatedb.aio as aio

QUIET = {"l0_sst_size_bytes": 1 << 20, "compactor_options": None, "block_cache_size_bytes": 0}


def test_asyncio_a_scan_while_another_task_closes_gets_closed_error(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    with slatedb.Db.open(url, QUIET) as db:  # ~5 MB of rows: far more than one read-ahead
        for i in range(5000):
            db.put(b"k%05d" % i, b"v" * 1000)

    async def main() -> list:
        outcomes = []
        for _ in range(4):
            db = await aio.Db.open(url, QUIET)
            scanning = asyncio.Event()

            async def scanner() -> None:
                n = 0
                try:
                    async for _ in db.scan():
                        n += 1
                        scanning.set()
                        if n % 50 == 0:
                            await asyncio.sleep(0)
                    outcomes.append("done")
                except slatedb.ClosedError:
                    outcomes.append("closed")

            async def closer() -> None:
                await scanning.wait()
                await db.close()

            await asyncio.wait_for(asyncio.gather(scanner(), closer()), 20)  # it waited for good
        return outcomes

    # Either outcome is right (a scan may end before the loop closes); waiting is not.
    assert set(asyncio.run(main())) <= {"done", "closed"}
