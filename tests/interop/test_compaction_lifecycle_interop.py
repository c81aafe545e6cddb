"""The official coordinator/worker lifecycle across engines (issue 24 item 3): our compactor
stopped at each state (Submitted, Scheduled, Running with a stale and with a live heartbeat,
Compacted) and the official 0.17 compactor taking over; a job the official admin submitted and
ours taking over. Rows exact through both engines; ``Admin.read_compactions`` decodes every
``.compactions`` file we wrote along the way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

import slatedb
from slatedb.compactor import Compactor, full_spec, submit_compaction
from slatedb.compactor import lifecycle as lc
from slatedb.compactor.store import CompactionsStore
from slatedb.compactor.worker import Worker
from slatedb.config import Settings
from slatedb.format.types import CompactionStatus, WorkerSpec
from slatedb.manifest.store import ManifestStore
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime

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
