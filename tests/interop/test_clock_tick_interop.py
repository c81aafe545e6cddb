"""The official writer takes over a database our writer crashed with rows in the WAL written
while an L0 flush was in flight (tests/db/test_l0_clock_tick.py): it must replay them, flush and
close cleanly, and a second official open must read every acknowledged row. Before the fix our
flush recorded the commit's time as ``last_l0_clock_tick``, above those rows' times: the
official's L0 flush of the replayed rows failed with ``InvalidClockTick``, its shutdown raised
``Closed error: db is closed``, and its next open lost the rows (found with SIGKILLed writers)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.checker.known import ORPHAN_WRITER_CHECKPOINT

OURS = textwrap.dedent("""
    import sys, threading, slatedb
    from slatedb.runtime.production import ProductionRuntime

    class Runtime(ProductionRuntime):  # the wall clock the test moves: a slow upload, made so
        offset_ms = 0
        def now_ms(self):
            return super().now_ms() + self.offset_ms

    root = sys.argv[1]
    rt = Runtime("tick")
    db = slatedb.Db.open("file://" + root + "/db", settings={"compactor_options": None, "flush_interval": "1h",
                         "l0_sst_size_bytes": 1 << 20}, runtime=rt)
    core = db._core
    real_put = core.store.put
    uploading, released = threading.Event(), threading.Event()

    async def slow_sst_put(key, data, *args, **kwargs):
        if key.startswith("compacted/"):
            uploading.set()
            released.wait(10)
            rt.offset_ms += 2000  # the upload took two seconds: the commit's now is later still
        return await real_put(key, data, *args, **kwargs)

    core.store.put = slow_sst_put
    for i in range(50):
        db.put(b"a%03d" % i, b"x" * 40)
    flusher = threading.Thread(target=lambda: db.flush(wal=False))
    flusher.start()
    assert uploading.wait(10)
    for i in range(50):
        db.put(b"b%03d" % i, b"y" * 40)  # written while the flush is in flight
    released.set()
    flusher.join(10)
    db.flush()  # the b rows are durable, only in the WAL above the replay point
    db.abort()  # a crash
""")

OFFICIAL_OPEN = """
async def main(root):
    db = await open_db(root)
    values = [await db.get(b"%s%03d" % (p, i)) for p in (b"a", b"b") for i in range(50)]
    await db.flush()
    await db.shutdown()
    emit(sum(v is not None for v in values))
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_the_official_writer_takes_over_a_crash_with_rows_written_during_an_l0_flush(official, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", OURS, str(tmp_path)], check=True, timeout=120)
    assert official.run_json(OFFICIAL_OPEN, str(tmp_path)) == 100  # before: the shutdown raised
    assert official.run_json(OFFICIAL_OPEN, str(tmp_path)) == 100  # before: the b rows were gone


BEHIND = textwrap.dedent("""
    import sys, slatedb
    from slatedb.runtime.production import ProductionRuntime

    class Behind(ProductionRuntime):  # a host whose clock is two minutes behind
        def now_ms(self):
            return super().now_ms() - 120_000

    root = sys.argv[1]
    settings = {"compactor_options": None, "flush_interval": "1h", "l0_sst_size_bytes": 1 << 20}
    with slatedb.Db.open("file://" + root + "/db", settings=settings) as db:  # the real clock
        for i in range(50):
            db.put(b"a%03d" % i, b"x" * 40)
        db.flush(wal=False)  # last_l0_clock_tick: now
    db = slatedb.Db.open("file://" + root + "/db", settings=settings, runtime=Behind("behind"))
    for i in range(50):
        db.put(b"b%03d" % i, b"y" * 40)
    db.flush()  # durable, only in the WAL above the replay point
    db.abort()  # a crash
""")


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_the_official_writer_takes_over_a_crash_of_our_writer_whose_clock_was_behind(official, tmp_path: Path) -> None:
    """DUR-5: our writer on a host whose clock is behind the database's stamps its rows at the
    database's newest create time (upstream's MonotonicClock would refuse the writes), so the
    official writer replaying them accepts their tick. Before, they carried the host's clock,
    two minutes before the manifest's tick, and the official's open failed on them."""
    subprocess.run([sys.executable, "-c", BEHIND, str(tmp_path)], check=True, timeout=120)
    assert official.run_json(OFFICIAL_OPEN, str(tmp_path)) == 100
    assert official.run_json(OFFICIAL_OPEN, str(tmp_path)) == 100
