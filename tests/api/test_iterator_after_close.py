"""A scan of a database that was closed reads no more blocks: its next step that needs one
raises ``ClosedError`` ("any call after close()", docs/db.md), whatever the front-end and store.

Found by stepping an iterator after ``close()``: under asyncio, and in the sync API on S3, the
step raised ``ClosedError``; in the sync API on a local directory, and under trio, it went on
reading the closed database's SSTs and returned every row.
"""

from __future__ import annotations

import pytest

import slatedb
import slatedb.aio as aio
from slatedb.errors import ClosedError

#: One L0 SST well over a read's ~256 KiB and no block cache: the scan needs more blocks later.
SETTINGS = {"compactor_options": None, "block_cache_size_bytes": 0, "l0_sst_size_bytes": 64 << 20,
            "flush_interval": "1h"}


def _fill(url: str) -> None:
    with slatedb.Db.open(url, SETTINGS) as db:
        for i in range(900):
            db.put(b"k%05d" % i, b"v" * 2000)
        db.flush(wal=False)


def test_a_sync_scan_reads_no_block_after_close(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    _fill(url)
    db = slatedb.Db.open(url, SETTINGS)
    it = db.scan()
    assert next(it)[0] == b"k00000"
    db.close()
    with pytest.raises(ClosedError, match="closed"):
        it.next_batch(800)
    with slatedb.DbReader.open(url) as reader:
        it = reader.scan()
        next(it)
        reader.close()
        with pytest.raises(ClosedError):
            list(it)


@pytest.mark.anyloop
async def test_an_async_scan_reads_no_block_after_close(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    _fill(url)
    db = await aio.Db.open(url, SETTINGS)
    it = db.scan()
    assert (await it.__anext__())[0] == b"k00000"
    await db.close()
    with pytest.raises(ClosedError, match="closed"):
        await it.next_batch(800)
    reader = await aio.DbReader.open(url)
    it = reader.scan()
    await it.__anext__()
    await reader.close()
    with pytest.raises(ClosedError):
        await it.next_batch(800)
