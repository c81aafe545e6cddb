"""``slatedb run-compactor`` (ours) beside an official 0.17 writer, found switching engines on one
database: an official writer that runs its own compactor (its default) is closed as fenced ("detected
newer DB client") once our compactor claims the database, an official defect (upstream slatedb
#1119: its fenced embedded compactor brings the whole database down; ours only stops compacting).
An official writer opened with ``compactor_options`` None goes on writing. docs/compaction.md
tells operators so; this test notices when the official engine changes."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio

from slatedb import admin
from slatedb.objstore import resolve_store

WRITER = """
import os, time
root, own_compactor = sys.argv[1], sys.argv[2] == "yes"

async def main():
    s = u.Settings.default()
    if not own_compactor:
        s.set("compactor_options", "null")
    b = u.DbBuilder("db", store_at(root))
    b.with_settings(s)
    db = await b.build()
    await db.put(b"k", b"v")
    await db.flush()
    open(os.path.join(root, "opened"), "w").close()
    deadline = time.monotonic() + 60  # a liveness bound: the test stops it sooner
    i = 0
    try:
        while not os.path.exists(os.path.join(root, "stop")) and time.monotonic() < deadline:
            await db.put(b"w%06d" % i, b"x")
            i += 1
            await asyncio.sleep(0.02)
        await db.shutdown()
        emit({"fenced": False, "writes": i})
    except Exception as e:
        emit({"fenced": True, "error": str(e), "writes": i})

asyncio.run(main())
"""


@pytest.mark.parametrize("own_compactor", [True, False])
def test_our_standalone_compactor_beside_an_official_writer(official, tmp_path: Path, own_compactor: bool) -> None:
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(
        official.run_json(WRITER, str(tmp_path), "yes" if own_compactor else "no", timeout_s=120)))
    t.start()
    try:
        while not (tmp_path / "opened").exists():
            assert t.is_alive(), result
            t.join(0.05)
        store = resolve_store(f"file://{tmp_path}/db")
        c = trio.run(lambda: admin.run_compactor(store, once=True))
        assert c.epoch >= 1
        trio.run(store.aclose)
        if not own_compactor:
            (tmp_path / "stop").touch()
        t.join(120)  # with its own compactor, the official writer ends by itself: fenced
    finally:
        (tmp_path / "stop").touch()
        t.join(120)
    if own_compactor:
        assert result["fenced"] and "newer DB client" in result["error"], result
    else:
        assert result["fenced"] is False and result["writes"] > 0, result
