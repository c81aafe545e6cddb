"""The official coordinator/worker lifecycle across engines (issue 24 item 3), both ways: our
compactor stopped at each state (Submitted, Scheduled, Running with a stale and with a live
heartbeat, Compacted) and the official 0.17 compactor taking over; the official compactor
stopped at each state and ours taking over; a job the official admin submitted and ours taking
over. Rows exact through both engines; ``Admin.read_compactions`` (ours and the official one)
decodes every ``.compactions`` file of the history."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.compactor import lifecycle as lc
from slatedb.compactor.store import CompactionsStore
from slatedb.compactor.worker import Worker
from slatedb.config import Settings
from slatedb.format.types import CompactionStatus, WorkerSpec
from slatedb.manifest.store import ManifestStore
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime

from .official_stopped import OfficialWriter
from .test_compaction_interop import NO_COMPACTOR, ORPHAN_WRITER_CHECKPOINT, ops
from .test_db_interop import assert_official_sees, latest_manifest, model, url_of

pytestmark = pytest.mark.interop
S = CompactionStatus

OURS = Settings.from_dict({"min_filter_keys": 10, "compactor_options": {
    "poll_interval": "50ms", "commit_compacted_interval": "50ms", "worker_heartbeat_timeout": "1s",
    "scheduler_options": {"min_compaction_sources": "100", "max_compaction_sources": "100"},
    "worker": {"max_sst_size": 8192, "max_subcompactions": 3, "heartbeat_interval": "200ms"}}})

#: Open the official writer with its compactor (coordinator + worker), give it ``seconds``,
#: then report its view of .compactions (every file) and shut down.
OFFICIAL_TAKES_OVER = """
async def main(root, seconds, overrides):
    db = await open_db(root, overrides=json.loads(overrides))
    store = store_at(root)
    a = u.AdminBuilder("db", store).build()
    deadline = asyncio.get_event_loop().time() + float(seconds)
    while asyncio.get_event_loop().time() < deadline:
        await asyncio.sleep(0.2)
        got = await a.read_compactions(None)
        if got.recent_compactions and all("COMPLETED" in str(c.status) or "FAILED" in str(c.status)
                                          for c in got.recent_compactions):
            break
    await db.shutdown()
    got = await a.read_compactions(None)
    emit({"epoch": got.compactor_epoch,
          "jobs": [{"id": c.id, "status": str(c.status)} for c in got.recent_compactions]})
asyncio.run(main(*sys.argv[1:]))
"""

#: Decode every .compactions file with the official admin API.
OFFICIAL_LIST = """
async def main(root):
    a = u.AdminBuilder("db", store_at(root)).build()
    out = []
    for c in await a.list_compactions(None, None):
        out.append({"epoch": c.compactor_epoch, "statuses": [str(x.status) for x in c.recent_compactions]})
    emit(out)
asyncio.run(main(*sys.argv[1:]))
"""

OFFICIAL_SETTINGS = {"compactor_options.poll_interval": "100ms",
                     "compactor_options.worker.compactions_poll_interval": "100ms",
                     "compactor_options.worker_heartbeat_timeout": "3s",
                     "compactor_options.scheduler_options": {"min_compaction_sources": "100",
                                                             "max_compaction_sources": "100"},
                     "l0_max_ssts": 64}


def _fill(root: Path) -> dict[bytes, bytes]:
    writes = ops(b"lc", 500)
    with slatedb.Db.open(url_of(root), settings=NO_COMPACTOR) as db:
        for o in writes:
            db.put(o["key"], o["value"]) if o["op"] == "put" else db.delete(o["key"])
    assert len(latest_manifest(root).l0) >= 4
    return model(writes)


async def _stop_ours_at(url: str, state: str) -> str:
    """Our coordinator (and worker) driven to ``state`` for one full compaction; returns its id."""
    store = resolve_store(url)
    rt = ProductionRuntime("ours")
    try:
        coord = Compactor(store, rt, OURS, local_worker=False)
        await coord.start()
        m = (await ManifestStore(store, rt).read_latest()).manifest
        job = await submit_compaction(store, rt, full_spec(m))
        if state == "submitted":
            return str(job.id)
        await coord.tick()  # validated: Scheduled
        if state == "scheduled":
            return str(job.id)
        w = Worker(store, rt, OURS)
        assert await w.step() == [job.id]
        if state == "compacted":
            assert await w.run_job(job.id)
            return str(job.id)
        # Running: one range recorded, then the worker dies (no release).
        done = trio.Event()
        inner = w._heartbeat

        async def heartbeat(cid, ctx):
            await inner(cid, ctx)
            if ctx is not None and any(s.output_ssts for s in ctx.subcompactions):
                done.set()
        w._heartbeat = heartbeat  # type: ignore[method-assign]
        async with trio.open_nursery() as n:
            n.start_soon(w.run_job, job.id)
            await done.wait()
            n.cancel_scope.cancel()
        if state == "running-stale":
            cs = CompactionsStore(store, rt)

            def stale(v):
                c = lc.find(v, job.id)
                return lc.replace(v, lc.attrs.evolve(c, worker=WorkerSpec(c.worker.worker_id, rt.now_ms() - 600_000)))
            await cs.update(stale)
        return str(job.id)
    finally:
        await store.aclose()


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
@pytest.mark.parametrize("state", ["submitted", "scheduled", "running-stale", "running-live", "compacted"])
def test_the_official_compactor_takes_over_ours_stopped_at_each_state(official, tmp_path: Path, state: str) -> None:
    expected = _fill(tmp_path)
    keys = set(expected) | {b"lc%04d" % i for i in range(500)}
    jid = trio.run(_stop_ours_at, url_of(tmp_path), state)
    got = official.run_json(OFFICIAL_TAKES_OVER, str(tmp_path), "40", json.dumps(OFFICIAL_SETTINGS), timeout_s=240)
    jobs = {j["id"]: j["status"] for j in got["jobs"]}
    assert jid in jobs and "COMPLETED" in jobs[jid], (state, got)
    m = latest_manifest(tmp_path)
    assert not m.l0 and len(m.compacted) == 1, (state, len(m.l0), [r.id for r in m.compacted])
    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
    assert_official_sees(official, tmp_path, keys, expected, "writer")
    # The official admin decodes every .compactions file of the history (ours and its own).
    listed = official.run_json(OFFICIAL_LIST, str(tmp_path))
    assert listed and any(any("COMPLETED" in s for s in f["statuses"]) for f in listed)


OFFICIAL_SUBMIT = """
async def main(root, views):
    a = u.AdminBuilder("db", store_at(root)).build()
    sources = [u.SourceId.SST_VIEW(v) for v in json.loads(views)]
    c = await a.submit_compaction(u.CompactionSpec.TIERED(b"", sources, 0))
    emit({"id": c.id})
asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_ours_takes_over_a_compaction_the_official_admin_submitted(official, tmp_path: Path) -> None:
    expected = _fill(tmp_path)

    async def start_ours():  # the official admin submits into an existing .compactions
        store = resolve_store(url_of(tmp_path))
        try:
            await Compactor(store, ProductionRuntime("ours"), OURS, local_worker=False).start()
        finally:
            await store.aclose()

    trio.run(start_ours)
    try:
        views = [str(v.id) for v in latest_manifest(tmp_path).l0]  # newest first: every L0 view
        jid = official.run_json(OFFICIAL_SUBMIT, str(tmp_path), json.dumps(views))["id"]
    except AssertionError as e:
        pytest.fail(f"the official admin could not submit: {e}")

    async def ours():
        store = resolve_store(url_of(tmp_path))
        try:
            c = Compactor(store, ProductionRuntime("ours"), OURS)
            await c.run_until_idle()
            return c.stats
        finally:
            await store.aclose()

    stats = trio.run(ours)
    assert stats["completed"] == 1, stats
    m = latest_manifest(tmp_path)
    assert not m.l0 and len(m.compacted) == 1
    got = official.run_json(OFFICIAL_LIST, str(tmp_path))
    assert any("COMPLETED" in s for s in got[-1]["statuses"]), got
    assert_official_sees(official, tmp_path, set(expected), expected, "writer")
    del jid


# ---------------------------------------------------------------------------------------------
# The other way: the official compactor stopped at each state, ours taking over
# ---------------------------------------------------------------------------------------------

#: The official writer's settings for every stop: all 16 L0 SSTs in one job (its size-tiered
#: scheduler), small outputs in 3 ranges (inputs of several blocks: the 0.17 planner leaves a
#: job of single-block L0 SSTs unsplit), a heartbeat every 10 ms; nothing else ticks for 60 s.
OFFICIAL_STOP_BASE = {
    "l0_max_ssts": 256,
    "compactor_options.poll_interval": "60s",
    "compactor_options.commit_compacted_interval": "60s",
    "compactor_options.scheduler_options": {"min_compaction_sources": "2", "max_compaction_sources": "100"},
    "compactor_options.worker.compactions_poll_interval": "60s",
    "compactor_options.worker.heartbeat_interval": "10ms",
    "compactor_options.worker.max_sst_size": 4096,
    "compactor_options.worker.max_subcompactions": 3,
}
#: What makes each state last (over :data:`OFFICIAL_STOP_BASE`).
OFFICIAL_STOP_AT = {
    # The official scheduler writes Submitted and, in the same tick, Scheduled; the admin's
    # submission stays Submitted until the coordinator's next tick (its scheduler off here).
    "submitted": {"compactor_options.scheduler_options": {"min_compaction_sources": "100",
                                                          "max_compaction_sources": "100"}},
    # Validated at the coordinator's first tick; the worker polls 30-90 s later.
    "scheduled": {},
    # Claimed 150-450 ms after the first tick; then stepped until a heartbeat records progress.
    "running-stale": {"compactor_options.worker.compactions_poll_interval": "300ms"},
    "running-live": {"compactor_options.worker.compactions_poll_interval": "300ms"},
    # The worker finishes at once; the coordinator commits at its next tick, 60 s later.
    "compacted": {"compactor_options.worker.compactions_poll_interval": "100ms"},
}


def _ours_taking_over(timeout: str) -> Settings:
    return Settings.from_dict({"min_filter_keys": 10, "compactor_options": {
        "poll_interval": "50ms", "commit_compacted_interval": "50ms", "worker_heartbeat_timeout": timeout,
        "scheduler_options": {"min_compaction_sources": "100", "max_compaction_sources": "100"},
        "worker": {"max_sst_size": 8192, "max_subcompactions": 3, "heartbeat_interval": "200ms"}}})


STALE_TIMEOUT_S, LIVE_TIMEOUT_S, LIVE_WORKER_TIMEOUT_S = 1.0, 3.0, 10.0


def _fill_big(root: Path) -> dict[bytes, bytes]:
    """1000 keys written twice (200-byte values) and every 11th deleted: 16 L0 SSTs of 32 KiB."""
    writes = [{"op": "put", "key": b"lc%05d" % i, "value": b"r%d-%d-" % (r, i) + b"v" * 200}
              for r in range(2) for i in range(1000)]
    writes += [{"op": "delete", "key": b"lc%05d" % i} for i in range(0, 1000, 11)]
    with slatedb.Db.open(url_of(root), settings={**NO_COMPACTOR, "l0_sst_size_bytes": 32768}) as db:
        for o in writes:
            db.put(o["key"], o["value"]) if o["op"] == "put" else db.delete(o["key"])
    assert len(latest_manifest(root).l0) >= 8
    return model(writes)


def _progress(c) -> int:
    return sum(len(s.output_ssts) for s in c.ctx.subcompactions) if c.ctx is not None else 0


def _only(v, status: S | None = None):
    """The one job of ``v`` (None when there is none, or it is not in ``status``)."""
    if len(v.recent_compactions) != 1:
        return None
    c = v.recent_compactions[0]
    return c if status is None or c.status is status else None


def _stop_official_at(official, root: Path, state: str, attempts: int = 8, keep: OfficialWriter | list | None = None):
    """The official writer (its compactor) killed at ``state``; returns the job as it left it.
    A missed window (the job moved on before the kill) restores the filled database and tries
    again, at most ``attempts`` times. With a list as ``keep`` (Running only), the writer is
    left stopped instead of killed, and appended to the list."""
    overrides = {**OFFICIAL_STOP_BASE, **OFFICIAL_STOP_AT[state]}
    pristine = root / "pristine"
    shutil.copytree(root / "db", pristine)
    try:
        for _ in range(attempts):
            if state == "submitted":
                views = [str(v.id) for v in latest_manifest(root).l0]  # newest first: every L0 view
                w = OfficialWriter(official, root, overrides, submit_views=views)
                got = w.run_until(lambda v: _only(v, S.SUBMITTED) is not None, timeout_s=30,
                                  missed=lambda v: _only(v, S.SCHEDULED) is not None)  # validated first
            elif state.startswith("running"):
                w = OfficialWriter(official, root, overrides)
                got = w.step_until(
                    lambda v: _only(v, S.SCHEDULED) is not None or (_only(v, S.RUNNING) is not None
                                                                   and not _progress(_only(v))),
                    lambda v: _only(v, S.RUNNING) is not None and _progress(_only(v)) > 0, timeout_s=30,
                    keep_stopped=keep is not None)
                if got is not None and keep is not None:
                    keep.append(w)
            else:
                st, after = {"scheduled": (S.SCHEDULED, S.RUNNING), "compacted": (S.COMPACTED, S.COMPLETED)}[state]
                w = OfficialWriter(official, root, overrides)
                got = w.run_until(lambda v: _only(v, st) is not None, timeout_s=30,
                                  missed=lambda v: _only(v, after) is not None)
            if got is not None:
                return _only(got)
            shutil.rmtree(root / "db")
            shutil.copytree(pristine, root / "db")
        pytest.fail(f"the official compactor was never stopped at {state} in {attempts} attempts")
    finally:
        shutil.rmtree(pristine)


async def _ours_takes_over(url: str, state: str, job, on_started: Callable[[], None] | None = None) -> dict:
    """Our coordinator and local worker take over the official compactor's ``.compactions``;
    records what the start left, every reclaim decision on the official worker's claim (its
    heartbeat's age, the status after), and COMPACT-2 at the Completed write. ``on_started``
    runs after our start and first tick."""
    store = resolve_store(url)
    rt = ProductionRuntime("ours")
    timeout_s = {"running-live": LIVE_TIMEOUT_S, "live-worker": LIVE_WORKER_TIMEOUT_S}.get(state, STALE_TIMEOUT_S)
    official = job.worker.worker_id if job.worker is not None else None
    out: dict = {"reclaim_ticks": [], "completed_with_outputs_in_manifest": None}
    try:
        coord = Compactor(store, rt, _ours_taking_over(f"{int(timeout_s * 1000)}ms"))
        manifests = ManifestStore(store, rt)
        inner_write = coord.cstore.try_write

        async def try_write(file_id, value, **kw):
            c = lc.find(value, job.id)
            if c is not None and c.status is S.COMPLETED and out["completed_with_outputs_in_manifest"] is None:
                m = (await manifests.read_latest()).manifest
                listed = {v.sst_id for r in m.compacted for v in r.ssts}
                out["completed_with_outputs_in_manifest"] = all(o.id in listed for o in c.output_ssts)
            return await inner_write(file_id, value, **kw)
        coord.cstore.try_write = try_write  # type: ignore[method-assign]

        inner_reclaim = coord._reclaim

        async def reclaim():
            before = lc.find(coord._file.compactions, job.id) if coord._file is not None else None
            now_ms = rt.now_ms()
            await inner_reclaim()
            after = lc.find(coord._file.compactions, job.id) if coord._file is not None else None
            if before is not None and before.status is S.RUNNING and before.worker.worker_id == official:
                out["reclaim_ticks"].append((now_ms - before.worker.last_heartbeat_ms, after.status))
        coord._reclaim = reclaim  # type: ignore[method-assign]

        await coord.start()
        out["after_start"] = lc.find(coord._file.compactions, job.id)
        if on_started is not None:
            await coord.tick()
            out["after_first_tick"] = lc.find(coord._file.compactions, job.id)
            on_started()
        await coord.run_until_idle()
        out["stats"] = coord.stats
        out["timeout_ms"] = coord.timeout_ms
        latest = await CompactionsStore(store, rt).read_latest()
        out["final"] = lc.find(latest.compactions, job.id)
        return out
    finally:
        await store.aclose()


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
@pytest.mark.parametrize("state", ["submitted", "scheduled", "running-stale", "running-live", "compacted"])
def test_ours_takes_over_the_official_compactor_stopped_at_each_state(official, tmp_path: Path, state: str) -> None:
    """The official writer's compactor runs as a child process and is SIGKILLed at ``state``
    (:mod:`tests.interop.official_stopped`); then our coordinator and local worker take over.

    How each state is produced, and what the official 0.17 engine was seen doing (the facts are
    in spec/protocols/compaction.md, "The official 0.17 engine, observed"):

    * its coordinator's first tick runs at once after its start (two writes: the new epoch with
      entries unchanged, then Scheduled -> Submitted), and writes the scheduler's Submitted and
      its validation, Scheduled, ~1 ms apart in the same tick: a kill catches the scheduler's own
      Submitted about 2 times in 5, so **submitted** is the official admin's submission into the
      running official compactor's ``.compactions``, waiting for the next tick (60 s away);
    * **scheduled**: validated at the first tick; the official worker does not claim at start,
      only after a jittered ``compactions_poll_interval`` (60 s here);
    * **running-***: claimed ~0.3 s after the start and Compacted ~40 ms later, so the child is
      stepped (SIGSTOP/SIGCONT bursts of 2 ms) from Scheduled on and killed while stopped at the
      first file whose ``ctx`` records outputs (3 ranges; progress is published only by its
      heartbeat, every 10 ms). **Stale**: ours starts once the heartbeat is older than our
      timeout (1 s) and reclaims at its first tick. **Live**: ours starts at once (timeout 3 s),
      leaves the job alone at every tick until the heartbeat is older than the timeout, then
      reclaims it. Either way our worker resumes every official range after its recorded
      outputs, which stay in the committed run, in range order;
    * **compacted**: the official worker finishes at once; its coordinator would commit at its
      next tick (60 s away). Ours commits the official outputs as they are, manifest first
      (checked at the write of Completed), then ``.compactions`` Completed.

    A missed window (the job moved past the state before the kill) restores the filled database
    and tries again, eight times at most."""
    expected = _fill_big(tmp_path)
    job = _stop_official_at(official, tmp_path, state)
    official_worker = job.worker.worker_id if job.worker is not None else None
    if state == "running-stale":  # its heartbeat lapses before ours starts
        time.sleep(max(0.0, (job.worker.last_heartbeat_ms + STALE_TIMEOUT_S * 1000 + 200) / 1000 - time.time()))

    got = trio.run(_ours_takes_over, url_of(tmp_path), state, job)
    start, final, stats = got["after_start"], got["final"], got["stats"]
    assert final is not None and final.status is S.COMPLETED, (state, final)
    assert got["completed_with_outputs_in_manifest"] is True, "COMPACT-2: .compactions Completed before the manifest"
    m = latest_manifest(tmp_path)
    assert not m.l0 and len(m.compacted) == 1, (state, len(m.l0), [r.id for r in m.compacted])
    assert [v.sst_id for v in m.compacted[0].ssts] == [o.id for o in final.output_ssts]

    if state == "submitted":  # the official admin's submission, validated by ours
        assert start.status is S.SUBMITTED and stats["claimed"] == 1
    elif state == "scheduled":  # our start sends it back to Submitted for revalidation
        assert start.status is S.SUBMITTED and start.worker is None and stats["claimed"] == 1
    elif state.startswith("running"):
        # Left alone at our start (its worker may be alive), reclaimed only once its heartbeat
        # is older than our timeout, then resumed: every range keeps the official outputs.
        assert start.status is S.RUNNING and start.worker.worker_id == official_worker
        assert len(job.ctx.subcompactions) > 1, "the official worker ran the job in one range"
        ticks = got["reclaim_ticks"]
        assert ticks and ticks[-1][1] is S.SCHEDULED and ticks[-1][0] > got["timeout_ms"], ticks
        assert all(status is S.RUNNING for age, status in ticks[:-1]), ticks
        if state == "running-live":
            assert ticks[0][0] <= got["timeout_ms"] and len(ticks) > 1, f"never seen live: {ticks}"
        else:
            assert len(ticks) == 1, ticks
        assert stats["reclaimed"] == 1 and stats["claimed"] == 1
        ours = [o.id for o in final.output_ssts]
        kept = [o.id for sub in job.ctx.subcompactions for o in sub.output_ssts]
        assert [i for i in ours if i in set(kept)] == kept, "the official outputs were not all kept, in range order"
        for sub in job.ctx.subcompactions:  # each range restarts right after its recorded outputs
            ids = [o.id for o in sub.output_ssts]
            if ids:
                at = ours.index(ids[0])
                assert ours[at:at + len(ids)] == ids, "a range's recorded outputs are not contiguous"
        assert len(ours) > len(kept)
    else:  # Compacted: ours commits the official worker's outputs as they are
        assert start.status is S.COMPACTED and stats["claimed"] == 0
        assert [o.id for o in final.output_ssts] == [o.id for o in job.output_ssts]

    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
    assert_official_sees(official, tmp_path, set(expected) | {b"lc%05d" % i for i in range(1000)}, expected, "both")
    # Every .compactions file of the history decodes, by our admin API and by the official one.
    files = sorted((tmp_path / "db" / "compactions").glob("*.compactions"))
    ours_listed, ours_latest = trio.run(_read_ours, url_of(tmp_path))
    assert [s.id for s in ours_listed] == [int(p.name.split(".")[0]) for p in files]
    assert ours_latest.id == ours_listed[-1].id and ours_latest.find(job.id).status is S.COMPLETED
    listed = official.run_json(OFFICIAL_LIST, str(tmp_path))
    assert len(listed) == len(files) and any("COMPLETED" in s for s in listed[-1]["statuses"])


async def _read_ours(url: str):
    """Our admin API: every ``.compactions`` file, and the latest."""
    store = resolve_store(url)
    try:
        return await admin.list_compactions(store), await admin.read_compactions(store)
    finally:
        await store.aclose()


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_ours_coordinates_a_live_official_worker(official, tmp_path: Path) -> None:
    """Running with a live heartbeat, and the worker really alive: the official writer is
    stopped (SIGSTOP, not killed) while its worker holds the job with progress recorded; ours
    starts (a new compactor epoch: the official coordinator, 60 s from its next tick, is fenced)
    and leaves the job alone; the official process runs on, its worker heartbeats and writes
    Compacted under our epoch (workers keep the file's epoch), and ours commits those outputs,
    manifest first. Our worker never claims the job; nothing is reclaimed."""
    expected = _fill_big(tmp_path)
    kept: list[OfficialWriter] = []
    job = _stop_official_at(official, tmp_path, "running-live", keep=kept)
    (w,) = kept
    try:
        got = trio.run(_ours_takes_over, url_of(tmp_path), "live-worker", job, w.resume)
    finally:
        w.kill()
    start, first, final, stats = got["after_start"], got["after_first_tick"], got["final"], got["stats"]
    for c in (start, first):  # left alone: its heartbeat is younger than our timeout
        assert c.status is S.RUNNING and c.worker.worker_id == job.worker.worker_id, c
    assert final is not None and final.status is S.COMPLETED, final
    assert final.worker is not None and final.worker.worker_id == job.worker.worker_id  # the official result
    assert stats["reclaimed"] == 0 and stats["claimed"] == 0 and stats["completed"] == 1, stats
    assert all(status is S.RUNNING for _, status in got["reclaim_ticks"]), got["reclaim_ticks"]
    assert got["completed_with_outputs_in_manifest"] is True, "COMPACT-2: .compactions Completed before the manifest"
    kept_ids = [o.id for sub in job.ctx.subcompactions for o in sub.output_ssts]
    assert [i for i in (o.id for o in final.output_ssts) if i in set(kept_ids)] == kept_ids  # its recorded progress
    m = latest_manifest(tmp_path)
    assert not m.l0 and [v.sst_id for v in m.compacted[0].ssts] == [o.id for o in final.output_ssts]
    with slatedb.Db.open(url_of(tmp_path), settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
    assert_official_sees(official, tmp_path, set(expected), expected, "both")


# ---------------------------------------------------------------------------------------------
# An empty job (no output SST) whose commit landed before its coordinator stopped (COMPACT-10)
# ---------------------------------------------------------------------------------------------


def _fill_tombstones_under_puts(root: Path) -> tuple[dict[bytes, bytes], tuple[str, ...]]:
    """L0 SSTs of tombstones only (no sorted run below: an L0-only job over them drops every row)
    under L0 SSTs of puts; returns the expected contents (the puts) and the tombstone L0 views
    (newest first)."""
    with slatedb.Db.open(url_of(root), settings=NO_COMPACTOR) as db:
        for f in range(3):
            for i in range(f, 300, 3):
                db.delete(b"gone%04d" % i)
            db.flush(wal=False)
    tombstones = tuple(str(v.id) for v in latest_manifest(root).l0)
    with slatedb.Db.open(url_of(root), settings=NO_COMPACTOR) as db:
        for i in range(100):
            db.put(b"kept%04d" % i, b"v%d" % i)
        db.flush(wal=False)
    assert len(tombstones) >= 2 and len(latest_manifest(root).l0) > len(tombstones)
    return {b"kept%04d" % i: b"v%d" % i for i in range(100)}, tombstones


async def _empty_job_committed_then_stopped(url: str, views: tuple[str, ...]) -> str:
    """Our coordinator and worker run ``[the tombstone L0 views] -> 0`` (no output) and stop right
    after its manifest commit lands, before ``.compactions`` says Completed; returns the job id."""
    from slatedb.compactor.spec import CompactionSpec, L0Source
    from slatedb.manifest.edits import ApplyCompaction
    from ulid import ULID

    store = resolve_store(url)
    rt = ProductionRuntime("ours")
    try:
        c = Compactor(store, rt, OURS)
        job = await submit_compaction(store, rt, CompactionSpec(tuple(L0Source(ULID.from_str(v)) for v in views), 0))
        inner = c.manifests.commit
        with trio.CancelScope() as scope:
            async def commit(edit, **kw):
                got = await inner(edit, **kw)
                if isinstance(edit, ApplyCompaction):
                    scope.cancel()  # the stop: nothing after the manifest write runs
                    await trio.sleep(0)
                return got
            c.manifests.commit = commit  # type: ignore[method-assign]
            await c.run_until_idle()
        assert scope.cancelled_caught
        return str(job.id)
    finally:
        await store.aclose()


@pytest.mark.check_allows("CKPT-3", reason=ORPHAN_WRITER_CHECKPOINT)
def test_an_empty_job_committed_before_a_stop_reads_fine_in_both_engines(official, tmp_path: Path) -> None:
    """COMPACT-10 for a job with no output: its commit (sources removed, nothing added) landed,
    then our coordinator stopped with the job Compacted. The official 0.17 reader and writer read
    the database as it is; the official compactor taking over records the job Failed (its
    validation finds the sources gone: the "harmless" failure of its protocol), ours records it
    Completed (its commit recognised by the sources gone and ``last_compacted_l0_sst_view_id``),
    and the official admin decodes the history either way."""
    expected, tombstones = _fill_tombstones_under_puts(tmp_path)
    keys = set(expected) | {b"gone%04d" % i for i in range(300)}
    n_l0 = len(latest_manifest(tmp_path).l0)
    jid = trio.run(_empty_job_committed_then_stopped, url_of(tmp_path), tombstones)
    m = latest_manifest(tmp_path)
    assert len(m.l0) == n_l0 - len(tombstones) and not m.compacted  # the commit landed: the tombstones are gone
    assert not {str(v.id) for v in m.l0} & set(tombstones)
    cs = trio.run(_read_ours, url_of(tmp_path))[1]
    assert [(str(c.id), c.status, c.output_ssts) for c in cs.compactions.recent_compactions] == [(jid, S.COMPACTED, ())]
    assert_official_sees(official, tmp_path, keys, expected, "reader")
    shutil.copytree(tmp_path / "db", tmp_path / "copy" / "db")

    # The official compactor takes over: Failed, nothing else changes.
    got = official.run_json(OFFICIAL_TAKES_OVER, str(tmp_path), "10", json.dumps(OFFICIAL_SETTINGS), timeout_s=240)
    assert {j["id"]: j["status"] for j in got["jobs"]}.get(jid, "").endswith("FAILED"), got
    assert_official_sees(official, tmp_path, keys, expected, "both")

    # Ours takes over (the copy): Completed, no manifest commit, no failure reason.
    copy = tmp_path / "copy"

    async def ours():
        store = resolve_store(url_of(copy))
        try:
            c = Compactor(store, ProductionRuntime("ours"), OURS)
            await c.run_until_idle()
            return c.stats
        finally:
            await store.aclose()

    before = latest_manifest(copy)
    stats = trio.run(ours)
    assert stats["completed"] == 1 and stats["failed"] == 0, stats
    after = latest_manifest(copy)
    assert after.l0 == before.l0 and after.compacted == before.compacted
    assert not (copy / "db" / "compactions" / "failed").exists() or not list((copy / "db" / "compactions" / "failed").iterdir())
    listed = official.run_json(OFFICIAL_LIST, str(copy))
    assert "COMPLETED" in listed[-1]["statuses"][-1], listed
    assert_official_sees(official, copy, keys, expected, "both")
    with slatedb.Db.open(url_of(copy), settings=NO_COMPACTOR) as db:
        assert dict(db.scan()) == expected
