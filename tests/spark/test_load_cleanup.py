"""Failed and aborted bulk loads leave nothing behind (issue 25 item 4; LOAD-10, LOAD-11 of
spec/protocols/bulk-load.md; docs/spark.md "Failure behaviour").

The objects each failure added under the database root are counted (a failed load must leave
the file set exactly as it found it; a load into a new URL, nothing). Each protocol-level
failure runs 10 times (at 10 different points of the interleaving); the real Spark jobs once
each (a failing job costs 10-30 s on two busy cores):

* an attempt still staging when its load is aborted (Spark cancels the other tasks of a failed
  job but calls ``abort()`` before their Python workers stop), at every point of its writes:
  protocol level, plain and sharded;
* a duplicate key, a task failure and a sharded duplicate key in a real Spark job, with the
  other partition's attempt held until ``abort()`` has run (the race a failed job has);
* a load into a new URL that fails: no database and no object at the URL;
* a driver killed (SIGKILL) while its task stages: ``collect_loads`` -- and the next load's
  begin, once the plan is ``abandoned_after_s`` old -- removes everything it left;
* the commit and a collector of abandoned loads never both win.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import slatedb
from slatedb.errors import TransientObjectStoreError
from slatedb.format.sst import SstOptions
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from slatedb.spark.io import run_io
from slatedb.spark.load import (
    MARKER_ABANDONED,
    LoadEndedError,
    LoadRefusedError,
    _claim,
    begin_load,
    claim_for_commit,
    cleanup_load,
    collect_loads,
    commit_load,
    end_load,
    marker_key,
    stage_sorted,
)
from slatedb.spark.sharded import abort_sharded, begin_sharded, stage_shard

pytestmark = pytest.mark.xdist_group("spark")

SMALL = SstOptions(block_size_bytes=512)
TRIES = 10


def files(root: Path) -> set[str]:
    """Every object under ``root`` (the local store's lock files are not objects)."""
    if not root.exists():
        return set()
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not any(part.startswith(".slatedb-") for part in p.parts)}


def make_db(root: Path) -> str:
    url = f"file://{root}"
    with slatedb.Db.open(url) as db:
        db.put(b"base", b"1")
        db.flush_memtable()
    return url


def rows_of(n: int, tag: bytes = b"v") -> tuple[list[bytes], list[bytes]]:
    keys = [b"k%05d" % i for i in range(n)]
    return keys, [tag + b"-" + k + b"." * 40 for k in keys]


class AbortMidStage:
    """A store that runs ``abort`` just before or just after the ``nth`` put of a staged object
    (intent or SST), or just after a manifest's put (``on_manifest``: a shard's last write): the
    load ends while an attempt is between two of its writes."""

    def __init__(self, inner, nth: int, after: bool, abort, on_manifest: bool = False) -> None:
        self.inner, self.nth, self.after, self.abort, self.puts = inner, nth, after, abort, 0
        self.on_manifest = on_manifest
        self.url = inner.url

    async def put(self, key, data, mode=None):
        staged = key.startswith("compacted/") or (key.startswith("bulk-load/") and not key.endswith("/open"))
        if self.on_manifest:
            fire, self.after = key.startswith("manifest/"), True
        else:
            fire = staged and self.puts == self.nth
        self.puts += staged
        if fire and not self.after:
            await self.abort(self.inner)
        out = await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))
        if fire and self.after:
            await self.abort(self.inner)
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def get(self, *a, **k):
        return await self.inner.get(*a, **k)

    async def head(self, key):
        return await self.inner.head(key)

    async def list(self, prefix=""):
        return await self.inner.list(prefix)

    async def delete(self, key):
        return await self.inner.delete(key)

    async def copy(self, src, dst):
        return await self.inner.copy(src, dst)

    def open_url(self, url):  # a shard: its writes count too
        return AbortMidStage(self.inner.open_url(url), self.nth, self.after, self.abort, self.on_manifest)

    async def aclose(self):
        pass


def test_an_attempt_still_staging_when_the_load_is_aborted_leaves_nothing(tmp_path) -> None:
    """LOAD-10, plain loads: the abort lands before or after each of an attempt's writes (its
    intents and SSTs, 6 SSTs); the attempt finds the load ended and deletes what it wrote.
    Half the tries load into an existing database, half into a new URL (LOAD-11: nothing
    there afterwards). Today's code: the attempt's SSTs and intents stay, and the new URL
    holds an empty database."""
    keys, values = rows_of(120)
    left: dict[int, list[str]] = {}
    ended: list[int] = []
    for t in range(TRIES):
        root = tmp_path / f"db{t}"
        url = make_db(root) if t % 2 == 0 else f"file://{root}"
        before = files(root)
        nth, after = t % 6 if t < 6 else (t * 5) % 12, t % 3 == 1

        async def go(store, rt):
            plan = await begin_load(store, rt, overwrite=False)
            done = await stage_sorted(store, rt, plan, 0, 0, keys[:40], values[:40], sst_options=SMALL,
                                      sst_size_bytes=512)  # a finished attempt

            async def abort(inner):
                await cleanup_load(inner, rt, plan.load_id)

            late = AbortMidStage(store, nth, after, abort)
            try:
                await stage_sorted(late, rt, plan, 1, 0, keys[40:], values[40:], sst_options=SMALL,
                                   sst_size_bytes=512)
            except LoadEndedError:
                ended.append(t)
            with pytest.raises(LoadRefusedError, match="ended before its commit"):
                await commit_load(store, rt, plan, [done])  # an aborted load never commits

        run_io(url, None, go)
        left[t] = sorted(files(root) - before)
    assert {t: v for t, v in left.items() if v} == {}, f"leftovers in {sum(bool(v) for v in left.values())} of {TRIES}"
    assert ended == list(range(TRIES))  # every late attempt found its load ended


def test_a_shard_still_being_written_when_the_sharded_load_is_aborted_leaves_nothing(tmp_path) -> None:
    """LOAD-10, the union route: the abort lands between two writes of a shard (or after its
    manifest); the attempt deletes its shard. Nothing is left at the URL."""
    keys, values = rows_of(120)
    left: dict[int, list[str]] = {}
    ended: list[int] = []
    for t in range(TRIES):
        root = tmp_path / f"db{t}"
        url = f"file://{root}"

        async def go(store, rt):
            plan = await begin_sharded(store, rt)

            async def abort(_shard):
                await abort_sharded(store, rt, plan)

            # before or after a write of the shard; odd tries: after its last write, the manifest
            late = AbortMidStage(store, t // 2, t % 4 == 0, abort, on_manifest=bool(t % 2))
            try:
                await stage_shard(late, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
            except LoadEndedError:
                ended.append(t)

        run_io(url, None, go)
        left[t] = sorted(files(root))
    assert {t: v for t, v in left.items() if v} == {}, f"leftovers in {sum(bool(v) for v in left.values())} of {TRIES}"
    assert ended == list(range(TRIES))  # every late attempt found its load ended


class StagesDuringList:
    """A store whose ``list`` of ``prefix`` runs ``during`` (once) just after the listing: an
    attempt that stages after the clean-up listed the load's files (and, were the marker
    deleted after the listing, before the load ended)."""

    def __init__(self, inner, prefix: str, during) -> None:
        self.inner, self.prefix, self.during = inner, prefix, during
        self.url = inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def list(self, prefix=""):
        listed = await self.inner.list(prefix)
        if prefix == self.prefix and self.during is not None:
            during, self.during = self.during, None
            await during()  # after the listing: what it writes is not in ``listed``
        return listed


def test_the_clean_up_ends_the_load_before_it_lists_its_files(tmp_path) -> None:
    """LOAD-10's order: an attempt that stages all its SSTs just after the clean-up listed the
    load's files finds the load ended and deletes them (plain: the intents' listing; sharded:
    the shards'). Were the marker deleted after the listing, its files would stay. 10 tries."""
    keys, values = rows_of(60)
    left: dict[int, list[str]] = {}
    outcomes: list[str] = []
    for t in range(TRIES):
        root = tmp_path / f"db{t}"
        sharded = t % 2 == 1
        url = make_db(root) if t % 4 == 0 else f"file://{root}"  # sharded loads: new URLs only
        before = files(root)

        async def go(store, rt):
            plan = await (begin_sharded(store, rt) if sharded else begin_load(store, rt, overwrite=False))
            outcome = outcomes

            async def late_attempt():
                stage = stage_shard if sharded else stage_sorted
                try:
                    await stage(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=512)
                    outcome.append("staged")
                except LoadEndedError:
                    outcome.append("ended")

            if sharded:
                await abort_sharded(StagesDuringList(store, f"shards/{plan.load_id}/", late_attempt), rt, plan)
            else:
                await cleanup_load(StagesDuringList(store, f"bulk-load/{plan.load_id}/", late_attempt), rt,
                                   plan.load_id)

        run_io(url, None, go)
        left[t] = sorted(files(root) - before)
    assert {t: v for t, v in left.items() if v} == {}, f"leftovers in {sum(bool(v) for v in left.values())} of {TRIES}"
    assert outcomes == ["ended"] * TRIES  # each late attempt found its load ended


KILLED_DRIVER = r"""
import sys
import trio
from slatedb.format.sst import SstOptions
from slatedb.spark.io import run_io
from slatedb.spark.load import begin_load, stage_sorted

url, sharded, stop_after = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3])
keys = [b"x%05d" % i for i in range(2000)]
values = [b"l" * 40] * len(keys)

class Announcing:
    # the store of the task: prints each staged SST so the parent knows when to kill
    def __init__(self, inner): self.inner, self.n = inner, 0
    def __getattr__(self, name): return getattr(self.inner, name)
    async def put(self, key, data, mode):
        out = await self.inner.put(key, data, mode)
        if key.startswith("compacted/"):
            self.n += 1
            print(self.n, flush=True)
            if self.n >= stop_after:
                await trio.sleep(600)  # SIGKILL comes now
        return out

async def go(store, rt):
    if sharded:
        from slatedb.spark.sharded import begin_sharded, stage_shard
        plan = await begin_sharded(store, rt)
        class ShardStore(Announcing):
            def open_url(self, u): return Announcing(self.inner.open_url(u))
        await stage_shard(ShardStore(store), rt, plan, 0, 0, keys, values, sst_options=SstOptions(block_size_bytes=512),
                          sst_size_bytes=1024)
    else:
        plan = await begin_load(store, rt, overwrite=False)
        await stage_sorted(Announcing(store), rt, plan, 0, 0, keys, values, sst_options=SstOptions(block_size_bytes=512),
                           sst_size_bytes=1024)
    await trio.sleep(600)

run_io(url, None, go)
"""


class DayLater(ProductionRuntime):
    def now_ms(self) -> int:
        return super().now_ms() + 86_400_000 + 60_000


def test_a_driver_killed_while_its_task_stages_leaves_nothing_after_collect_loads(tmp_path) -> None:
    """A driver process (begin and a task staging in one process) is killed with SIGKILL after
    its 1st..5th SST, 10 times: into an existing database, a new URL, and the union route. The
    load's files stay while its plan is younger than ``abandoned_after_s`` (a live load is never
    touched: the next load's begin keeps them); a day later the next load's begin removes them,
    and ``slatedb.spark.collect_loads(url, abandoned_after_s=0)`` at once. Afterwards the file
    set is exactly as before the load (a new URL: empty). Today's code leaves the SSTs and their
    intents for ever in a new URL (no GC there), and the intents everywhere."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    left: dict[int, list[str]] = {}
    kinds = ["existing", "new", "sharded"]
    for t in range(TRIES):
        kind = kinds[t % 3]
        root = tmp_path / f"db{t}"
        url = make_db(root) if kind == "existing" else f"file://{root}"
        before = files(root)
        proc = subprocess.Popen([sys.executable, "-c", KILLED_DRIVER, url, "1" if kind == "sharded" else "0",
                                 str(1 + t % 5)], stdout=subprocess.PIPE, env=env, text=True)
        try:
            for _ in range(1 + t % 5):
                assert proc.stdout.readline().strip(), "the driver staged nothing"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
        assert files(root) - before, "the killed driver left nothing to collect"
        if t < 3:  # the next load's begin: keeps a plan younger than a day, removes a day-old one
            def next_begin(runtime):
                return run_io(url, None, lambda s, rt: begin_sharded(s, runtime) if kind == "sharded"
                              else begin_load(s, runtime, overwrite=False))

            next_begin(ProductionRuntime("next"))
            assert any(k.startswith(("compacted/", "shards/")) for k in files(root) - before)
            plans = {next_begin(DayLater("day-later")).load_id for _ in range(1)}
            extra = files(root) - before  # what is left: the two next loads' open markers
            assert {k for k in extra if k.endswith("/open")} >= {f"bulk-load/{p}/open" for p in plans}
            extra = {k for k in extra if not k.endswith("/open")}
        else:
            assert slatedb.spark.collect_loads(url, abandoned_after_s=0)
            extra = files(root) - before
        left[t] = sorted(extra)
    assert {t: v for t, v in left.items() if v} == {}, f"leftovers in {sum(bool(v) for v in left.values())} of {TRIES}"


def test_the_commit_and_a_collector_of_abandoned_loads_never_both_win(tmp_path) -> None:
    """LOAD-10: a collector that claims an old plan first makes its commit refused (nothing
    visible, nothing left); a commit that claims first keeps its files from the collector."""
    url = make_db(tmp_path / "db")
    keys, values = rows_of(50)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        assert await collect_loads(store, rt) == []  # young: a live load
        assert await collect_loads(store, DayLater("later")) == [plan.load_id]
        with pytest.raises(LoadRefusedError, match="ended before its commit"):
            await commit_load(store, rt, plan, [res])
        plan2 = await begin_load(store, rt, overwrite=False)
        res2 = await stage_sorted(store, rt, plan2, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)

        async def collector_runs():  # a collector while the commit runs: the commit claimed the plan
            assert await collect_loads(store, rt) == []

        await commit_load(store, rt, plan2, [res2], before_commit=collector_runs)
        await cleanup_load(store, rt, plan2.load_id)
        latest = await ManifestStore(store, rt).read_latest()
        return latest

    latest = run_io(url, None, go)
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1", **dict(zip(keys, values))}
    assert {k for k in files(tmp_path / "db") if k.startswith("compacted/")} == {
        f"compacted/{s.id}.sst" for s in latest.manifest.ssts}
    assert not any(k.startswith("bulk-load/") for k in files(tmp_path / "db"))


class EndAtClaim(AbortMidStage):
    """A store that ends the load (``end_load``: the first step of a driver's clean-up, which
    deletes the open marker) just before the commit's claim of the marker: the marker is gone
    between the commit's HEAD of it and its conditional PUT, the staged files still there."""

    def __init__(self, inner, rt, load_id: str) -> None:
        super().__init__(inner, -1, False, None)
        self.rt, self.load_id = rt, load_id

    async def put(self, key, data, mode=None):
        if key == marker_key(self.load_id) and mode is not None:
            await end_load(self.inner, self.rt, self.load_id)
        return await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))


def test_a_commit_whose_marker_is_gone_at_its_claim_is_refused(tmp_path) -> None:
    """LOAD-10: a clean-up that ends the load between the commit's HEAD of the open marker and
    its claim makes the claim fail and its re-read find no marker: the commit is refused and
    commits nothing. (Taking the missing marker for a won claim would commit SSTs that the
    clean-up, which read the manifest before the commit, goes on to delete.) The clean-up's
    rest then leaves nothing."""
    url = make_db(tmp_path / "db")
    keys, values = rows_of(50)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        before = (await ManifestStore(store, rt).read_latest()).id
        with pytest.raises(LoadRefusedError, match="ended before its commit"):
            await commit_load(EndAtClaim(store, rt, plan.load_id), rt, plan, [res])
        after = (await ManifestStore(store, rt).read_latest()).id
        await cleanup_load(store, rt, plan.load_id)
        return before, after

    before, after = run_io(url, None, go)
    assert after == before
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1"}
    assert not any(k.startswith("bulk-load/") for k in files(tmp_path / "db"))


# ---------------------------------------------------------------------------------------------
# In a real Spark job
# ---------------------------------------------------------------------------------------------


def held_source(flag: Path, hold_partition: int):
    """The slatedb source whose ``abort()`` touches ``flag`` when it is done, and whose task for
    ``hold_partition`` waits (up to 20 s; Spark kills a cancelled task's Python worker 2-4 s
    after the job failed) for that flag before it stages: the attempt Spark cancelled but
    could not stop yet, writing after the abort."""
    from slatedb.spark.source import SlateDbDataSource, SlateDbWriter

    class HeldWriter(SlateDbWriter):
        def write(self, iterator):
            from pyspark import TaskContext

            batches = list(iterator)
            if TaskContext.get().partitionId() != hold_partition:
                return super().write(iter(batches))
            deadline = time.monotonic() + 20
            while not flag.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            late = flag.exists()
            try:
                out = super().write(iter(batches))
            except BaseException as e:
                Path(f"{flag}.late").write_text(f"{late} {type(e).__name__}")
                raise
            Path(f"{flag}.late").write_text(f"{late} staged")
            return out

        def abort(self, messages):
            try:
                super().abort(messages)
            finally:
                flag.touch()

    class HeldSource(SlateDbDataSource):
        @classmethod
        def name(cls):
            return "slatedb_held"

        def writer(self, schema, overwrite):
            w = super().writer(schema, overwrite)
            return HeldWriter(w.opts, w.plan)

    return HeldSource


def test_failed_spark_loads_leave_nothing(spark, tmp_path) -> None:
    """A real Spark job of each kind: a duplicate key (partition 1 fails on both attempts) into
    a new URL, a task failure (partition 1 raises after its rows) into an existing database, and
    a duplicate key in a sharded load; partition 0's attempt stages only after ``abort()`` ran
    (held until then, unless Spark kills its worker first), as a cancelled task whose worker
    Spark has not stopped yet does. Each failure leaves the file set as it was: nothing at the
    new URL (today's code: an empty database there, and the held attempt's SSTs and intents or
    shard). One try each: a failing Spark job costs 10-30 s on two busy cores, so the 10-try
    loops over these interleavings are the protocol-level tests above."""
    rows = [(b"k%04d" % i, b"v" * 40) for i in range(60)]
    dup = rows + [(b"k0050", b"again")]  # the second half: partition 1

    def fail_in_partition_1(batches):
        from pyspark import TaskContext

        for b in batches:
            yield b
        if TaskContext.get().partitionId() == 1:
            raise RuntimeError("injected task failure")

    cases = {
        "duplicate, new url": (dup, False, False, {}),
        "task failure, existing db": (rows, True, True, {}),
        "sharded duplicate": (dup, False, False, {"sharded": "true"}),
    }
    left: dict[str, list[str]] = {}
    late: dict[str, str] = {}
    for name, (data, fail, existing, options) in cases.items():
        root = tmp_path / name.replace(" ", "_").replace(",", "")
        url = make_db(root) if existing else f"file://{root}"
        before = files(root)
        flag = tmp_path / f"aborted-{root.name}"
        spark.dataSource.register(held_source(flag, 0))
        df = spark.createDataFrame(data, "key binary, value binary").coalesce(2)
        if fail:
            df = df.mapInArrow(fail_in_partition_1, df.schema)
        with pytest.raises(Exception, match="more than once|injected task failure"):
            df.write.format("slatedb_held").mode("append").options(url=url, sst_size_bytes="1024", **options).save()
        outcome = Path(f"{flag}.late")
        deadline = time.monotonic() + 6  # the held attempt: done, or killed by Spark (2-4 s after the failure)
        while time.monotonic() < deadline and not outcome.exists():
            time.sleep(0.05)
        late[name] = outcome.read_text() if outcome.exists() else "killed"
        time.sleep(0.2)
        extra = sorted(files(root) - before)
        if extra:
            left[name] = extra
    # late: "True <outcome>" when the held attempt wrote after the abort (LoadEndedError: it deleted
    # its files), "False ..." when the abort was slower than the hold, "killed" when Spark stopped it
    # first: whether a given run reaches the race is Spark's timing, so it is reported, not asserted.
    assert left == {}, f"leftovers after {len(left)} of {len(cases)} failed loads: {left} (held attempts: {late})"


@pytest.mark.parametrize("holder", ["checkpoint", "clone", pytest.param("checkpoint-switch", marks=pytest.mark.check_allows(
    "CKPT-2", reason="the catalogued switch deletes SSTs the checkpoint's manifest names: the loss shown"))])
def test_a_clean_up_after_a_compaction_keeps_the_committed_ssts_an_older_manifest_names(tmp_path, holder) -> None:
    """LOAD-6: the driver died after its commit, before its clean-up; a checkpoint (a reader's, or
    a clone's final one) pins the commit's manifest; a full compaction rewrites the loaded SSTs,
    so the latest manifest no longer names them; then the next clean-up (collect_loads, every
    load's begin) ran. It deleted every staged SST the *latest* manifest did not name: the
    checkpoint's reader, or the clone, met ObjectNotFoundError. Those SSTs are GC's to delete
    once nothing pins them; the clean-up keeps every SST a stored manifest names."""
    import trio

    from slatedb import admin
    from slatedb.checkpoint import CheckpointOptions
    from slatedb.objstore import resolve_store

    url = make_db(tmp_path / "db")
    keys, vals = rows_of(300)

    async def load_without_clean_up(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, vals, sst_options=SMALL, sst_size_bytes=4096)
        await commit_load(store, rt, plan, [res])

    run_io(url, None, load_without_clean_up)
    clone_url = f"file://{tmp_path}/clone"

    async def pin_then_compact():
        store = resolve_store(url)
        try:
            if holder.startswith("checkpoint"):
                cid = (await admin.create_checkpoint(store, CheckpointOptions(lifetime_s=3600))).id
            else:
                await admin.create_clone(clone_url, url)
                cid = None
            await admin.submit_compaction(store, "Full")
            await admin.run_compactor(store, {"compactor_options": {"poll_interval": "50ms"}}, once=True)
            return cid
        finally:
            await store.aclose()

    cid = trio.run(pin_then_compact)

    events: list = []

    async def collect(s, rt):
        if holder == "checkpoint-switch":  # catalogued cleanup-latest-only: the latest manifest alone, as before
            from slatedb.runtime import switches
            rt.bugs = frozenset({switches.CLEANUP_LATEST_ONLY})
        rt.event = lambda kind, **fields: events.append((kind, fields))  # the branch taken (probe load.cleanup-kept-pinned)
        return await collect_loads(s, rt, abandoned_after_s=0)

    run_io(url, None, collect)
    kept = [f["ssts"] for k, f in events if k == "load_cleanup_kept"]
    assert (kept == []) if holder == "checkpoint-switch" else (len(kept) == 1 and kept[0] > 0), events
    want = {b"base": b"1", **dict(zip(keys, vals))}
    if holder == "checkpoint-switch":
        from slatedb.errors import ObjectNotFoundError
        with pytest.raises(ObjectNotFoundError):
            with slatedb.DbReader.open(url, checkpoint_id=cid) as r:
                dict(r.scan())
        return
    if holder == "checkpoint":
        with slatedb.DbReader.open(url, checkpoint_id=cid) as r:
            assert dict(r.scan()) == want
    else:
        with slatedb.DbReader.open(clone_url) as r:
            assert dict(r.scan()) == want
    with slatedb.Db.open(url) as db:
        assert dict(db.scan()) == want


class ReplyLostThenDown:
    """``inner`` whose ``nth`` manifest put lands, then the store stops answering (every call but
    a delete fails transiently): a commit's update sent, its reply lost, the retries exhausted."""

    def __init__(self, inner, nth: int) -> None:
        self.inner, self.nth, self.manifest_puts, self.down = inner, nth, 0, False
        self.url = inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _gate(self) -> None:
        if self.down:
            from slatedb.errors import TransientObjectStoreError
            raise TransientObjectStoreError("*", "the store is not answering")

    async def put(self, key, data, mode=None):
        self._gate()
        out = await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))
        if key.startswith("manifest/"):
            self.manifest_puts += 1
            if self.manifest_puts == self.nth:
                self.down = True
                self._gate()
        return out

    async def get(self, *a, **k):
        self._gate()
        return await self.inner.get(*a, **k)

    async def head(self, key):
        self._gate()
        return await self.inner.head(key)

    async def list(self, prefix=""):
        self._gate()
        return await self.inner.list(prefix)

    async def copy(self, src, dst):
        self._gate()
        return await self.inner.copy(src, dst)

    async def delete(self, key):  # what the old commit did next: its deletes got through
        return await self.inner.delete(key)

    def open_url(self, url):
        return self.inner.open_url(url)

    async def aclose(self):
        pass


@pytest.mark.parametrize("switch", [False, pytest.param(True, marks=pytest.mark.check_allows(
    "GC-4", reason="the catalogued switch deletes the SSTs the landed commit names: the loss shown"))],
    ids=["fixed", "switch"])
def test_a_commit_whose_update_landed_but_reported_failure_keeps_its_ssts(tmp_path, switch: bool) -> None:
    """DUR-1, LOAD-1: the commit's manifest update landed, its reply was lost and the store then
    stopped answering past the retries (object_store_max_retries): the commit raised and deleted
    every SST it had written -- the WAL-tail SST holding the fenced live writer's acknowledged
    rows among them -- although the landed manifest names them: every later open of the database
    failed with ObjectNotFoundError and the acknowledged rows were gone. Now an update that was
    sent is never followed by those deletes (GC takes the SSTs if it did not land)."""
    from slatedb.errors import ObjectNotFoundError, ObjectStoreRetriesExhaustedError
    from slatedb.runtime import switches, with_max_retries

    url = f"file://{tmp_path}/db"
    writer = slatedb.Db.open(url)
    writer.put(b"base", b"1")
    writer.flush_memtable()
    acked = {b"w%03d" % i: b"acked-%d" % i for i in range(50)}
    for k, v in acked.items():
        writer.put(k, v)
    writer.flush()  # durable in the WAL, not in L0: the load's commit moves them to its WAL-tail SST
    keys, vals = rows_of(100)

    async def load(store, rt):
        with_max_retries(rt, 2)
        if switch:  # catalogued load-deletes-after-ambiguous-commit: the deletes as before
            rt.bugs = frozenset({switches.LOAD_DELETES_AFTER_AMBIGUOUS_COMMIT})
        s = ReplyLostThenDown(store, nth=2)  # 1: the epoch bump, 2: the load's commit
        plan = await begin_load(s, rt, overwrite=False)
        res = await stage_sorted(s, rt, plan, 0, 0, keys, vals, sst_options=SMALL, sst_size_bytes=1 << 20)
        with pytest.raises(ObjectStoreRetriesExhaustedError):
            await commit_load(s, rt, plan, [res])

    run_io(url, None, load)
    try:
        writer.close()
    except slatedb.SlateDBError:
        pass  # fenced by the load
    if switch:
        with pytest.raises(ObjectNotFoundError):
            with slatedb.Db.open(url) as db:
                [db.get(k) for k in acked]
        return
    with slatedb.Db.open(url) as db:
        assert {k: db.get(k) for k in acked} == acked
        assert all(db.get(k) == v for k, v in zip(keys, vals))


class OvertakenAfterCommit:
    """``inner`` where, right after the load's commit creates its manifest (armed by the commit's
    ``before_commit``), someone overtakes it before its boundary read: a writer opens (``writer``)
    or a full compaction rewrites the load's L0 (``compaction``), then a GC pass with manifest
    ``min_age`` 0 moves the boundary past the load's manifest -- RFC 004's stalled committer: its
    create landed and is reported behind the boundary, so the commit retries on a fresh read."""

    def __init__(self, inner, url: str, who: str) -> None:
        self.inner, self.url_, self.who, self.armed = inner, url, who, False
        self.url = inner.url

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def put(self, key, data, mode=None):
        import trio

        from slatedb import admin

        out = await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))
        if self.armed and key.startswith("manifest/") and key.endswith(".manifest"):
            self.armed = False
            if self.who == "writer":
                opened = await trio.to_thread.run_sync(lambda: slatedb.Db.open(self.url_))
                await trio.to_thread.run_sync(opened.close)
            else:
                await admin.submit_compaction(self.inner, "Full")
                await admin.run_compactor(self.inner, {"compactor_options": {"poll_interval": "50ms"}}, once=True)
            gc = {"garbage_collector_options": {"manifest_options": {"min_age": "0s"}}}
            stats = await admin.run_gc(self.inner, gc, once=True, runtime=ProductionRuntime("gc"))
            assert stats.boundary_advances, stats
        return out

    def open_url(self, url):
        return self.inner.open_url(url)

    async def aclose(self):
        pass


@pytest.mark.parametrize("who", ["writer", "compaction", "compaction-switch"])
def test_a_commit_overtaken_after_its_update_landed_is_not_reported_refused(tmp_path, who: str) -> None:
    """LOAD-12, DUR-1: the commit's manifest landed, then (before its RFC 004 boundary read) a
    writer opened, or a compaction rewrote the load's L0, and GC moved the boundary past it; the
    commit's retry found a newer epoch (writer) or the load's SSTs no longer in ``ssts`` and the
    load's seq reached (compaction) and reported the load refused, "nothing committed", and
    deleted the SSTs it had written: the WAL-tail SST holding the fenced writer's acknowledged
    rows, which the newer writer's manifests name (every open failed: ObjectNotFoundError, the
    rows were gone), or which the compactor's pinned manifest names (CKPT-2). Now the landed
    commit is recognised by its replay point and seq (compaction: the load committed, as it
    did), and a refusal after a create that may have landed raises CommitOutcomeUnknownError,
    deleting nothing (writer)."""
    from slatedb.errors import CommitOutcomeUnknownError

    url = f"file://{tmp_path}/db"
    writer = slatedb.Db.open(url)
    writer.put(b"base", b"1")
    writer.flush_memtable()
    acked = {b"w%03d" % i: b"acked-%d" % i for i in range(50)}
    for k, v in acked.items():
        writer.put(k, v, durable=True)  # in the WAL, not in L0: the commit moves them to its WAL-tail SST
    keys, vals = rows_of(100)

    async def load(store, rt):
        if who == "compaction-switch":  # catalogued load-landed-by-ssts: the landed rule before LOAD-12
            from slatedb.runtime import switches
            rt.bugs = frozenset({switches.LOAD_LANDED_BY_SSTS})
        s = OvertakenAfterCommit(store, url, who.split("-")[0])
        plan = await begin_load(s, rt, overwrite=False)
        res = await stage_sorted(s, rt, plan, 0, 0, keys, vals, sst_options=SMALL, sst_size_bytes=1 << 20)

        async def arm() -> None:
            s.armed = True

        try:
            if who == "writer":
                with pytest.raises(CommitOutcomeUnknownError):
                    await commit_load(s, rt, plan, [res], before_commit=arm)
            elif who == "compaction-switch":  # the landed commit taken for not landed, LOAD-5 refusing the
                # retry: a committed load reported failed (unsure_refusals keeps its SSTs at least)
                with pytest.raises(CommitOutcomeUnknownError):
                    await commit_load(s, rt, plan, [res], before_commit=arm)
                return
            else:
                await commit_load(s, rt, plan, [res], before_commit=arm)
        finally:
            await cleanup_load(store, rt, plan.load_id)

    run_io(url, None, load)
    try:
        writer.close()
    except slatedb.SlateDBError:
        pass  # fenced by the load
    with slatedb.Db.open(url) as db:
        assert {k: db.get(k) for k in acked} == acked
        assert [db.get(k) for k in keys] == vals


def test_the_clean_up_reads_only_manifests_written_since_the_load_began(tmp_path, monkeypatch) -> None:
    """LOAD-6's look at older manifests starts a margin before the load's first intent: manifests
    older than that cannot name its SSTs. An abort of a load whose staged SSTs no manifest names
    (the case that reads every candidate manifest) reads none of the database's older manifests from
    two hours before (`sim mutate` seed 14: a margin turned `&` read all of them, unnoticed)."""
    root = tmp_path / "db"
    url = make_db(root)
    for i in range(5):
        with slatedb.Db.open(url) as db:
            db.put(b"old%d" % i, b"1")
    old = [p for p in (root / "manifest").iterdir() if p.suffix == ".manifest"]
    two_hours_ago = time.time() - 7200
    for p in old:
        os.utime(p, (two_hours_ago, two_hours_ago))
    before = files(root)
    reads: list[int] = []
    real_read = ManifestStore.read

    async def read(self, manifest_id):
        reads.append(manifest_id)
        return await real_read(self, manifest_id)

    keys, values = rows_of(40)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=512)
        monkeypatch.setattr(ManifestStore, "read", read)
        await cleanup_load(store, rt, plan.load_id)

    run_io(url, None, go)
    old_ids = {int(p.stem) for p in old} - {max(int(p.stem) for p in old)}  # the latest is read as the latest
    assert len(old_ids) >= 10 and not old_ids & set(reads), sorted(reads)
    assert not [f for f in files(root) - before if f.startswith(("compacted/", "bulk-load/"))]  # the SSTs went


async def test_older_manifests_are_read_newest_first_and_the_look_stops_once_every_candidate_is_found() -> None:
    """LOAD-6's look at older manifests (``named_by_older_manifests``): the newest are the likeliest
    to name a load's SSTs (those a compaction rewrote since). Manifest 4 names both candidates, so
    it is the only one read; manifests 1-3 (one naming a candidate, one naming nothing) are not
    (`sim mutate` seed 23: the ids sorted oldest first read all four for the same answer, unnoticed)."""
    from ulid import ULID

    from slatedb.format.types import CompactedSsTableV2, ManifestV2, SsTableInfo
    from slatedb.spark.load_pins import named_by_older_manifests
    from tests.db.helpers import memory_store

    info = SsTableInfo(first_entry=b"a", last_entry=b"z", filter_offset=100, filter_len=20, index_offset=120,
                       index_len=30)

    def naming(*ids: ULID) -> ManifestV2:
        return ManifestV2(initialized=True, ssts=tuple(CompactedSsTableV2(i, info, 2) for i in ids))

    a, b, other = ULID.from_int(1), ULID.from_int(2), ULID.from_int(3)
    ms = ManifestStore(memory_store(), ProductionRuntime())
    for mid, m in enumerate([naming(), naming(a), naming(other), naming(a, b), naming()], start=1):
        await ms.try_write(mid, m)
    reads: list[int] = []
    real_read = ms.read

    async def read(mid: int):
        reads.append(mid)
        return await real_read(mid)

    ms.read = read  # type: ignore[method-assign]
    assert await named_by_older_manifests(ms, {a, b}, 0, 5) == {a, b}
    assert reads == [4]
    reads.clear()
    assert await named_by_older_manifests(ms, {a, other}, 0, 5) == {a, other}  # found across two
    assert reads == [4, 3]
    reads.clear()
    assert await named_by_older_manifests(ms, {b, ULID.from_int(9)}, 0, 5) == {b}  # one never found: all read
    assert reads == [4, 3, 2, 1]


def test_a_load_in_progress_does_not_stop_the_collection_of_the_abandoned_ones_after_it(tmp_path) -> None:
    """``collect_loads`` passes over a load in progress (a young marker) and goes on to the loads
    after it: an abandoned one begun later (its marker aged by hand here) is cleaned up."""
    import os

    from slatedb.spark.load import marker_key

    url = make_db(tmp_path / "db")
    keys, values = rows_of(20)

    async def go(store, rt):
        live = await begin_load(store, rt, overwrite=False)  # the lower id: listed first
        dead = await begin_load(store, rt, overwrite=False)
        await stage_sorted(store, rt, dead, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        day_ago = time.time() - 86_400
        os.utime(tmp_path / "db" / marker_key(dead.load_id), (day_ago, day_ago))
        assert sorted([live.load_id, dead.load_id]) == [live.load_id, dead.load_id]
        return live, dead, await collect_loads(store, rt, abandoned_after_s=3600)

    live, dead, cleaned = run_io(url, None, go)
    assert cleaned == [dead.load_id]
    left = {k for k in files(tmp_path / "db") if k.startswith("bulk-load/")}
    assert left and all(k.startswith(f"bulk-load/{live.load_id}/") for k in left), left


# ---------------------------------------------------------------------------------------------
# The rarer outcomes of the races above (each the only check that runs its lines)
# ---------------------------------------------------------------------------------------------


class LostClaimReply(AbortMidStage):
    """A store whose first conditional PUT of the load's open marker (a claim) lands but whose
    reply is lost (a transient error): the retry's PUT then finds the ETag changed."""

    def __init__(self, inner, load_id: str) -> None:
        super().__init__(inner, -1, False, None)
        self.load_id, self.lost = load_id, False

    async def put(self, key, data, mode=None):
        if key == marker_key(self.load_id) and mode is not None and not self.lost:
            self.lost = True
            await self.inner.put(key, data, mode)
            raise TransientObjectStoreError(key, "the reply to the claim was lost")
        return await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))


def test_a_claim_whose_first_put_landed_unseen_is_won(tmp_path) -> None:
    """LOAD-10, ``_claim``: the retry of a claim whose first PUT landed meets a precondition
    failure; the marker it reads back says what it claimed (``committing``): the claim is its own
    and the commit goes on (taking it for lost refused a load nobody else claimed)."""
    url = make_db(tmp_path / "db")
    keys, values = rows_of(30)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        lossy = LostClaimReply(store, plan.load_id)
        out = await commit_load(lossy, rt, plan, [res])
        await cleanup_load(store, rt, plan.load_id)
        return lossy.lost, out

    lost, out = run_io(url, None, go)
    assert lost and out.manifest_id is not None and out.rows == len(keys)
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1", **dict(zip(keys, values))}


class CommitClaimsFirst(AbortMidStage):
    """A collector's store on which the commit of ``load_id`` claims the open marker between the
    collector's GET of it (``open``) and the collector's own conditional PUT (``abandoned``)."""

    def __init__(self, inner, rt, load_id: str) -> None:
        super().__init__(inner, -1, False, None)
        self.rt, self.load_id, self.raced = rt, load_id, False

    async def put(self, key, data, mode=None):
        if key == marker_key(self.load_id) and mode is not None and not self.raced:
            self.raced = True
            await claim_for_commit(self.inner, self.rt, self.load_id)
        return await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))


def test_a_collector_whose_claim_the_commit_won_passes_over_that_load_and_collects_the_next(tmp_path) -> None:
    """LOAD-10: an abandoned-looking load (its marker a day old) whose commit claims the marker
    just before the collector does: the collector's claim fails, the marker reads ``committing``
    (not the collector's ``abandoned``): the collector leaves that load to its commit, which
    lands, and goes on to collect the next abandoned load."""
    url = make_db(tmp_path / "db")
    keys, values = rows_of(30)
    other = [b"x" + k for k in keys]

    async def go(store, rt):
        slow = await begin_load(store, rt, overwrite=False)  # the lower id: collected first
        dead = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, slow, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        await stage_sorted(store, rt, dead, 0, 0, other, values, sst_options=SMALL, sst_size_bytes=1024)
        racing = CommitClaimsFirst(store, rt, slow.load_id)
        cleaned = await collect_loads(racing, DayLater("later"))
        out = await commit_load(store, rt, slow, [res])
        await cleanup_load(store, rt, slow.load_id)
        return racing.raced, cleaned, dead, out

    raced, cleaned, dead, out = run_io(url, None, go)
    assert raced and cleaned == [dead.load_id] and out.rows == len(keys)
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1", **dict(zip(keys, values))}
    assert not any(k.startswith("bulk-load/") for k in files(tmp_path / "db"))


class CollectorClaimsFirst(AbortMidStage):
    """A committing driver's store on which a collector of abandoned loads claims the open marker
    (``abandoned``) between the commit's HEAD of it and the commit's own conditional PUT."""

    def __init__(self, inner, rt, load_id: str) -> None:
        super().__init__(inner, -1, False, None)
        self.rt, self.load_id, self.raced = rt, load_id, False

    async def put(self, key, data, mode=None):
        if key == marker_key(self.load_id) and mode is not None and not self.raced:
            self.raced = True
            meta = await self.inner.head(key)
            assert await _claim(self.inner, self.rt, self.load_id, meta, MARKER_ABANDONED)
        return await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))


def test_a_commit_whose_claim_a_collector_won_just_before_is_refused(tmp_path) -> None:
    """LOAD-10, the other order: the collector's claim lands between the commit's HEAD and PUT;
    the commit's claim fails and the marker reads ``abandoned``, not its ``committing``: the
    commit is refused (nothing visible), and the collector's clean-up leaves nothing."""
    url = make_db(tmp_path / "db")
    before = files(tmp_path / "db")
    keys, values = rows_of(30)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        racing = CollectorClaimsFirst(store, rt, plan.load_id)
        with pytest.raises(LoadRefusedError, match="ended before its commit"):
            await commit_load(racing, rt, plan, [res])
        await cleanup_load(store, rt, plan.load_id)  # the collector's next step
        return racing.raced

    assert run_io(url, None, go)
    assert files(tmp_path / "db") == before
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1"}


class MarkerGoneAtGet(AbortMidStage):
    """A collector's store on which the load's own driver ends it (deletes the open marker)
    between the collector's LIST and its GET of the marker."""

    def __init__(self, inner, rt, load_id: str) -> None:
        super().__init__(inner, -1, False, None)
        self.rt, self.load_id = rt, load_id

    async def get(self, key, *a, **k):
        if key == marker_key(self.load_id):
            await end_load(self.inner, self.rt, self.load_id)
        return await self.inner.get(key, *a, **k)


def test_a_marker_gone_between_the_collectors_list_and_get_is_an_ended_load_and_collected(tmp_path) -> None:
    """``collect_loads``: a marker listed old but gone when read means the load ended meanwhile
    (its driver's abort): the collector cleans up what is left, nothing to claim."""
    url = make_db(tmp_path / "db")
    before = files(tmp_path / "db")
    keys, values = rows_of(30)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        return plan, await collect_loads(MarkerGoneAtGet(store, rt, plan.load_id), DayLater("later"))

    plan, cleaned = run_io(url, None, go)
    assert cleaned == [plan.load_id]
    assert files(tmp_path / "db") == before


def test_a_foreign_object_among_a_loads_intents_is_passed_over_by_its_clean_up(tmp_path) -> None:
    """``cleanup_load`` deletes the SSTs the load's intents name and the intents; an object in
    the load's directory that names no SST (an intent-shaped key whose id is no ULID: it sorts
    before the real intents here) is neither read as one nor stops the clean-up of the rest."""
    url = make_db(tmp_path / "db")
    before = files(tmp_path / "db")
    keys, values = rows_of(30)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        await stage_sorted(store, rt, plan, 1, 0, keys, values, sst_options=SMALL, sst_size_bytes=1024)
        stray = f"bulk-load/{plan.load_id}/000000-0-{'Z' * 26}"  # 26 characters, but past ULID's range
        await store.put(stray, b"not an intent")
        return stray, await cleanup_load(store, rt, plan.load_id)

    stray, deleted = run_io(url, None, go)
    assert deleted >= 2
    assert files(tmp_path / "db") == before | {stray}


class GoneAfterFirstHead(AbortMidStage):
    """A store on which the staged SST ``key`` is deleted (by GC, say) right after its first HEAD:
    the commit's check before fencing (LOAD-3) sees it, its reference after the fence does not."""

    def __init__(self, inner, key: str) -> None:
        super().__init__(inner, -1, False, None)
        self.key, self.heads = key, 0

    async def head(self, key):
        out = await self.inner.head(key)
        if key == self.key:
            self.heads += 1
            await self.inner.delete(key)
        return out


def test_a_staged_sst_gone_after_the_fence_refuses_the_load(tmp_path) -> None:
    """LOAD-3: a staged SST that disappears between the commit's first check and its reference
    after the fence refuses the load (LoadRefusedError, not the store's ObjectNotFoundError):
    nothing committed, the database reads as before."""
    from ulid import ULID

    from slatedb.lsm.view import sst_key

    url = make_db(tmp_path / "db")
    keys, values = rows_of(30)

    async def go(store, rt):
        plan = await begin_load(store, rt, overwrite=False)
        res = await stage_sorted(store, rt, plan, 0, 0, keys, values, sst_options=SMALL, sst_size_bytes=1 << 20)
        assert len(res.ssts) == 1
        gone = GoneAfterFirstHead(store, sst_key(ULID.from_str(res.ssts[0].sst_id)))
        try:
            with pytest.raises(LoadRefusedError, match="is gone"):
                await commit_load(gone, rt, plan, [res])
        finally:
            await cleanup_load(store, rt, plan.load_id)
        return gone.heads

    assert run_io(url, None, go) == 1
    with slatedb.DbReader.open(url) as r:
        assert dict(r.scan()) == {b"base": b"1"}


async def test_an_older_manifest_gc_deleted_between_the_list_and_its_read_pins_nothing_and_the_look_goes_on() -> None:
    """``named_by_older_manifests``: a manifest listed but deleted (by GC) before it is read pins
    nothing; the older ones are still read (manifest 4, naming both candidates, is gone: 3 and 2
    name them)."""
    from ulid import ULID

    from slatedb.format.types import CompactedSsTableV2, ManifestV2, SsTableInfo
    from slatedb.spark.load_pins import named_by_older_manifests
    from tests.db.helpers import memory_store

    info = SsTableInfo(first_entry=b"a", last_entry=b"z", filter_offset=100, filter_len=20, index_offset=120,
                       index_len=30)

    def naming(*ids: ULID) -> ManifestV2:
        return ManifestV2(initialized=True, ssts=tuple(CompactedSsTableV2(i, info, 2) for i in ids))

    a, b, other = ULID.from_int(1), ULID.from_int(2), ULID.from_int(3)
    ms = ManifestStore(memory_store(), ProductionRuntime())
    for mid, m in enumerate([naming(), naming(a), naming(other), naming(a, other), naming()], start=1):
        await ms.try_write(mid, m)
    reads: list[int] = []
    real_read = ms.read

    async def read(mid: int):
        reads.append(mid)
        if mid == 4:
            await ms.store.delete(ms.key(4))  # GC, between the list and this read
        return await real_read(mid)

    ms.read = read  # type: ignore[method-assign]
    assert await named_by_older_manifests(ms, {a, other, b}, 0, 5) == {a, other}
    assert reads == [4, 3, 2, 1]
