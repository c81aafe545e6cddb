"""The union route of a bulk load without Spark (slatedb/spark/sharded.py; docs/spark.md
"Sharded loads"): shard databases per key range with the WAL off, united into one new
database; refusals leave nothing the union references; re-running after a driver died during
the union is safe; the shards are collected once the result no longer uses them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

import slatedb
import slatedb.spark
from slatedb.format.sst import SstOptions
from slatedb.gc import run_gc
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from slatedb.spark.io import run_io
from slatedb.spark.load import DuplicateKeyError, LoadRefusedError
from slatedb.spark.sharded import (
    SHARD_SEQ,
    SHARDS_DIR,
    abort_sharded,
    begin_sharded,
    collect_shards,
    commit_sharded,
    stage_shard,
)
from tests.gc.helpers import gc_options

SMALL = SstOptions(block_size_bytes=512)


def url_of(tmp_path: Path) -> str:
    return f"file://{tmp_path}/db"


def latest(url: str):
    return run_io(url, None, lambda s, rt: ManifestStore(s, rt).read_latest())


def shard_roots(tmp_path: Path) -> set[str]:
    base = tmp_path / "db" / "shards"
    return {str(p.relative_to(base)) for p in base.glob("*/*") 
            if any(f.is_file() and ".slatedb-locks" not in f.parts for f in p.rglob("*"))}


def begin(url: str):
    return run_io(url, None, begin_sharded)


def stage(url: str, plan, partition: int, rows: dict[bytes, bytes], attempt: int = 0):
    keys = sorted(rows)
    return run_io(url, None, lambda s, rt: stage_shard(s, rt, plan, partition, attempt, keys, [rows[k] for k in keys],
                                                       sst_options=SMALL, sst_size_bytes=2048))


def commit(url: str, plan, results, collect: bool = True):
    async def go(s, rt):
        try:
            done = await commit_sharded(s, rt, plan, results)
        except BaseException:
            await abort_sharded(s, rt, plan)
            raise
        if collect:
            await collect_shards(s, rt, min_age_s=0)
        return done

    return run_io(url, None, go)


def rows_of(prefix: bytes, n: int, tag: bytes = b"v") -> dict[bytes, bytes]:
    return {prefix + b"%05d" % i: tag + b"-%d-" % i + b"x" * 20 for i in range(n)}


def scan(url: str) -> dict[bytes, bytes]:
    with slatedb.DbReader.open(url) as r:
        return dict(r.scan())


def test_shards_unite_into_one_sorted_run_and_a_retried_attempts_shard_is_collected(tmp_path) -> None:
    """LOAD-8: the result names exactly the committed attempts' shards."""
    url = url_of(tmp_path)
    plan = begin(url)
    a, b, c = rows_of(b"a", 200), rows_of(b"b", 200), rows_of(b"c", 200)
    lost = stage(url, plan, 1, b, attempt=0)  # finished, but its task was retried
    results = [stage(url, plan, 0, a), stage(url, plan, 1, b, attempt=1), stage(url, plan, 2, c),
               stage(url, plan, 3, {})]  # an empty partition makes no shard
    assert results[3].url is None and lost.url != results[1].url  # attempt-unique shards
    assert (results[3].rows, results[0].rows) == (0, 200)  # the empty partition's result says so
    assert latest(url) is None  # nothing at the destination until the commit
    out = commit(url, plan, results)
    assert (out.shards, out.rows) == (3, 600)
    m = latest(url).manifest
    assert m.initialized and m.last_l0_seq == SHARD_SEQ and m.l0 == () and m.writer_epoch == 0
    assert len(m.compacted) == 1 and len(m.compacted[0].ssts) == len(m.ssts) > 3  # one run of every shard SST
    assert len(m.external_dbs) == 3 and all(e.path.startswith("db/shards/") for e in m.external_dbs)
    assert scan(url) == {**a, **b, **c}
    assert shard_roots(tmp_path) == {r.url.split("/shards/")[1] for r in results if r.url}  # the lost one is gone
    for r in results[:3]:  # each shard: no WAL, and pinned by the union's final checkpoint
        shard = latest(r.url).manifest
        assert shard.replay_after_wal_id == shard.wal_id_last_seen == 0
        assert [cp.checkpoint_expire_time_s for cp in shard.checkpoints] == [0]
        assert not (Path(r.url[len("file://"):]) / "wal").exists()
    with slatedb.Db.open(url) as db:  # later writes shadow loaded rows, anywhere in the key space
        db.put(b"a00001", b"later")
        db.put(b"zzz", b"outside every shard")
    got = scan(url)
    assert got[b"a00001"] == b"later" and got[b"zzz"] == b"outside every shard"
    with pytest.raises(LoadRefusedError, match="a database exists"):
        begin(url)


def test_refused_unions_and_failed_attempts_leave_nothing_and_a_rerun_works(tmp_path) -> None:
    """LOAD-8: a refused sharded load makes nothing initialized and leaves no shard; a rival
    load planned alongside the winner is refused."""
    url = url_of(tmp_path)
    plan = begin(url)
    with pytest.raises(DuplicateKeyError):  # a failing attempt deletes its shard
        run_io(url, None, lambda s, rt: stage_shard(s, rt, plan, 0, 0, [b"k", b"k"], [b"1", b"2"],
                                                    sst_options=SMALL, sst_size_bytes=2048))
    assert shard_roots(tmp_path) == set()
    overlapping = [stage(url, plan, 0, {b"a": b"1", b"m": b"1"}), stage(url, plan, 1, {b"c": b"2"})]
    with pytest.raises(LoadRefusedError, match="overlap"):
        commit(url, plan, overlapping)
    assert latest(url) is None and shard_roots(tmp_path) == set()  # abort deleted this load's shards
    with pytest.raises(LoadRefusedError, match="ended"):  # LOAD-10: the refused load's attempts stage nothing
        stage(url, plan, 0, {b"a": b"1"})
    plan = begin(url)
    with pytest.raises(LoadRefusedError, match="no result"):
        commit(url, plan, [stage(url, plan, 0, {b"a": b"1"}), None])
    assert shard_roots(tmp_path) == set()
    plan2, rival = begin(url), begin(url)  # re-running is safe; a rival load planned at the same time
    rival_shards = [stage(url, rival, 0, {b"r": b"rival"})]
    commit(url, plan2, [stage(url, plan2, 0, {b"a": b"1"}), stage(url, plan2, 1, {b"m": b"2"})])
    assert scan(url) == {b"a": b"1", b"m": b"2"}
    with pytest.raises(LoadRefusedError, match="another load created"):
        commit(url, rival, rival_shards, collect=False)
    assert scan(url) == {b"a": b"1", b"m": b"2"} and all(rival.load_id not in r for r in shard_roots(tmp_path))
    empty = f"file://{tmp_path}/empty"
    p = begin(empty)
    assert commit(empty, p, [stage(empty, p, 0, {})]).shards == 0
    assert scan(empty) == {}


def test_a_driver_that_died_during_the_union_is_replaced_by_the_rerun(tmp_path, monkeypatch) -> None:
    """The union wrote the destination's first manifest (uninitialized) and the driver died
    before the final checkpoints: a re-run is refused while the dead load's marker is younger
    than abandoned_after_s (its driver may be uniting it, LOAD-13); once collect_loads ended it,
    a re-run removes it, loads anew, and collects the dead load's shards."""
    from slatedb.projection import create

    url = url_of(tmp_path)
    plan = begin(url)
    res = [stage(url, plan, 0, rows_of(b"a", 50, b"old")), stage(url, plan, 1, rows_of(b"b", 50, b"old"))]

    async def killed(self, m):
        raise KeyboardInterrupt("driver killed")

    monkeypatch.setattr(create._Job, "_ensure_finals", killed)
    with pytest.raises(KeyboardInterrupt):
        run_io(url, None, lambda s, rt: commit_sharded(s, rt, plan, res))  # no abort: the driver is gone
    monkeypatch.undo()
    dead = latest(url).manifest
    assert not dead.initialized and len(dead.external_dbs) == 2
    with pytest.raises(Exception, match="not initialized|uninitialized|initialized"):
        slatedb.Db.open(url).close()
    with pytest.raises(LoadRefusedError, match="is uniting its shards"):
        begin(url)
    assert latest(url).manifest == dead
    import time

    time.sleep(0.01)  # the marker strictly older than abandoned_after_s=0
    assert slatedb.spark.collect_loads(url, abandoned_after_s=0) == [plan.load_id]
    plan2 = begin(url)
    assert latest(url) is None
    new = rows_of(b"a", 30, b"new")
    commit(url, plan2, [stage(url, plan2, 0, new)])
    assert scan(url) == new
    assert all(plan.load_id not in r for r in shard_roots(tmp_path))


class Later(ProductionRuntime):
    def now_ms(self) -> int:
        return super().now_ms() + 86_400_000


class At(ProductionRuntime):
    """The clock stopped at ``ms``."""

    def __init__(self, ms: int) -> None:
        super().__init__("test")
        self.ms = ms

    def now_ms(self) -> int:
        return self.ms


def test_shards_stay_while_referenced_and_are_collected_after_compaction_and_gc_detach(tmp_path) -> None:
    """LOAD-9: referenced shards stay; detached ones go only once min_age_s has passed."""
    from slatedb import admin
    from slatedb.objstore import resolve_store

    url = url_of(tmp_path)
    plan = begin(url)
    data = {**rows_of(b"a", 100), **rows_of(b"b", 100)}
    results = [stage(url, plan, 0, rows_of(b"a", 100)), stage(url, plan, 1, rows_of(b"b", 100))]
    commit(url, plan, results)
    assert run_io(url, None, lambda s, rt: collect_shards(s, rt, min_age_s=0)) == []  # referenced
    assert len(shard_roots(tmp_path)) == 2

    async def compact_and_gc() -> None:
        store = resolve_store(url)
        await admin.submit_compaction(store, "Full")
        await admin.run_compactor(store, once=True)
        # a GC a day later: the compactor's checkpoints on the manifests it read have expired
        await run_gc(store, Later(), gc_options(min_age_s=0.0), True)
        await store.aclose()

    trio.run(compact_and_gc)
    m = latest(url).manifest
    assert m.external_dbs == () and scan(url) == data  # detached: the rows live in the union's own SSTs
    assert run_io(url, None, lambda s, rt: collect_shards(s, rt)) == []  # younger than min_age_s

    async def at_the_boundary(s, rt):
        """min_age_s is measured in ms from each shard's newest manifest: one ms short keeps them
        all (`sim mutate` seed 14: a threshold of min_age_s * 1001 ms survived). Left out, it is
        300 s (docs/spark.md; `sim mutate` seed 21: a default of 299 s survived)."""
        newest: dict[str, int] = {}
        for m in await s.list(SHARDS_DIR):
            if "/manifest/" in m.key:
                root = m.key.split("/manifest/")[0]
                newest[root] = max(newest.get(root, 0), m.last_modified_ms)
        assert len(newest) == 2
        assert await collect_shards(s, At(min(newest.values()) + 299_999)) == []  # the default, 300 s
        assert await collect_shards(s, At(min(newest.values()) + 59_999), min_age_s=60) == []
        return await collect_shards(s, At(max(newest.values()) + 60_000), min_age_s=60)

    got = run_io(url, None, at_the_boundary)
    assert sorted(got) == sorted(r.url for r in results)
    assert shard_roots(tmp_path) == set() and scan(url) == data
    assert sorted(p.name for p in (tmp_path / "db").iterdir()
                  if not p.name.startswith(".") and any(f.is_file() for f in p.rglob("*"))) == [
        "compacted", "compactions", "gc", "manifest"]  # no object left under bulk-load/ or shards/


def test_an_abort_after_the_union_was_made_deletes_the_shards_it_does_not_name(tmp_path, monkeypatch) -> None:
    """LOAD-10 (load seeds 2045, 2275): the driver died right after the union's first manifest
    landed; its abort leaves the shards that manifest names (the next begin removes the dead
    union with them, S1) but deletes a losing attempt's shard nobody names, which nothing
    else would ever collect (collect_shards refuses while the destination is uninitialized)."""
    from slatedb.projection import create

    url = url_of(tmp_path)
    plan = begin(url)
    lost = stage(url, plan, 0, rows_of(b"a", 50), attempt=0)  # a speculative attempt that lost
    res = [stage(url, plan, 0, rows_of(b"a", 50), attempt=1), stage(url, plan, 1, rows_of(b"b", 50))]

    async def killed(self, m):
        raise KeyboardInterrupt("driver killed")

    monkeypatch.setattr(create._Job, "_ensure_finals", killed)
    with pytest.raises(KeyboardInterrupt):
        run_io(url, None, lambda s, rt: commit_sharded(s, rt, plan, res))
    monkeypatch.undo()
    named = {e.path for e in latest(url).manifest.external_dbs}
    assert len(named) == 2 and not latest(url).manifest.initialized
    run_io(url, None, lambda s, rt: abort_sharded(s, rt, plan))
    left = shard_roots(tmp_path)
    assert len(left) == 2 and all(any(r in p for p in named) for r in left), (left, named)
    assert not any(lost.url.rstrip("/").endswith(r) for r in left), (lost.url, left)


@pytest.mark.parametrize("soft", [True, False], ids=["soft-then-gc", "hard"])
@pytest.mark.parametrize("cloned", [False, True], ids=["alone", "cloned"])
def test_a_destroy_of_the_union_deletes_its_shards_unless_a_clone_pins_them(tmp_path, soft: bool, cloned: bool) -> None:
    """destroy.md H4/S5, LOAD-9: a destroy of a sharded load's result deletes its shard databases
    with it (GC's S5 left them for ever: it did not list ``shards/``); but a clone of the union
    pins every shard it names, and once it detached from the union (its entry held no SST) those
    pins were all that kept its rows: a destroy that deleted the shards left the clone reading
    missing SSTs. A pinned shard stays, the rest of the database goes."""
    from slatedb import admin
    from slatedb.gc import GarbageCollector
    from slatedb.objstore import resolve_store

    url, clone = url_of(tmp_path), f"file://{tmp_path}/clone"
    plan = begin(url)
    data = {**rows_of(b"a", 50), **rows_of(b"b", 50)}
    commit(url, plan, [stage(url, plan, 0, rows_of(b"a", 50)), stage(url, plan, 1, rows_of(b"b", 50))])
    if cloned:
        trio.run(lambda: admin.create_clone(clone, url))

        async def gc_clone() -> None:  # detaches the union: the clone's entry for it holds no SST
            store = resolve_store(clone)
            await run_gc(store, Later(), gc_options(min_age_s=0.0), True)
            await store.aclose()

        trio.run(gc_clone)
        assert all("/shards/" in e.path for e in latest(clone).manifest.external_dbs)

    async def destroy() -> None:
        store = resolve_store(url)
        try:
            # hard: a day later, once the union's own checkpoints (the compactor's) expired; soft:
            # now, and GC a day later, past the grace period
            await admin.destroy(store, soft, None if soft else Later())
            if soft:
                gc = GarbageCollector(store, Later(), db_delete_grace_s=60.0)
                await gc.run_once()
                assert gc.finished
        finally:
            await store.aclose()

    trio.run(destroy)
    assert latest(url) is None
    left = {str(p.relative_to(tmp_path / "db")) for p in (tmp_path / "db").rglob("*")
            if p.is_file() and ".slatedb-locks" not in p.parts}
    if cloned:
        assert scan(clone) == data
        assert left and all(k.startswith("shards/") for k in left), left
        assert len(shard_roots(tmp_path)) == 2
    else:
        assert left == set()


def _destroyed_union_with_a_cloned_shard(tmp_path: Path) -> tuple[str, str, dict[bytes, bytes]]:
    """A sharded load's union, cloned (the clone detached from the union: only its pins on the
    shards keep its rows), then hard-destroyed: the shards stay under the destroyed path."""
    from slatedb import admin
    from slatedb.objstore import resolve_store

    url, clone = url_of(tmp_path), f"file://{tmp_path}/clone"
    plan = begin(url)
    data = {**rows_of(b"a", 50), **rows_of(b"b", 50)}
    commit(url, plan, [stage(url, plan, 0, rows_of(b"a", 50)), stage(url, plan, 1, rows_of(b"b", 50))])
    trio.run(lambda: admin.create_clone(clone, url))

    async def gc_then_destroy() -> None:
        store = resolve_store(clone)
        await run_gc(store, Later(), gc_options(min_age_s=0.0), True)
        await store.aclose()
        store = resolve_store(url)
        await admin.destroy(store, False, Later())
        await store.aclose()

    trio.run(gc_then_destroy)
    assert latest(url) is None and len(shard_roots(tmp_path)) == 2
    return url, clone, data


@pytest.mark.parametrize("how", ["collect_loads", "next_sharded_load"])
def test_a_shard_kept_for_a_clone_survives_the_clean_up_of_ended_loads(tmp_path, how: str) -> None:
    """LOAD-9: the shards a destroy kept because a clone pins them belong to an ended load (no
    open marker) at a path with no database: the clean-up of ended loads (``collect_loads``, and
    every sharded load's begin) deleted them, and the clone's next read met missing SSTs."""
    from slatedb.spark import collect_loads

    url, clone, data = _destroyed_union_with_a_cloned_shard(tmp_path)
    if how == "collect_loads":
        collect_loads(url)
    else:
        plan = begin(url)
        commit(url, plan, [stage(url, plan, 0, rows_of(b"c", 10))])
        assert scan(url) == rows_of(b"c", 10)
    assert len(shard_roots(tmp_path)) >= 2
    assert scan(clone) == data


@pytest.mark.parametrize("how", ["destroy_again", "collect_loads"])
def test_a_kept_shard_goes_once_its_clone_let_go(tmp_path, how: str) -> None:
    """destroy.md "Shards another database still reads": once the clone is destroyed (its final
    checkpoints on the shards released), a re-run of the hard destroy, or ``collect_loads``,
    removes the kept shards: the path is empty again (before, H1 refused the path for ever:
    objects of the layout but no manifest)."""
    from slatedb import admin
    from slatedb.objstore import resolve_store
    from slatedb.spark import collect_loads

    url, clone, _ = _destroyed_union_with_a_cloned_shard(tmp_path)

    class Recorded(Later):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[dict] = []

        def event(self, kind, **fields):
            if kind == "destroy":
                self.steps.append(fields)

    async def destroy(u: str, rt: ProductionRuntime) -> None:
        store = resolve_store(u)
        try:
            await admin.destroy(store, False, rt)
        finally:
            await store.aclose()

    trio.run(destroy, clone, Later())
    if how == "destroy_again":
        rt = Recorded()
        trio.run(destroy, url, rt)
        # the re-run is a hard destroy throughout: each shard removed, then the path done
        assert [(s["destroy_step"], s["soft"]) for s in rt.steps] == [("shard_removed", False)] * 2 + [("already", False)]
        assert all(s["objects"] > 0 for s in rt.steps[:2]) and len({s["root"] for s in rt.steps[:2]}) == 2
    else:
        collect_loads(url)
    left = {str(p.relative_to(tmp_path / "db")) for p in (tmp_path / "db").rglob("*")
            if p.is_file() and ".slatedb-locks" not in p.parts}
    assert left == set(), left


def test_a_re_run_destroy_removes_every_released_shard_past_one_still_pinned(tmp_path) -> None:
    """destroy.md "Shards another database still reads": a re-run of the hard destroy goes
    through every kept shard: one still pinned stays, each released one goes, whatever their
    order (`sim mutate` seed 20: a ``break`` for the pinned shard's ``continue``, which left every
    shard after it in place, survived: the tests released all pins or none)."""
    from slatedb import admin
    from slatedb.manifest.edits import DeleteCheckpoint
    from slatedb.objstore import resolve_store

    url, _clone, _ = _destroyed_union_with_a_cloned_shard(tmp_path)
    first, second = sorted(shard_roots(tmp_path))
    # The clone lets go of the second shard only (its final checkpoint there deleted by hand).
    second_url = f"{url}/{SHARDS_DIR}{second}"
    (pin,) = latest(second_url).manifest.checkpoints
    run_io(second_url, None, lambda s, rt: ManifestStore(s, rt).commit(DeleteCheckpoint(pin.id)))
    assert latest(second_url).manifest.checkpoints == ()
    steps: list[dict] = []

    class Recorded(Later):
        def event(self, kind, **fields):
            if kind == "destroy":
                steps.append(fields)

    async def destroy() -> None:
        store = resolve_store(url)
        try:
            await admin.destroy(store, False, Recorded("destroy"))
        finally:
            await store.aclose()

    trio.run(destroy)
    assert [(s["destroy_step"], s["soft"]) for s in steps] == [("shard_removed", False), ("already", False)], steps
    assert steps[0]["root"] == f"{SHARDS_DIR}{second}" and steps[0]["objects"] > 0
    assert shard_roots(tmp_path) == {first}
    # The clone named the removed shard (its pin there was dropped by hand, not by letting go):
    # it is only the prop that pinned the first one, so it goes too.
    shutil.rmtree(tmp_path / "clone")


@pytest.mark.parametrize("switch", [False, True], ids=["fixed", "switch"])
def test_a_union_being_made_is_not_taken_for_a_dead_drivers_leftover(tmp_path, switch: bool) -> None:
    """LOAD-13: a sharded load's union had written the destination's first manifest
    (uninitialized, naming its shards) when a second sharded load began at the same URL. Its
    begin took the union for a dead driver's leftover and destroyed it with every shard: the
    first load, whose driver was alive and uniting, failed (InvalidDbStateError: no database at
    its shard) and its rows were gone. Now the begin is refused while the union's load marker is
    younger than abandoned_after_s, and the first load commits."""
    from slatedb.errors import SlateDBError

    url = url_of(tmp_path)
    data = {**rows_of(b"a", 100), **rows_of(b"b", 100)}

    class PausedAfterFirstManifest:
        def __init__(self, inner) -> None:
            self.inner, self.url, self.go, self.paused, self.done = inner, inner.url, trio.Event(), trio.Event(), False

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def put(self, key, data, mode=None):
            out = await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))
            if not self.done and key.startswith("manifest/"):
                self.done = True
                self.paused.set()
                await self.go.wait()
            return out

        def open_url(self, url):
            return self.inner.open_url(url)

        async def aclose(self):
            pass

    plan = begin(url)
    results = [stage(url, plan, 0, rows_of(b"a", 100)), stage(url, plan, 1, rows_of(b"b", 100))]
    outcome: dict = {}

    async def race(store, rt):
        if switch:  # catalogued sharded-begin-takes-live-union: S1 as before LOAD-13
            from slatedb.runtime import switches
            rt.bugs = frozenset({switches.SHARDED_BEGIN_TAKES_LIVE_UNION})
        paused = PausedAfterFirstManifest(store)

        async def first() -> None:
            outcome["first"] = await commit_sharded(paused, rt, plan, results)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await paused.paused.wait()
            assert not (await ManifestStore(store, rt).read_latest()).manifest.initialized  # the union is half made
            try:
                await begin_sharded(store, rt)
            except SlateDBError as e:
                outcome["second"] = e
            paused.go.set()

    if switch:  # the second begin destroys the live union with its shards: the first load fails
        with pytest.raises(BaseException) as failed:
            run_io(url, None, race)
        assert "second" not in outcome and "first" not in outcome, (outcome, failed.value)
        assert "no database" in str(failed.value) or "InvalidDbState" in repr(failed.value), repr(failed.value)
        return
    run_io(url, None, race)
    assert isinstance(outcome.get("second"), LoadRefusedError), outcome
    assert outcome["first"].rows == 200 and scan(url) == data


def test_the_load_id_of_a_shard_path_is_the_component_after_shards_and_no_other_path_has_one() -> None:
    """LOAD-13's begin checks the marker of every load whose shards an uninitialized union names:
    ``.../shards/<load id>/<shard>``, relative or a URL; any other path names no load (`sim mutate`
    seed 23: the scan reaching index 0 took ``x/shards``'s ``x`` for a load id, unnoticed)."""
    from slatedb.spark.sharded import _shard_load_id

    assert _shard_load_id("db/shards/L1/000000-0-U") == "L1"
    assert _shard_load_id("file:///t/db/shards/L1/000003-1-U/") == "L1"
    assert _shard_load_id("../other/shards/L2/s") == "L2"
    for path in ["db/shards", "x/shards/", "db/shards/L1", "shards/L1", "shards", "db/s/L1/x"]:
        assert _shard_load_id(path) is None, path


def test_a_failed_attempt_deletes_what_it_can_and_raises_its_own_error(tmp_path, monkeypatch) -> None:
    """An attempt that fails deletes its shard (step 2); a delete the store refuses meanwhile is
    left for the clean-up of ended loads (never raised over the attempt's own error, which says
    why it failed: `sim mutate` seed 13 replaced `_delete_under`'s `except` and nothing noticed)."""
    from slatedb.errors import PermanentObjectStoreError
    from slatedb.objstore.local import LocalStore

    url = url_of(tmp_path)
    plan = begin(url)
    real_delete = LocalStore.delete

    async def delete(self, key: str) -> None:
        if key.endswith(".sst"):
            raise PermanentObjectStoreError(key, "delete refused")
        await real_delete(self, key)

    async def create_initial(self, manifest):
        raise RuntimeError("the shard's manifest was not written")

    monkeypatch.setattr(LocalStore, "delete", delete)
    monkeypatch.setattr(ManifestStore, "create_initial", create_initial)
    with pytest.raises(RuntimeError, match="the shard's manifest was not written"):
        stage(url, plan, 0, rows_of(b"a", 200))
    monkeypatch.undo()
    left = [p for p in (tmp_path / "db" / SHARDS_DIR).rglob("*") if p.is_file() and ".slatedb-locks" not in p.parts]
    assert left and all(p.suffix == ".sst" for p in left), left  # the SSTs stay, everything else went
    run_io(url, None, lambda s, rt: abort_sharded(s, rt, plan))  # the load's end takes what the attempt left
    assert not [p for p in (tmp_path / "db" / SHARDS_DIR).rglob("*") if p.is_file() and ".slatedb-locks" not in p.parts]


def test_the_union_closes_the_shard_stores_it_opened(tmp_path, monkeypatch) -> None:
    """commit_sharded opens one store per shard to unite them and closes every one (an S3 store
    holds a connection pool; `sim mutate` seed 13's mutant that never closed them survived)."""
    from slatedb.objstore.local import LocalStore

    url = url_of(tmp_path)
    plan = begin(url)
    results = [stage(url, plan, p, rows_of(b"%d-" % p, 30)) for p in range(3)]
    opened, closed = [], []
    real_open, real_close = LocalStore.open_url, LocalStore.aclose

    def open_url(self, u: str):
        s = real_open(self, u)
        opened.append(s)
        return s

    async def aclose(self) -> None:
        closed.append(self)
        await real_close(self)

    monkeypatch.setattr(LocalStore, "open_url", open_url)
    monkeypatch.setattr(LocalStore, "aclose", aclose)
    commit(url, plan, results, collect=False)
    shard_stores = [s for s in opened if f"/{SHARDS_DIR}" in s.url]
    assert len(shard_stores) >= 3 and all(any(c is s for c in closed) for s in shard_stores)
    assert len(scan(url)) == 90


def test_a_stray_object_beside_the_shards_is_not_taken_for_a_shard(tmp_path) -> None:
    """A shard is ``shards/<load id>/<shard>/...``: an object lying directly under a load's
    directory is no shard, and the clean-up neither reports nor touches it (`sim mutate` seed 15:
    taking keys one level up for shard roots survived)."""
    url = url_of(tmp_path)
    plan = begin(url)
    commit(url, plan, [stage(url, plan, 0, rows_of(b"a", 20))], collect=False)
    stray = tmp_path / "db" / SHARDS_DIR / plan.load_id / "notes.txt"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"not a database")
    assert run_io(url, None, lambda s, rt: collect_shards(s, rt, min_age_s=0)) == []
    assert stray.read_bytes() == b"not a database"


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "unfixed"])
def test_a_union_finished_between_the_begins_read_and_its_marker_check_is_not_destroyed(tmp_path, fixed: bool,
                                                                                       monkeypatch) -> None:
    """LOAD-13: a second sharded load's begin read the union a live driver was making
    (uninitialized) and, before it checked that load's open marker, the first load finished its
    union (initialized) and deleted its marker: the begin found the marker gone, took the union,
    read before it was finished, for a dead driver's leftover, and destroyed the committed
    database with every shard (found by the load scenario's two sharded loads). Now the begin
    reads the latest manifest again after the marker checks and destroys only the union it judged;
    a newer manifest refuses it."""
    from slatedb.errors import SlateDBError
    from slatedb.spark import sharded

    if not fixed:  # the begin as before: no second read after the marker checks
        monkeypatch.setattr(sharded, "_still_latest", lambda manifests, seen: _true())
    url = url_of(tmp_path)
    data = {**rows_of(b"a", 100), **rows_of(b"b", 100)}
    plan = begin(url)
    results = [stage(url, plan, 0, rows_of(b"a", 100)), stage(url, plan, 1, rows_of(b"b", 100))]
    outcome: dict = {}

    class Gate:
        """``inner``; ``put`` of the first manifest / ``head`` of a load marker wait for ``go``."""

        def __init__(self, inner, on: str) -> None:
            self.inner, self.url, self.on = inner, inner.url, on
            self.go, self.reached, self.done = trio.Event(), trio.Event(), False

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def _gate(self) -> None:
            self.done = True
            self.reached.set()
            await self.go.wait()

        async def put(self, key, data, mode=None):
            out = await (self.inner.put(key, data) if mode is None else self.inner.put(key, data, mode))
            if self.on == "put" and not self.done and key.startswith("manifest/"):
                await self._gate()
            return out

        async def head(self, key):
            if self.on == "head" and not self.done and key.endswith("/open"):
                await self._gate()
            return await self.inner.head(key)

        def open_url(self, url):
            return self.inner.open_url(url)

        async def aclose(self):
            pass

    async def race(store, rt):
        first_store, second_store = Gate(store, "put"), Gate(store, "head")

        async def first() -> None:
            outcome["first"] = await commit_sharded(first_store, rt, plan, results)

        async def second() -> None:
            try:
                outcome["second"] = await begin_sharded(second_store, rt)
            except SlateDBError as e:
                outcome["second"] = e

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            await first_store.reached.wait()  # the union's first manifest: uninitialized
            nursery.start_soon(second)
            await second_store.reached.wait()  # the begin read it, and is about to check the marker
            first_store.go.set()
            while "first" not in outcome:
                await trio.sleep(0.01)
            second_store.go.set()

    run_io(url, None, race)
    assert outcome["first"].rows == 200
    if not fixed:  # the committed union destroyed under its load
        assert latest(url) is None, outcome
        return
    assert isinstance(outcome["second"], LoadRefusedError), outcome
    assert scan(url) == data


async def _true() -> bool:
    return True


def test_an_attempt_cancelled_while_it_writes_still_deletes_its_shard(tmp_path, monkeypatch) -> None:
    """Step 2: an attempt cancelled part-way (its task killed, a trio cancel scope) deletes the
    shard it wrote so far, shielded from the cancellation that ended it."""
    url = url_of(tmp_path)
    plan = begin(url)
    rows = rows_of(b"a", 200)
    keys = sorted(rows)
    scope = trio.CancelScope()

    async def create_initial(self, manifest):
        scope.cancel()  # the attempt is cancelled as its manifest is about to be written
        await trio.sleep(0)

    async def go(s, rt):
        with scope:
            await stage_shard(s, rt, plan, 0, 0, keys, [rows[k] for k in keys], sst_options=SMALL,
                              sst_size_bytes=2048)
        return scope.cancelled_caught

    monkeypatch.setattr(ManifestStore, "create_initial", create_initial)
    assert run_io(url, None, go) is True
    monkeypatch.undo()
    assert not [p for p in (tmp_path / "db" / SHARDS_DIR).rglob("*") if p.is_file() and ".slatedb-locks" not in p.parts]


def test_the_clean_up_of_an_ended_load_deletes_its_unpinned_shards_and_keeps_the_pinned_one(tmp_path) -> None:
    """LOAD-10 with LOAD-9: a sharded load that ended before its union (no open marker: its
    driver's clean-up ran no further) left two shard databases, one of them holding another
    database's checkpoint. The clean-up of ended loads keeps the pinned shard and deletes the
    other; it does not keep the whole load because one shard of it is pinned."""
    from slatedb.checkpoint import CheckpointOptions, create_checkpoint
    from slatedb.spark import collect_loads
    from slatedb.spark.load import end_load

    url = url_of(tmp_path)
    plan = begin(url)
    stage(url, plan, 0, rows_of(b"a", 50))
    stage(url, plan, 1, rows_of(b"b", 50))
    run_io(url, None, lambda s, rt: end_load(s, rt, plan.load_id))
    roots = sorted(shard_roots(tmp_path))
    assert len(roots) == 2
    pinned = f"{url}/{SHARDS_DIR}{roots[0]}"
    run_io(pinned, None, lambda s, rt: create_checkpoint(ManifestStore(s, rt), rt, CheckpointOptions(lifetime_s=3600)))
    collect_loads(url)
    assert shard_roots(tmp_path) == {roots[0]}
    with slatedb.DbReader.open(pinned) as r:
        assert dict(r.scan()) == rows_of(b"a", 50)


def test_the_clean_up_of_ended_shards_reports_a_kept_shard_and_only_then(tmp_path) -> None:
    """``collect_ended_shards`` says what it did with an ended load's shards: one still pinned
    is kept (``shard_leftover_kept`` and the ``load.ended-shard-kept`` probe, which tells the
    simulator the LOAD-9 case was reached); once released, the load's shards are collected
    (``shard_leftover_collected``, the load id returned) and the probe stays silent (`sim
    mutate` seed 21: the probe reported when nothing was kept, and not when a shard was, survived)."""
    from slatedb.checkpoint import CheckpointOptions, create_checkpoint, delete_checkpoint
    from slatedb.runtime import probes
    from slatedb.spark.load import end_load
    from slatedb.spark.sharded import collect_ended_shards

    url = url_of(tmp_path)
    plan = begin(url)
    stage(url, plan, 0, rows_of(b"a", 20))
    stage(url, plan, 1, rows_of(b"b", 20))
    run_io(url, None, lambda s, rt: end_load(s, rt, plan.load_id))
    first = f"{url}/{SHARDS_DIR}{sorted(shard_roots(tmp_path))[0]}"
    cp = run_io(first, None, lambda s, rt: create_checkpoint(ManifestStore(s, rt), rt, CheckpointOptions(lifetime_s=3600)))

    class Recorded(ProductionRuntime):
        def __init__(self) -> None:
            super().__init__("test")
            self.probes: list[str] = []
            self.events: list[tuple[str, dict]] = []

        def probe(self, name: str) -> None:
            self.probes.append(name)

        def event(self, kind: str, **fields) -> None:
            if kind.startswith("shard_leftover"):
                self.events.append((kind, fields))

    def clean_up(rt: Recorded) -> list[str]:
        return run_io(url, None, lambda s, _rt: collect_ended_shards(s, rt))

    kept = Recorded()
    assert clean_up(kept) == [] and len(shard_roots(tmp_path)) == 1
    assert kept.probes == [probes.LOAD_ENDED_SHARD_KEPT]
    assert kept.events == [("shard_leftover_kept", {"load_id": plan.load_id, "kept": 1})]
    run_io(first, None, lambda s, rt: delete_checkpoint(ManifestStore(s, rt), rt, cp.id))
    collected = Recorded()
    assert clean_up(collected) == [plan.load_id] and shard_roots(tmp_path) == set()
    assert collected.probes == []
    assert collected.events == [("shard_leftover_collected", {"load_id": plan.load_id})]


def test_an_unreferenced_shard_holding_an_active_checkpoint_stays_until_it_expires(tmp_path) -> None:
    """LOAD-9 in ``collect_shards``: a shard the destination does not reference (a retried
    attempt's) but that holds a checkpoint of another reader is kept while that checkpoint is
    active, whatever ``min_age_s`` says, and collected once it has expired (the clock in seconds
    against the checkpoint's expiry: `sim mutate` seed 22, ``now_ms ^ 1000`` for ``now_ms //
    1000``, which took every checkpoint with an expiry for expired, survived)."""
    from slatedb.checkpoint import CheckpointOptions, create_checkpoint

    url = url_of(tmp_path)
    plan = begin(url)
    lost = stage(url, plan, 0, rows_of(b"a", 20), attempt=0)  # finished, but its task was retried
    commit(url, plan, [stage(url, plan, 0, rows_of(b"a", 20), attempt=1)], collect=False)
    cp = run_io(lost.url, None,
                lambda s, rt: create_checkpoint(ManifestStore(s, rt), rt, CheckpointOptions(lifetime_s=3600)))
    (held,) = [c for c in latest(lost.url).manifest.checkpoints if c.id == cp.id]
    expires_ms = held.checkpoint_expire_time_s * 1000
    assert run_io(url, None, lambda s, rt: collect_shards(s, rt, min_age_s=0)) == []
    assert run_io(url, None, lambda s, _rt: collect_shards(s, At(expires_ms - 1000), min_age_s=0)) == []
    assert lost.url.split("/shards/")[1] in shard_roots(tmp_path)
    assert run_io(url, None, lambda s, _rt: collect_shards(s, At(expires_ms + 1000), min_age_s=0)) == [lost.url]
    assert lost.url.split("/shards/")[1] not in shard_roots(tmp_path)


def test_a_shard_whose_manifests_vanish_under_collect_shards_is_aged_from_the_epoch(tmp_path) -> None:
    """LOAD-10 in ``collect_shards``: a shard's latest manifest was read, then its manifest
    listing came back empty (its attempt is deleting it right now). It has no newest manifest
    to age from: its age counts from Unix time 0, so it goes at once at any real clock, and a
    clock one ms short of ``min_age_s`` after the epoch keeps it (`sim mutate` seed 22: the age
    counted from -1 ms survived)."""
    from slatedb.manifest.store import MANIFEST_DIR

    url = url_of(tmp_path)
    plan = begin(url)
    lost = stage(url, plan, 0, rows_of(b"a", 20), attempt=0)
    commit(url, plan, [stage(url, plan, 0, rows_of(b"a", 20), attempt=1)], collect=False)

    class VanishingManifests:
        """The shard's store: its second listing of ``manifest/`` (collect_shards' own, after
        read_latest's) finds none."""

        def __init__(self, inner) -> None:
            self.inner, self.url, self.listings = inner, inner.url, 0

        def __getattr__(self, name):
            return getattr(self.inner, name)

        async def list(self, prefix, *args, **kwargs):
            out = await self.inner.list(prefix, *args, **kwargs)
            if prefix == MANIFEST_DIR:
                self.listings += 1
                if self.listings > 1:
                    return []
            return out

        async def aclose(self):
            await self.inner.aclose()

    class Destination:
        def __init__(self, inner) -> None:
            self.inner, self.url = inner, inner.url

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def open_url(self, shard_url):
            opened = self.inner.open_url(shard_url)
            return VanishingManifests(opened) if shard_url == lost.url else opened

    def collect(ms: int) -> list[str]:
        return run_io(url, None, lambda s, _rt: collect_shards(Destination(s), At(ms), min_age_s=60))

    assert collect(59_999) == []
    assert lost.url.split("/shards/")[1] in shard_roots(tmp_path)
    assert collect(60_000) == [lost.url]
    assert lost.url.split("/shards/")[1] not in shard_roots(tmp_path)
