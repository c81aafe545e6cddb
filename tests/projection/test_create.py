"""Creating databases from projected and unioned sources (slatedb/projection/create.py) on
memory stores: rows exact, typed errors, no stray checkpoint, resumable after a crash at any
store call, reads and writes on the result, compaction and GC."""

from __future__ import annotations

import uuid

import pytest
import trio

import slatedb
from slatedb.errors import (
    CloneSourceWithWalError,
    DuplicateCloneSourceError,
    IdenticalClonePathsError,
    InvalidProjectionError,
    InvalidUnionError,
    UnionSetEmptyError,
)
from slatedb.manifest.store import ManifestStore
from slatedb.projection import KeyRange
from slatedb.projection.create import SourceSpec, check_request, create_database
from slatedb.runtime.production import ProductionRuntime
from tests.clone.helpers import (
    NO_COMPACTOR,
    Budget,
    Crash,
    CrashingStore,
    bucket,
    contents,
    latest,
    store,
    write,
    write_wal_only,
)


pytestmark = pytest.mark.xdist_group("projection")


def rows(prefix: bytes, n: int, start: int = 0) -> dict[bytes, bytes]:
    return {prefix + b"%03d" % i: b"v-" + prefix + b"%03d" % i for i in range(start, start + n)}


def make(dest: str, *sources: tuple, store_of=store, runtime=None) -> slatedb.format.types.ManifestV2:
    specs = [SourceSpec(store_of(url), cp, rng) for url, cp, rng in sources]

    async def main():
        got = await create_database(store_of(dest), specs, runtime or ProductionRuntime())
        return got.manifest

    return trio.run(main)


def checkpoints(url: str):
    """The checkpoints on ``url`` other than its writer's own (``metadata`` set)."""
    return tuple(c for c in latest(url).manifest.checkpoints if c.metadata is None)


def given_checkpoint(url: str) -> uuid.UUID:
    from slatedb import admin
    from slatedb.checkpoint import CheckpointOptions

    return trio.run(admin.create_checkpoint, store(url), CheckpointOptions(lifetime_s=3600)).id


def world(b: str) -> tuple[str, dict]:
    src = f"{b}/src"
    data = {**rows(b"a", 30), **rows(b"m", 30), **rows(b"x", 30)}
    write(src, dict(list(data.items())[:45]))
    write(src, dict(list(data.items())[45:]))  # two L0 SSTs
    write(src, {b"a005": None, b"m010": b"new"})  # a third, newer, with a delete
    data.pop(b"a005")
    data[b"m010"] = b"new"
    return src, data


def test_split_then_merge_is_the_source_and_checkpoints_are_final_only():
    b = bucket()
    src, data = world(b)
    cuts = [(None, b"m"), (b"m", b"x"), (b"x", None)]
    cp = given_checkpoint(src)
    for i, (lo, hi) in enumerate(cuts):
        m = make(f"{b}/shard{i}", (src, cp if i else None, KeyRange(lo, hi)))
        assert m.initialized and m.writer_epoch >= 1
        assert contents(f"{b}/shard{i}") == {k: v for k, v in data.items() if KeyRange(lo, hi).contains(k)}  # PROJ-1
    # each shard left exactly one (final, no expiry) checkpoint on the source: the ephemeral one is gone
    cps = checkpoints(src)
    assert len(cps) == 4 and sum(c.checkpoint_expire_time_s == 0 for c in cps) == 3
    u = make(f"{b}/merged", *((f"{b}/shard{i}", None, None) for i in (2, 0, 1)))
    assert u.initialized and u.writer_epoch == 0 and u.compactor_epoch == 0
    assert contents(f"{b}/merged") == data  # PROJ-4
    assert u.last_l0_seq == max(latest(f"{b}/shard{i}").manifest.last_l0_seq for i in range(3))  # PROJ-3
    # the shards own no SSTs: one entry per source checkpoint (two shards were made at one)
    assert sorted((e.path, e.source_checkpoint_id == cp) for e in u.external_dbs) == [("src", False), ("src", True)]
    assert len(u.l0) == len(latest(src).manifest.l0)


def test_several_sources_each_projected_in_one_call_and_writes_after_the_union():
    b = bucket()
    one, two = f"{b}/one", f"{b}/two"
    write(one, {**rows(b"a", 10), **rows(b"k", 10)})
    write(two, {**rows(b"a", 10), **rows(b"k", 10)} | {b"k001": b"two"})
    u = make(f"{b}/u", (one, None, KeyRange(None, b"k")), (two, None, KeyRange(b"k", None)))
    expect = {**rows(b"a", 10), **rows(b"k", 10), b"k001": b"two"}
    assert contents(f"{b}/u") == expect
    assert sorted(e.path for e in u.external_dbs) == ["one", "two"]
    with slatedb.Db.open(f"{b}/u", settings=NO_COMPACTOR) as db:  # PROJ-3: new writes win
        db.put(b"a001", b"after")
        db.flush()
    assert contents(f"{b}/u")[b"a001"] == b"after"
    assert contents(one)[b"a001"] == rows(b"a", 10)[b"a001"]


def test_typed_errors_leave_no_checkpoint_on_any_source():
    b = bucket()
    src, _ = world(b)
    other = f"{b}/other"
    write(other, rows(b"a", 5))
    wal = f"{b}/wal"
    write_wal_only(wal, rows(b"z", 3))
    with pytest.raises(UnionSetEmptyError):
        make(f"{b}/d")
    with pytest.raises(DuplicateCloneSourceError):
        make(f"{b}/d", (src, None, None), (src + "/", None, None))
    with pytest.raises(IdenticalClonePathsError):
        make(src, (src, None, KeyRange(b"a", b"b")))
    with pytest.raises(InvalidProjectionError, match="KeyRange, not tuple"):
        make(f"{b}/d", (src, None, (b"a", b"b")))
    # C1 alone (check_request, public: a tool validates a request with it before opening anything).
    with pytest.raises(InvalidProjectionError, match="KeyRange, not tuple"):
        check_request(f"{b}/d", [SourceSpec(store(src), None, (b"a", b"b"))])
    assert check_request(f"{b}/d", [SourceSpec(store(src), None, KeyRange(b"a", b"b"))])[0].key_range == KeyRange(b"a", b"b")
    with pytest.raises(InvalidUnionError, match="overlapping"):
        make(f"{b}/d", (src, None, None), (other, None, None))
    with pytest.raises(CloneSourceWithWalError, match="Projection and/or union with WAL is not supported"):
        make(f"{b}/d", (wal, None, KeyRange(b"z", None)))
    with pytest.raises(CloneSourceWithWalError):
        make(f"{b}/d", (src, None, KeyRange(None, b"m")), (wal, None, KeyRange(b"z", None)))
    for url in (src, other, wal):
        assert checkpoints(url) == (), url
    assert store(f"{b}/d").list_now("") == []


def test_a_refusal_after_pinning_releases_the_checkpoints_it_made():
    """A source that moves between the dry run and the pin (here: the WAL gets a row in
    between) is refused after the ephemeral checkpoints exist; they are deleted."""
    b = bucket()
    src, _ = world(b)
    other = f"{b}/other"
    write(other, rows(b"zz", 5))

    async def main():
        rt = ProductionRuntime()
        specs = [SourceSpec(store(src), None, KeyRange(None, b"m")), SourceSpec(store(other), None, None)]
        from slatedb.projection import create as create_mod

        real_pin = create_mod._Job._pin

        async def pin_then_write(self):
            pins = await real_pin(self)
            await trio.to_thread.run_sync(write_wal_only, other, {b"zz999": b"late"})
            return pins

        create_mod._Job._pin = pin_then_write
        try:
            with pytest.raises(CloneSourceWithWalError):
                await create_database(store(f"{b}/d"), specs, rt)
        finally:
            create_mod._Job._pin = real_pin

    trio.run(main)
    assert checkpoints(src) == () and checkpoints(other) == ()


def test_a_crashed_attempt_leaks_only_an_ephemeral_checkpoint_that_gc_removes():
    b = bucket()
    src, _ = world(b)
    budget = Budget(1, applied=True)  # the ephemeral checkpoint lands, then the process dies
    with pytest.raises(Crash):
        make(f"{b}/d", (src, None, KeyRange(b"m", None)), store_of=lambda url: CrashingStore(store(url), budget))
    cps = checkpoints(src)
    assert len(cps) == 1 and cps[0].checkpoint_expire_time_s > 0

    from tests.projection.test_result import gc

    gc(src, ahead_s=400)  # a GC pass after the ephemeral checkpoint's 300 s
    assert checkpoints(src) == ()


@pytest.mark.parametrize("applied", [False, True], ids=["before-call", "after-call"])
def test_a_crash_at_any_store_call_then_a_rerun_finishes(applied: bool) -> None:
    def setup():
        b = bucket()
        src, other = f"{b}/src", f"{b}/other"
        data = {**rows(b"a", 3), **rows(b"m", 3)}
        write(src, data)
        write(other, rows(b"zz", 2))
        return b, src, other, data

    def run(b, src, other, budget):
        make(f"{b}/d", (src, None, KeyRange(b"m", None)), (other, None, None),
             store_of=lambda url: CrashingStore(store(url), budget))

    b, src, other, data = setup()
    count = Budget(None, applied=applied)
    run(b, src, other, count)
    expected = contents(f"{b}/d")
    assert expected == {**{k: v for k, v in data.items() if k >= b"m"}, **rows(b"zz", 2)}
    total = count.calls
    assert total >= 6, total
    for n in range(total):
        b, src, other, _ = setup()
        with pytest.raises(Crash):
            run(b, src, other, Budget(n, applied=applied))
        run(b, src, other, Budget(None, applied=applied))
        m = latest(f"{b}/d").manifest
        assert m.initialized, n
        assert contents(f"{b}/d") == expected, n
        for url in (src, other):  # one final checkpoint each; at most one leaked ephemeral (expires)
            finals = [c for c in checkpoints(url) if c.checkpoint_expire_time_s == 0]
            assert [c.id for c in finals] == [e.final_checkpoint_id for e in m.external_dbs
                                              if e.path == url.rsplit("/", 1)[1]], (n, url)
            assert len(checkpoints(url)) - len(finals) <= 1


def test_given_checkpoints_are_used_and_checked_on_rerun():
    b = bucket()
    src, data = world(b)
    cp = given_checkpoint(src)
    write(src, {b"a000": b"after-checkpoint"})
    make(f"{b}/d", (src, cp, KeyRange(None, b"m")))
    got = contents(f"{b}/d")
    assert got[b"a000"] == data[b"a000"]
    make(f"{b}/d", (src, cp, KeyRange(None, b"m")))  # idempotent re-run
    from slatedb.clone import CloneMismatchError

    with pytest.raises(CloneMismatchError):
        make(f"{b}/d", (src, uuid.uuid4(), KeyRange(None, b"m")))


def test_an_empty_projection_names_its_source_and_a_rerun_finishes():
    """Sim rescale seed 79: a shard whose range held no SST was created with no ``external_dbs``
    entry (project drops empty ones), so the rescaler's re-run after a crash past C7 met "a
    database exists ... and was not made from other databases". The official wheel keeps the
    source's entry here (sst_ids empty, a final checkpoint) and its re-run succeeds."""
    b = bucket()
    src, _ = world(b)
    m = make(f"{b}/empty", (src, None, KeyRange(b"y", None)))  # no row, no SST at or after y
    assert (m.l0, m.compacted) == ((), ())
    assert [(e.path, e.sst_ids, e.final_checkpoint_id is not None) for e in m.external_dbs] == [("src", (), True)]
    again = make(f"{b}/empty", (src, None, KeyRange(b"y", None)))  # the re-run after a crash past C7
    assert again == latest(f"{b}/empty").manifest and again.initialized
    assert contents(f"{b}/empty") == {}
    finals = [c.id for c in checkpoints(src) if c.checkpoint_expire_time_s == 0]
    assert finals == [m.external_dbs[0].final_checkpoint_id]


def test_a_union_of_sources_contributing_nothing_names_them_all_and_reruns():
    """Better than the official 0.17 wheel, whose re-run of such a union fails with "the cloned
    database is not attached to any external database"."""
    b = bucket()
    one, two = f"{b}/one", f"{b}/two"
    write(one, rows(b"a", 5))
    write(two, rows(b"z", 5))
    spec = ((one, None, KeyRange(b"m", b"n")), (two, None, KeyRange(b"n", b"o")))
    m = make(f"{b}/u", *spec)
    assert sorted((e.path, e.sst_ids) for e in m.external_dbs) == [("one", ()), ("two", ())]
    assert make(f"{b}/u", *spec).initialized
    assert contents(f"{b}/u") == {}


def test_gc_detaches_unused_entries_only_once_the_database_is_initialized():
    """checkpoints-gc.md step 9: an unfinished creation (crashed between C5 and C6) keeps its
    empty entries; detaching them would leak the final checkpoint C6 makes next and leave the
    re-run unable to recognise its own database."""
    from tests.projection.test_result import gc

    b = bucket()
    src, _ = world(b)
    budget = Budget(1, applied=True)  # C4's checkpoint on src, then destination manifest 1 lands: crash
    with pytest.raises(Crash):
        make(f"{b}/d", (src, None, KeyRange(b"y", None)), store_of=lambda url: CrashingStore(store(url), budget))
    assert not latest(f"{b}/d").manifest.initialized
    entries = latest(f"{b}/d").manifest.external_dbs
    assert [e.path for e in entries] == ["src"]
    gc(f"{b}/d", ahead_s=400)
    assert latest(f"{b}/d").manifest.external_dbs == entries  # not detached while unfinished
    m = make(f"{b}/d", (src, None, KeyRange(b"y", None)))  # the re-run finishes
    assert m.initialized and m.external_dbs[0].final_checkpoint_id == entries[0].final_checkpoint_id
    gc(f"{b}/d", ahead_s=400)  # now the unused entry goes, with its final checkpoint on src
    assert latest(f"{b}/d").manifest.external_dbs == ()
    assert [c for c in checkpoints(src) if c.checkpoint_expire_time_s == 0] == []


def test_a_rerun_after_gc_detached_a_finished_empty_result_is_refused():
    """RFC 000 "Clones": a re-run must find its source in the existing manifest's
    ``external_dbs`` ("if not, exit with error"). Once GC has detached the empty entries of a
    finished result (checkpoints-gc.md step 9) nothing tells it from another database, so the
    re-run is refused (docs/rescaling.md); the sim's rescale scenario counts that refusal as a
    finished creation (seed 800, tests/regressions/test_rescale_seeds.py)."""
    from slatedb.clone import CloneMismatchError
    from tests.projection.test_result import gc

    b = bucket()
    src, _ = world(b)
    spec = (src, None, KeyRange(b"y", None))  # no SST at or after y: one empty entry
    assert make(f"{b}/d", spec).initialized
    assert make(f"{b}/d", spec).initialized  # attached: the re-run recognises it
    gc(f"{b}/d", ahead_s=400)
    assert latest(f"{b}/d").manifest.external_dbs == () and latest(f"{b}/d").manifest.initialized
    with pytest.raises(CloneMismatchError, match="not made from other databases"):
        make(f"{b}/d", spec)


def test_one_whole_source_is_a_clone_of_it_at_the_given_checkpoint():
    """One source with no key range is a plain clone (create_database hands it to create_clone
    with that source's checkpoint)."""
    b = bucket()
    src, data = world(b)
    cp = given_checkpoint(src)
    write(src, {b"a001": b"after the checkpoint"})
    m = make(f"{b}/whole", (src, cp, None))
    assert m.initialized and [(e.path, e.source_checkpoint_id) for e in m.external_dbs] == [("src", cp)]
    assert contents(f"{b}/whole") == data


def test_a_clone_of_a_union_pins_each_nested_entry_at_its_own_source_manifest():
    """CLONE-1 for nested entries whose source checkpoint is gone (an ephemeral one): the
    clone's final checkpoint on the grandparent comes from the parent's entry with the *same*
    source checkpoint on the *same* database, not from another entry of that database."""
    b = bucket()
    src, _data = world(b)
    # shard 1 at an ephemeral checkpoint A (deleted once the shard is made) ...
    make(f"{b}/shard1", (src, None, KeyRange(b"m", None)))
    (eph,) = {e.source_checkpoint_id for e in latest(f"{b}/shard1").manifest.external_dbs}
    write(src, {b"a000": b"newer"})  # so the given checkpoint pins a later manifest
    cp = given_checkpoint(src)
    while cp <= eph:  # the given id sorts after A (a ">=" in place of "==" would then match it)
        cp = given_checkpoint(src)
    make(f"{b}/shard0", (src, cp, KeyRange(None, b"m")))
    # ... shard 0 at a given one: the union lists shard 0's entry first (sorted by start key)
    u = make(f"{b}/merged", *((f"{b}/shard{i}", None, None) for i in range(2)))
    by_source = {e.source_checkpoint_id: e for e in u.external_dbs}
    assert set(by_source) == {eph, cp} and u.external_dbs[0].source_checkpoint_id == cp  # cp's entry first
    on_src = {c.id: c for c in latest(src).manifest.checkpoints}
    want = {s: on_src[e.final_checkpoint_id].manifest_id for s, e in by_source.items()}
    assert want[eph] != want[cp]
    child = make(f"{b}/child", (f"{b}/merged", None, None))
    on_src = {c.id: c for c in latest(src).manifest.checkpoints}
    nested = [e for e in child.external_dbs if e.source_checkpoint_id in by_source]
    assert len(nested) == 2
    assert {e.source_checkpoint_id: on_src[e.final_checkpoint_id].manifest_id for e in nested} == want


def test_each_final_checkpoint_is_made_once_from_the_first_source_checkpoint_that_has_it():
    """C6: a union entry's final checkpoint comes from its source checkpoint, else from a source's
    own final checkpoint on that database (the fallbacks); the first candidate that works makes
    it and the rest are not tried (one ``final_checkpoint`` step per entry)."""

    class Recorder(ProductionRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.finals: list[tuple[str, str]] = []

        def event(self, kind, **fields):
            if kind == "union" and fields.get("union_step") == "final_checkpoint":
                self.finals.append((fields["path"], fields["id"]))

    b = bucket()
    src, _data = world(b)
    cp = given_checkpoint(src)  # alive: the first candidate of the src entries works
    make(f"{b}/shard0", (src, cp, KeyRange(None, b"m")))
    make(f"{b}/shard1", (src, cp, KeyRange(b"m", None)))
    rt = Recorder()
    u = make(f"{b}/merged", *((f"{b}/shard{i}", None, None) for i in range(2)), runtime=rt)
    want = sorted((e.path, str(e.final_checkpoint_id)) for e in u.external_dbs if e.final_checkpoint_id is not None)
    assert sorted(rt.finals) == want, rt.finals


def test_create_database_url_closes_every_store_it_opened(monkeypatch):
    """The URL form opens a store for the destination and one per source (``open_url``), and
    closes each of them, the sources too (an S3 source holds connections, a local one maps files)."""
    from slatedb.objstore.base import ObjectStore
    from slatedb.projection.create import CloneSource, create_database_url

    b = bucket()
    opened: list[ObjectStore] = []
    closed: set[int] = set()
    kind = type(store(f"{b}/union"))  # the memory store overrides open_url
    real_open, real_close = kind.open_url, ObjectStore.aclose

    def recording_open(self, url, *args, **kwargs):
        st = real_open(self, url, *args, **kwargs)
        opened.append(st)
        return st

    async def recording_close(self) -> None:
        closed.add(id(self))
        await real_close(self)

    src, data = world(b)
    other = f"{b}/other"
    write(other, rows(b"z", 5))
    monkeypatch.setattr(kind, "open_url", recording_open)
    monkeypatch.setattr(ObjectStore, "aclose", recording_close)
    got = trio.run(create_database_url, f"{b}/union", [CloneSource(src, None, KeyRange(None, b"m")),
                                                       CloneSource(other, None, None)])
    assert {st.url for st in opened} >= {src, other}
    assert [st.url for st in opened if id(st) not in closed] == []
    assert got.manifest.initialized and contents(f"{b}/union") == {
        **{k: v for k, v in data.items() if k < b"m"}, **rows(b"z", 5)}


def test_a_rerun_on_a_finished_union_checks_every_final_checkpoint_past_an_entry_without_one():
    """A re-run on an initialized database checks that each entry's final checkpoint is still
    there (CLONE-1); an entry without one (another engine's, or one GC detached) is skipped,
    not the end of the check."""
    import attrs

    from slatedb.checkpoint import delete_checkpoint
    from slatedb.clone import CloneMismatchError
    from slatedb.format.types import ExternalDb

    b = bucket()
    src, _data = world(b)
    cp = given_checkpoint(src)
    sources = ((src, cp, KeyRange(None, b"m")),)
    make(f"{b}/part", *sources)
    cur = latest(f"{b}/part")
    (entry,) = cur.manifest.external_dbs
    no_final = ExternalDb("elsewhere", uuid.uuid4(), None, ())
    edited = attrs.evolve(cur.manifest, external_dbs=(no_final, entry))
    trio.run(ManifestStore(store(f"{b}/part"), ProductionRuntime()).try_write, cur.id + 1, edited)
    make(f"{b}/part", *sources)  # every final checkpoint there: the re-run is done
    rt = ProductionRuntime()
    trio.run(delete_checkpoint, ManifestStore(store(src), rt), rt, entry.final_checkpoint_id)
    with pytest.raises(CloneMismatchError, match="is gone"):
        make(f"{b}/part", *sources)


def test_an_initialize_another_run_made_first_is_recognised_and_named():
    """C7's commit (``MarkInitialized``) loses its create to another run of the same job that
    initialized the database first: the step says ``initialize_conflict`` with the id of that
    initialized manifest (the one after the manifest C7 was applied to), and the job goes on to
    the finished database."""
    from slatedb.format.manifest import decode_manifest_v2
    from slatedb.objstore.base import OVERWRITE

    class AnotherRunInitializesFirst(CrashingStore):
        def __init__(self, inner) -> None:
            super().__init__(inner, Budget(None, applied=True))
            self.taken: list[str] = []

        async def put(self, key, data, mode=OVERWRITE):
            if key.startswith("manifest/") and not self.taken and decode_manifest_v2(bytes(data), key).initialized:
                self.taken.append(key)
                self.inner.put_now(key, bytes(data))  # the other run's identical create lands first
            return await self.inner.put(key, data, mode)

    class Recorder(ProductionRuntime):
        def __init__(self) -> None:
            super().__init__()
            self.steps: list[dict] = []

        def event(self, kind, **fields):
            if kind == "union":
                self.steps.append(fields)

    b = bucket()
    src, data = world(b)
    dest = AnotherRunInitializesFirst(store(f"{b}/d"))
    rt = Recorder()

    async def main():
        return await create_database(dest, [SourceSpec(store(src), None, KeyRange(None, b"m"))], rt)

    done = trio.run(main)
    assert dest.taken and done.manifest.initialized
    conflicts = [f["manifest"] for f in rt.steps if f["union_step"] == "initialize_conflict"]
    assert conflicts == [int(dest.taken[0].split("/")[1].split(".")[0])] == [done.id]
    # The run's reads count its attempts from 1: the second found the other run's database done.
    reads = [f for f in rt.steps if f["union_step"] == "read"]
    assert [f["attempt"] for f in reads] == [1, 2] and reads[0]["manifest"] is None
    assert contents(f"{b}/d") == {k: v for k, v in data.items() if k < b"m"}
