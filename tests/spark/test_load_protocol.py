"""The bulk-load protocol without Spark (slatedb/spark/load.py, spec/protocols/bulk-load.md):
begin, stage by task attempts, one commit, clean-up -- against a local-directory database and
a live writer."""

from __future__ import annotations

from pathlib import Path

import pytest
from ulid import ULID

import slatedb
from slatedb.lsm.view import sst_key
from slatedb.errors import FencedError
from slatedb.format.sst import SstOptions
from slatedb.manifest.store import ManifestStore
from slatedb.spark.io import run_io
from slatedb.spark.load import (
    SEQ_HEADROOM,
    CommitResult,
    DuplicateKeyError,
    LoadRefusedError,
    begin_load,
    cleanup_load,
    commit_load,
    intent_prefix,
    stage_sorted,
)

SMALL = SstOptions(block_size_bytes=512)


def url_of(tmp_path: Path) -> str:
    return f"file://{tmp_path}/db"


def latest(url: str):
    return run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest())


def objects(url: str, prefix: str) -> list[str]:
    return sorted(m.key for m in run_io(url, None, lambda s, rt: s.list(prefix)))


def begin(url: str, overwrite: bool = False):
    return run_io(url, None, lambda s, rt: begin_load(s, rt, overwrite=overwrite))


def stage(url: str, plan, partition: int, rows: dict[bytes, bytes | None], attempt: int = 0, sst_size: int = 2048):
    keys = sorted(rows)
    return run_io(url, None, lambda s, rt: stage_sorted(s, rt, plan, partition, attempt, keys, [rows[k] for k in keys],
                                                        sst_options=SMALL, sst_size_bytes=sst_size))


def commit(url: str, plan, results, before_commit=None):
    async def go(s, rt):
        try:
            return await commit_load(s, rt, plan, results, before_commit=before_commit)
        finally:
            await cleanup_load(s, rt, plan.load_id)

    return run_io(url, None, go)


def scan(url: str) -> dict[bytes, bytes]:
    with slatedb.DbReader.open(url, options=slatedb.DbReaderOptions(manifest_poll_interval_s=3600,
                                                                      checkpoint_lifetime_s=7201)) as r:
        return dict(r.scan())


def rows_of(prefix: bytes, n: int, tag: bytes) -> dict[bytes, bytes]:
    return {prefix + b"%05d" % i: tag + b"-%d" % i for i in range(n)}


def test_load_into_a_new_database_then_append_shadows_and_later_writes_shadow(tmp_path) -> None:
    url = url_of(tmp_path)
    plan = begin(url)
    a, b = rows_of(b"a", 300, b"one"), rows_of(b"b", 300, b"one")
    res = [stage(url, plan, 0, a), stage(url, plan, 1, b)]
    assert sum(len(r.ssts) for r in res) > 2  # rolled at the SST size
    out = commit(url, plan, res)
    assert out.rows == 600 and out.seq == plan.seq == SEQ_HEADROOM
    assert scan(url) == {**a, **b}
    # Append over existing rows (some in L0, some only in the WAL, one deleted by the load).
    with slatedb.Db.open(url) as db:
        db.put(b"a00001", b"writer-l0")
        db.flush_memtable()
        db.put(b"a00002", b"writer-wal")
        db.put(b"c", b"writer-only")
        db.flush()
    plan2 = begin(url)
    assert plan2.seq > latest(url).manifest.last_l0_seq + SEQ_HEADROOM - 10
    load2 = {b"a00001": b"loaded", b"a00002": b"loaded", b"a00003": None}
    commit(url, plan2, [stage(url, plan2, 0, load2)])
    got = scan(url)
    assert got[b"a00001"] == got[b"a00002"] == b"loaded" and b"a00003" not in got and got[b"c"] == b"writer-only"
    m = latest(url).manifest
    assert m.last_l0_seq == plan2.seq
    with slatedb.Db.open(url) as db:  # later writes shadow loaded rows
        assert db.get(b"a00001") == b"loaded" and db.get(b"c") == b"writer-only"
        db.put(b"a00001", b"after")
        db.flush_memtable()
    with slatedb.Db.open(url) as db:
        assert db.get(b"a00001") == b"after"
    assert objects(url, intent_prefix(plan.load_id)) == objects(url, intent_prefix(plan2.load_id)) == []


def test_overwrite_replaces_everything_including_wal_rows(tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        for i in range(50):
            db.put(b"old%03d" % i, b"x")
        db.flush_memtable()
        db.put(b"wal-only", b"x")
        db.flush()
    plan = begin(url, overwrite=True)
    new = rows_of(b"new", 40, b"n")
    commit(url, plan, [stage(url, plan, 0, new)])
    assert scan(url) == new
    with slatedb.Db.open(url) as db:
        assert db.get(b"wal-only") is None and db.get(b"new00001") == b"n-1"


def test_a_live_writer_is_fenced_at_commit_and_keeps_what_it_acknowledged(tmp_path) -> None:
    """LOAD-4: writes acknowledged before the commit are older than the load; the fenced
    writer acknowledges nothing after it."""
    url = url_of(tmp_path)
    db = slatedb.Db.open(url, settings={"flush_interval": "10ms"})
    try:
        db.put(b"k1", b"before", durable=True)
        plan = begin(url)
        db.put(b"k2", b"during", durable=True)  # a writer keeps writing while the job runs
        res = [stage(url, plan, 0, {b"k1": b"loaded", b"k2": b"loaded", b"k3": b"loaded"})]
        commit(url, plan, res)
        with pytest.raises(FencedError):
            for _ in range(100):
                db.put(b"k4", b"after-fence", durable=True)
    finally:
        try:
            db.close()
        except FencedError:
            pass
    got = scan(url)
    # The load is later than every write acknowledged before its commit.
    assert got[b"k1"] == got[b"k2"] == got[b"k3"] == b"loaded" and b"k4" not in got


def test_all_or_nothing_a_refused_commit_shows_no_row(tmp_path) -> None:
    """LOAD-1: a writer that opens between the fence and the commit makes the commit fail;
    no loaded row is visible, the staged SSTs are deleted, the writer's data is whole."""
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"base", b"1")
    before = objects(url, "compacted/")
    plan = begin(url)
    res = [stage(url, plan, 0, rows_of(b"x", 200, b"l")), stage(url, plan, 1, rows_of(b"y", 200, b"l"))]

    async def writer_opens():
        import trio

        await trio.to_thread.run_sync(lambda: slatedb.Db.open(url).close())

    with pytest.raises(LoadRefusedError, match="opened after the load's fence"):
        commit(url, plan, res, before_commit=writer_opens)
    assert scan(url) == {b"base": b"1"}
    assert objects(url, "compacted/") == before
    assert objects(url, intent_prefix(plan.load_id)) == []


def test_killed_before_commit_leaves_the_manifest_and_abort_deletes_the_staged_ssts(tmp_path) -> None:
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"base", b"1")
        db.flush_memtable()
    m_before = latest(url)
    plan = begin(url)
    res = stage(url, plan, 0, rows_of(b"x", 300, b"l"))
    # The driver dies here: the manifest is exactly as it was, nothing staged is referenced.
    m_after = latest(url)
    assert m_after == m_before
    staged = {ULID.from_str(s.sst_id) for s in res.ssts}
    assert staged and not staged & {s.id for s in m_after.manifest.ssts}
    assert {sst_key(u) for u in staged} <= set(objects(url, "compacted/"))
    assert scan(url) == {b"base": b"1"}
    # abort() (or a later clean-up of the load id) deletes them.
    assert run_io(url, None, lambda s, rt: cleanup_load(s, rt, plan.load_id)) == len(staged)
    assert not {sst_key(u) for u in staged} & set(objects(url, "compacted/"))


def test_retried_and_speculative_attempts_never_duplicate_rows(tmp_path) -> None:
    """LOAD-6: only the committed attempt's SSTs are referenced; the other attempt's are deleted."""
    url = url_of(tmp_path)
    plan = begin(url)
    rows = rows_of(b"r", 100, b"v")
    first = stage(url, plan, 0, rows, attempt=0)   # finished, but lost (e.g. its executor died)
    second = stage(url, plan, 0, rows, attempt=1)  # the attempt Spark commits
    assert {s.sst_id for s in first.ssts}.isdisjoint({s.sst_id for s in second.ssts})  # attempt-unique ULIDs
    commit(url, plan, [second])
    m = latest(url).manifest
    assert {ULID.from_str(s.sst_id) for s in second.ssts} <= {s.id for s in m.ssts}
    left = set(objects(url, "compacted/"))
    assert not {sst_key(ULID.from_str(s.sst_id)) for s in first.ssts} & left  # the lost attempt's SSTs deleted
    assert scan(url) == rows
    with pytest.raises(LoadRefusedError, match="two results for one partition"):
        commit(url, begin(url), [first, second])


def test_duplicate_keys_are_refused_within_and_across_tasks(tmp_path) -> None:
    """LOAD-2."""
    url = url_of(tmp_path)
    plan = begin(url)
    with pytest.raises(DuplicateKeyError, match="b'k'"):
        run_io(url, None, lambda s, rt: stage_sorted(s, rt, plan, 0, 0, [b"k", b"k"], [b"1", b"2"],
                                                     sst_options=SMALL, sst_size_bytes=1 << 20))
    a = stage(url, plan, 0, {b"a": b"1", b"m": b"1", b"z": b"1"})
    b = stage(url, plan, 1, {b"b": b"2", b"m": b"2"})
    with pytest.raises(DuplicateKeyError, match="b'm'.*partitions 0 and 1"):
        commit(url, plan, [a, b])
    assert objects(url, "compacted/") == []
    # Overlapping ranges without a shared key are fine.
    plan = begin(url)
    commit(url, plan, [stage(url, plan, 0, {b"a": b"1", b"z": b"1"}), stage(url, plan, 1, {b"m": b"2"})])
    assert scan(url) == {b"a": b"1", b"m": b"2", b"z": b"1"}


def test_two_loads_planned_together_cannot_both_commit(tmp_path) -> None:
    """LOAD-5: the second would carry the same seq as the first."""
    url = url_of(tmp_path)
    p1, p2 = begin(url), begin(url)
    assert p1.seq == p2.seq
    commit(url, p1, [stage(url, p1, 0, {b"k": b"first"})])
    with pytest.raises(LoadRefusedError, match="reached the load's"):
        commit(url, p2, [stage(url, p2, 0, {b"k": b"second"})])
    assert scan(url) == {b"k": b"first"}


def test_a_staged_sst_gone_before_commit_refuses_the_load(tmp_path) -> None:
    """LOAD-3: GC (or anyone) removed a staged SST: commit nothing rather than a dangling reference."""
    url = url_of(tmp_path)
    plan = begin(url)
    res = stage(url, plan, 0, rows_of(b"g", 100, b"v"))
    run_io(url, None, lambda s, rt: s.delete(sst_key(ULID.from_str(res.ssts[0].sst_id))))
    before = latest(url)
    with pytest.raises(LoadRefusedError, match="is gone"):
        commit(url, plan, [res])
    assert latest(url) == before


def test_an_empty_append_writes_nothing(tmp_path) -> None:
    """... and its ``load_commit`` event says so: no manifest, 0 SSTs, 0 rows (`sim mutate` seed
    20: the event made to report one SST survived)."""
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v")
    before = latest(url)
    plan = begin(url)
    res = stage(url, plan, 0, {})
    events: list = []

    async def go(s, rt):
        rt.event = lambda kind, **fields: events.append((kind, fields))
        try:
            return await commit_load(s, rt, plan, [res])
        finally:
            await cleanup_load(s, rt, plan.load_id)

    out = run_io(url, None, go)
    assert out.manifest_id is None and latest(url) == before
    assert [f for k, f in events if k == "load_commit"] == [
        {"load_id": plan.load_id, "manifest_id": None, "ssts": 0, "rows": 0}], events


def test_an_empty_append_into_a_new_url_that_a_writer_created_meanwhile_writes_nothing(tmp_path) -> None:
    """LOAD-11: an empty load begun where no database was finds one at its commit (a writer
    opened it meanwhile: its first manifest is not the load's to write): like any empty append
    into a database it commits nothing, and its result and ``load_commit`` event say 0 SSTs, 0 rows."""
    url = url_of(tmp_path)
    plan = begin(url)
    assert not plan.base_manifest_id
    res = stage(url, plan, 0, {})
    with slatedb.Db.open(url) as db:
        db.put(b"k", b"v")
    before = latest(url)
    events: list = []

    async def go(s, rt):
        rt.event = lambda kind, **fields: events.append((kind, fields))
        try:
            return await commit_load(s, rt, plan, [res])
        finally:
            await cleanup_load(s, rt, plan.load_id)

    out = run_io(url, None, go)
    assert out == CommitResult(None, None, 0, 0, plan.seq)
    assert latest(url) == before
    assert [f for k, f in events if k == "load_commit"] == [
        {"load_id": plan.load_id, "manifest_id": None, "ssts": 0, "rows": 0}], events


def test_a_commit_failing_before_its_update_is_sent_deletes_the_ssts_it_wrote(tmp_path) -> None:
    """DUR-1's other side: an error before the commit sent its manifest update (here the
    driver's ``before_commit`` raising) means the update did not land, so the SSTs the commit
    wrote itself (the WAL-tail SST) are deleted at once; only once it was sent are they left to
    GC (test_load_cleanup.py, ``test_a_commit_whose_update_landed_but_reported_failure_keeps_its_ssts``).
    `sim mutate` seed 20: the commit made to count as sent from its start, which left the tail
    SST behind, survived."""
    import trio

    url = url_of(tmp_path)
    writer = slatedb.Db.open(url, settings={"flush_interval": "1h", "compactor_options": None})
    try:
        writer.put(b"l0", b"1")
        writer.flush_memtable()
        writer.put(b"wal-only", b"2")
        writer.flush()  # durable in the WAL, not in L0: the commit writes it to its WAL-tail SST
        before = objects(url, "compacted/")
        plan = begin(url)
        res = [stage(url, plan, 0, {b"loaded": b"3"})]
        staged = {sst_key(ULID.from_str(s.sst_id)) for r in res for s in r.ssts}
        seen: list[str] = []

        async def driver_fails():
            seen.extend(await trio.to_thread.run_sync(lambda: objects(url, "compacted/")))
            raise RuntimeError("the driver failed")

        with pytest.raises(RuntimeError, match="the driver failed"):
            commit(url, plan, res, before_commit=driver_fails)
        after = objects(url, "compacted/")  # (before the fenced writer's close adds its own)
    finally:
        try:
            writer.close()
        except slatedb.SlateDBError:
            pass  # fenced by the load's epoch bump
    assert len(set(seen) - set(before) - staged) == 1  # the WAL-tail SST, written before the failure
    assert after == before  # ... and deleted again (the staged ones by the clean-up)
    assert scan(url) == {b"l0": b"1", b"wal-only": b"2"}


@pytest.mark.parametrize("last_seq, refused", [(2**63 - SEQ_HEADROOM - 1, False), (2**63 - SEQ_HEADROOM, True)])
def test_a_load_whose_seq_would_reach_2_63_is_refused_at_its_begin(tmp_path, last_seq: int, refused: bool) -> None:
    """Step 1: the load's seq (``last_seq + SEQ_HEADROOM``) must stay below 2**63: at 2**63 the
    begin is refused (``InvalidDbStateError``) and no load is open; just below, it begins
    (`sim mutate` seed 20: the bound made 3**63 survived)."""
    from slatedb.errors import InvalidDbStateError
    from slatedb.format.types import ManifestV2

    url = url_of(tmp_path)
    run_io(url, None, lambda s, rt: ManifestStore(s, rt).create_initial(
        ManifestV2(initialized=True, last_l0_seq=last_seq)))
    if not refused:
        assert begin(url).seq == 2**63 - 1
        return
    with pytest.raises(InvalidDbStateError, match="sequence numbers are exhausted"):
        begin(url)
    assert objects(url, "") == objects(url, "manifest/")  # no load marker


def test_wal_rows_below_the_fence_go_to_l0_in_the_same_commit(tmp_path) -> None:
    """LOAD-7: after an append, every seq up to last_l0_seq is in L0 (the official engine's
    replay skips WAL rows at or below it), so the WAL range of the new manifest is empty."""
    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"l0", b"1")
        db.flush_memtable()
        db.put(b"wal-only", b"2")
        db.delete(b"l0")
        db.flush()
    plan = begin(url)
    commit(url, plan, [stage(url, plan, 0, {b"loaded": b"3"})])
    m = latest(url).manifest
    assert m.replay_after_wal_id == m.wal_id_last_seen and m.last_l0_seq == plan.seq
    assert len(m.l0) == 3  # the load's SST, the WAL tail's, the writer's
    assert scan(url) == {b"wal-only": b"2", b"loaded": b"3"}


def test_the_load_seq_is_above_every_seq_in_the_wal_the_last_object_included(tmp_path) -> None:
    """Step 1: ``seq = max(last_l0_seq, highest seq in the WAL above the replay point) +
    SEQ_HEADROOM``, the newest WAL object read too (`sim mutate` seed 15: reading up to the one
    before it survived: the headroom hid it, and LOAD-5 refuses at the commit what the begin
    misjudged)."""
    url = url_of(tmp_path)
    db = slatedb.Db.open(url, settings={"flush_interval": "1h", "compactor_options": None})
    db.put(b"a", b"1")
    db.flush_memtable()
    for i in range(3):  # three WAL objects above the replay point, the highest seq in the last
        db.put(b"w%d" % i, b"x")
        db.flush()
    last = db.put(b"newest", b"z", durable=True).seq
    db.abort()  # a crash: the rows stay in the WAL
    assert latest(url).manifest.last_l0_seq < last
    assert begin(url).seq == last + SEQ_HEADROOM


def test_a_staged_sst_older_than_the_newest_l0_is_re_minted_and_orphans_are_collected_by_gc(tmp_path) -> None:
    """LOAD-3's second half, and LOAD-6's fallback: a writer flushed an L0 after the task
    staged its SST, so GC's ULID cutoff no longer protects it: the commit copies it under an id
    minted after the fence. An abandoned load's SSTs fall to GC (min_age 0 here) once a newer
    L0 and compaction exist. The URL is new: the writer opens (makes the database) while the
    loads have staged SSTs but written no manifest (LOAD-11), and the load commits into it."""
    from slatedb.config import Settings
    from slatedb.gc import run_gc

    url = url_of(tmp_path)
    plan = begin(url)
    res = stage(url, plan, 0, rows_of(b"r", 50, b"v"))
    lost = begin(url)
    abandoned = stage(url, lost, 0, rows_of(b"q", 50, b"v"))  # its driver dies: never committed
    settings = {"compactor_options": {"poll_interval": "20ms", "scheduler_options": {
        "min_compaction_sources": "2", "max_compaction_sources": "8"}}}
    with slatedb.Db.open(url, settings=settings) as db:
        for i in range(3):
            db.put(b"w%d" % i, b"x")
            db.flush_memtable()
        import time

        for _ in range(200):
            if latest(url).manifest.compacted:
                break
            time.sleep(0.05)
    assert latest(url).manifest.compacted, "the compactor did not run"
    commit(url, plan, [res])
    m = latest(url).manifest
    staged_ids = {ULID.from_str(s.sst_id) for s in res.ssts}
    assert staged_ids.isdisjoint({v.sst_id for v in m.l0})  # copied under new ids
    assert scan(url) == {**rows_of(b"r", 50, b"v"), b"w0": b"x", b"w1": b"x", b"w2": b"x"}
    orphan = {sst_key(ULID.from_str(s.sst_id)) for s in abandoned.ssts}
    assert orphan <= set(objects(url, "compacted/"))
    gc = Settings.from_dict({"garbage_collector_options": {"compacted_options": {"min_age": "0s"}}})
    run_io(url, None, lambda s, rt: run_gc(s, rt, gc.garbage_collector_options, once=True))
    assert not orphan & set(objects(url, "compacted/"))
    assert scan(url)[b"r00001"] == b"v-1"


KILLED_DRIVER = r"""
import sys, time
import pyarrow as pa
from pyspark.sql.types import BinaryType, StructField, StructType
from slatedb.spark.source import SlateDbDataSource

url = sys.argv[1]
schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])
writer = SlateDbDataSource({"url": url, "sst_size_bytes": "2048"}).writer(schema, False)  # the driver plans
keys = [b"x%05d" % i for i in range(300)]
batch = pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array([b"l"] * 300, pa.binary())],
                                   names=["key", "value"])
msg = writer.write(iter([batch]))  # a task stages its SSTs
print(" ".join(s.sst_id for s in msg.result.ssts), flush=True)
time.sleep(600)  # the commit never comes: SIGKILL
writer.commit([msg])
"""


def test_a_driver_killed_between_the_sst_writes_and_the_commit(tmp_path) -> None:
    """A driver process (the data source's own writer(), write() and commit() outside Spark)
    is killed with SIGKILL after its task staged SSTs: the manifest is unchanged, nothing
    references the SSTs, and GC collects them once they are older than min_age (and below its
    ULID cutoff: a newer L0 and a compaction exist), never before."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import trio

    from slatedb.config import Settings
    from slatedb.gc import run_gc
    from slatedb.runtime.production import ProductionRuntime
    from slatedb.objstore import resolve_store

    url = url_of(tmp_path)
    with slatedb.Db.open(url) as db:
        db.put(b"base", b"1")
        db.flush_memtable()
    before = latest(url)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, url], stdout=subprocess.PIPE, env=env, text=True)
    try:
        staged = proc.stdout.readline().split()
        assert staged, "the driver staged nothing"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert latest(url) == before  # unchanged: no fence, no commit
    keys = {sst_key(ULID.from_str(s)) for s in staged}
    assert keys <= set(objects(url, "compacted/"))
    assert scan(url) == {b"base": b"1"}
    settings = {"compactor_options": {"poll_interval": "20ms", "scheduler_options": {
        "min_compaction_sources": "2", "max_compaction_sources": "8"}}}
    with slatedb.Db.open(url, settings=settings) as db:  # life goes on: newer L0s and a compaction
        for i in range(3):
            db.put(b"w%d" % i, b"x")
            db.flush_memtable()
        for _ in range(200):
            if latest(url).manifest.compacted:
                break
            time.sleep(0.05)
    assert latest(url).manifest.compacted, "the compactor did not run"

    class Later(ProductionRuntime):
        def now_ms(self) -> int:
            return super().now_ms() + 3_600_000

    gc = Settings.from_dict({"garbage_collector_options": {"compacted_options": {"min_age": "300s"}}})

    def collect(runtime) -> None:
        store = resolve_store(url)
        trio.run(run_gc, store, runtime, gc.garbage_collector_options, True)

    collect(ProductionRuntime("gc"))
    assert keys <= set(objects(url, "compacted/"))  # younger than min_age: kept
    collect(Later("gc"))
    assert not keys & set(objects(url, "compacted/"))  # an hour later: collected
    assert scan(url) == {b"base": b"1", b"w0": b"x", b"w1": b"x", b"w2": b"x"}
