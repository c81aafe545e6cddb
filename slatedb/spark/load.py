"""Bulk load: SSTs written by many tasks, made visible by one manifest update.

The protocol (spec/protocols/bulk-load.md; ids at the lines):

1. **Begin** (driver, :func:`begin_load`): read the latest manifest and the WAL above its
   replay point (no database: none is made, the commit makes it, LOAD-11); choose the load's
   sequence number ``seq = max(last_l0_seq, highest seq in the WAL) + SEQ_HEADROOM`` and a
   load id; collect what ended and abandoned loads left (:func:`collect_loads`); put the
   load's open marker ``bulk-load/<load id>/open``. Nothing else is written: a live writer
   keeps writing while the job runs (its seqs stay far below ``seq``).
2. **Stage** (each task attempt, :func:`stage_sorted`): rows sorted by key, duplicate keys
   refused (LOAD-2), written as compacted SSTs all carrying ``seq``, each under a fresh ULID
   (attempt-unique: a retried or speculative attempt never overwrites another's files). Before
   each SST, an empty intent object ``bulk-load/<load id>/<partition>-<attempt>-<ulid>`` records
   it, so abort and commit can find every staged SST of every attempt; after it, the open
   marker is checked: gone, the load ended and the attempt deletes its own files (LOAD-10). A
   failing attempt deletes its own SSTs. The task returns the SSTs' handles (id, info, key range).
3. **Commit** (driver, once, :func:`commit_load`): claim the open marker (LOAD-10); check
   duplicate keys across tasks (LOAD-2), check every staged SST exists (LOAD-3); no database
   at begin: write manifest 1 holding the load, create-if-absent (LOAD-11). Else fence any live
   writer exactly as a new writer does
   (writer epoch bump, WAL fence object: LOAD-4); read the WAL below the fence and refuse when
   any seq there, or ``last_l0_seq``, reached ``seq`` (LOAD-5); then **one** manifest update,
   guarded by the load's epoch, adds every staged SST as a new L0 view in front of the older
   ones and raises ``last_l0_seq`` to ``seq`` (LOAD-1: all rows visible, or none). Overwrite
   also drops every older L0 view, sorted run and WAL row (``replay_after_wal_id`` = the fence).
4. **Clean up** (:func:`cleanup_load`, after commit or as abort): delete the open marker, then
   the staged SSTs the latest manifest does not reference (other attempts', or all of them on
   abort: LOAD-6), then the intents.
5. **Collect** (:func:`collect_loads`, at every begin and on demand): clean up loads that
   ended (no marker) and loads whose driver died (an ``open`` marker older than
   ``abandoned_after_s``, claimed first). GC alone would not do: it deletes no SST where there
   is no ``.compactions`` file, and nothing deletes intents.

Later writes shadow loaded rows: the next writer starts its seqs at ``last_l0_seq`` + 1.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Iterable, Sequence

import attrs
import trio
from ulid import ULID

from slatedb.checkpoint import check_writable_state
from slatedb.lsm.view import sst_key
from slatedb.errors import (FencedError, InvalidArgumentError, InvalidDbStateError, ObjectNotFoundError,
                            PreconditionFailedError, SlateDBError)
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import SstWriter, write_sst
from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, SsTableInfo
from slatedb.gc.retention import manifest_sst_ids, newest_l0_ms
from slatedb.spark.load_pins import MANIFEST_CLOCK_MARGIN_MS, named_by_older_manifests
from slatedb.memtable import Memtable
from slatedb.manifest.edit import WriterFence
from slatedb.manifest.edits import BumpWriterEpoch, CommitBulkLoad
from slatedb.manifest.sst_ids import not_before
from slatedb.manifest.missing import LOAD_INTENTS_DIR, intent_sst_id
from slatedb.manifest.segments import refuse_segments
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import OVERWRITE, ObjectMeta, ObjectStore, PutMode
from slatedb.objstore.retry import RetryingReads, retry_transient
from slatedb.row import Row, RowKind
from slatedb.runtime import Runtime, probes, switches
from slatedb.wal.writer import WalWriter, list_wal_ids, replay_wal
from slatedb.redact import shown_url

#: Seqs a live writer may use while a load runs, between the load's begin and its commit.
SEQ_HEADROOM = 2**32
LOAD_DIR = LOAD_INTENTS_DIR  # "bulk-load/"
#: The name of a load's open marker, ``bulk-load/<load id>/open`` (LOAD-10).
OPEN_MARKER = "open"
#: Contents of the open marker: written by begin, claimed by the commit or by a collector.
MARKER_OPEN, MARKER_COMMITTING, MARKER_ABANDONED = b"open", b"committing", b"abandoned"
#: Age of an open marker after which :func:`collect_loads` (run by every load's begin, and on
#: demand) takes its load for abandoned, a driver that died: a day.
DEFAULT_ABANDONED_AFTER_S = 86400.0


class LoadRefusedError(SlateDBError):
    """The commit was refused; nothing was made visible (LOAD-1). The message says why."""


class LoadEndedError(LoadRefusedError):
    """A task attempt found its load ended (committed, aborted or collected as abandoned):
    it deleted what it staged (LOAD-10)."""


class DuplicateKeyError(InvalidArgumentError):
    """A key appears more than once in one load (LOAD-2)."""

    def __init__(self, key: bytes, where: str) -> None:
        super().__init__(f"key {key!r} appears more than once in the load ({where}); "
                         "a load takes each key once: deduplicate the DataFrame first")
        self.key = key


@attrs.frozen
class LoadPlan:
    """What every task of one load shares (pickled to the executors)."""

    load_id: str
    seq: int
    overwrite: bool
    base_manifest_id: int  # 0: there was no database at the URL (the commit creates it)


@attrs.frozen
class StagedSst:
    """A staged SST's handle, returned by a task and recorded by the commit."""

    sst_id: str
    info: SsTableInfo
    format_version: int
    first_key: bytes
    last_key: bytes
    rows: int
    size_bytes: int


@attrs.frozen
class TaskResult:
    partition: int
    attempt: int
    ssts: tuple[StagedSst, ...] = ()

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.ssts)


@attrs.frozen
class CommitResult:
    manifest_id: int | None  # None: nothing to commit (an empty append)
    epoch: int | None
    ssts: int
    rows: int
    seq: int


def intent_prefix(load_id: str) -> str:
    return f"{LOAD_DIR}{load_id}/"


def intent_key(load_id: str, partition: int, attempt: int, sst_id: str) -> str:
    return f"{intent_prefix(load_id)}{partition:06d}-{attempt}-{sst_id}"


def marker_key(load_id: str) -> str:
    return f"{intent_prefix(load_id)}{OPEN_MARKER}"


def _intent_sst(key: str) -> ULID | None:
    """The SST an intent key names (None: not an intent, e.g. the open marker)."""
    text = intent_sst_id(key)
    try:
        return None if text is None else ULID.from_str(text)
    except ValueError:
        return None


async def open_load(store: ObjectStore, rt: Runtime, load_id: str) -> None:
    """Write the load's open marker (begin; LOAD-10)."""
    key = marker_key(load_id)
    await retry_transient(rt, lambda: store.put(key, MARKER_OPEN, OVERWRITE), what=f"put {key}")


async def load_is_open(store: ObjectStore, rt: Runtime, load_id: str) -> bool:
    """Does the load's open marker still exist? (A task attempt asks after each write.)"""
    key = marker_key(load_id)
    try:
        await retry_transient(rt, lambda: store.head(key), what=f"head {key}")
    except ObjectNotFoundError:
        return False
    return True


async def end_load(store: ObjectStore, rt: Runtime, load_id: str) -> None:
    """Delete the load's open marker: from now on every task attempt that writes deletes what
    it wrote (LOAD-10). The first step of clean-up, abort and collection."""
    key = marker_key(load_id)
    await retry_transient(rt, lambda: store.delete(key), what=f"delete {key}")  # an absent key: a success


async def claim_for_commit(store: ObjectStore, rt: Runtime, load_id: str) -> None:
    """LOAD-10: the commit claims the load's open marker (``committing``); a collector that
    took the load for abandoned claimed it first, or it was aborted: :class:`LoadRefusedError`."""
    key = marker_key(load_id)
    try:
        meta = await retry_transient(rt, lambda: store.head(key), what=f"head {key}")
    except ObjectNotFoundError:
        meta = None
    if meta is None or not await _claim(store, rt, load_id, meta, MARKER_COMMITTING):
        raise LoadRefusedError(f"load {load_id} was ended before its commit (aborted, or collected as "
                               "abandoned): nothing committed")


async def _claim(store: ObjectStore, rt: Runtime, load_id: str, meta: ObjectMeta, claim: bytes) -> bool:
    """Replace the open marker ``meta`` (content ``open``) by ``claim`` if nobody changed it
    since: the commit and a collector of abandoned loads both claim, exactly one wins."""
    key = marker_key(load_id)
    try:
        await retry_transient(rt, lambda: store.put(key, claim, PutMode.update_if_match(meta.etag)),
                              what=f"claim {key}")
        return True
    except (PreconditionFailedError, ObjectNotFoundError):
        try:  # an ambiguous first attempt may have landed: then the marker says ``claim``
            got = await retry_transient(rt, lambda: store.get(key), what=f"get {key}")
        except ObjectNotFoundError:
            return False
        return got.data == claim


# ---------------------------------------------------------------------------------------------
# 1. Begin
# ---------------------------------------------------------------------------------------------


async def _wal_max_seq(store: ObjectStore, rt: Runtime, after_id: int, before_id: int | None = None) -> int:
    if before_id is None:
        ids = await list_wal_ids(store, rt)
        before_id = (max(ids) + 1) if ids else after_id + 1
    rows, _count = await replay_wal(store, rt, after_id, before_id, after_seq=0)
    return max((r.seq for r in rows), default=0)


async def begin_load(store: ObjectStore, rt: Runtime, *, overwrite: bool,
                     abandoned_after_s: float = DEFAULT_ABANDONED_AFTER_S) -> LoadPlan:
    """Step 1. No database at the URL: none is made here (the commit makes it, LOAD-11). The
    only object written is the load's open marker; first the leftovers of ended and abandoned
    loads are collected (:func:`collect_loads`)."""
    manifests = ManifestStore(store, rt)
    latest = await manifests.read_latest()
    if latest is not None:
        m = latest.manifest
        check_writable_state(m, "bulk load")
        refuse_segments(m, store.url, "bulk load into it")  # its rows would land outside every segment
        wal_seq = await _wal_max_seq(store, rt, m.replay_after_wal_id)
        last_seq = max(m.last_l0_seq, wal_seq)
    else:
        last_seq = 0
    seq = last_seq + SEQ_HEADROOM
    if seq >= 2**63:
        raise InvalidDbStateError(f"sequence numbers are exhausted (last {last_seq})")
    await collect_loads(store, rt, abandoned_after_s=abandoned_after_s)
    plan = LoadPlan(str(rt.new_ulid()), seq, bool(overwrite), latest.id if latest is not None else 0)
    await open_load(store, rt, plan.load_id)
    rt.event("load_begin", load_id=plan.load_id, seq=seq, manifest_id=plan.base_manifest_id, overwrite=plan.overwrite)
    return plan


# ---------------------------------------------------------------------------------------------
# 2. Stage
# ---------------------------------------------------------------------------------------------


def check_sorted_unique(keys: Sequence[bytes], where: str) -> None:
    """LOAD-2 within one task: keys strictly ascending (after the task sorted them)."""
    for i in range(1, len(keys)):
        if keys[i] <= keys[i - 1]:
            if keys[i] == keys[i - 1]:
                raise DuplicateKeyError(keys[i], where)
            raise InvalidArgumentError(f"keys are not sorted at {keys[i]!r} ({where})")


async def stage_sorted(store: ObjectStore, rt: Runtime, plan: LoadPlan, partition: int, attempt: int,
                       keys: Sequence[bytes], values: Sequence[bytes | None], *, sst_options: SstOptions,
                       sst_size_bytes: int, marker_store: ObjectStore | None = None) -> TaskResult:
    """Write ``keys``/``values`` (sorted, unique; a None value is a delete) as staged SSTs.

    LOAD-10: the load's open marker (in ``marker_store``, default ``store``) is checked before
    the first write and after every SST; once it is gone the load has ended (committed, aborted
    or collected) and the attempt deletes what it wrote and raises :class:`LoadEndedError`."""
    where = f"partition {partition}"
    check_sorted_unique(keys, where)
    markers = store if marker_store is None else marker_store

    async def check_open() -> None:
        if switches.STAGE_IGNORES_LOAD_END in rt.bugs:  # catalogued bug (sim/scenarios/catalogue.py)
            return
        if not await load_is_open(markers, rt, plan.load_id):
            rt.probe(probes.LOAD_STAGE_ENDED)
            rt.event("load_stage_ended", load_id=plan.load_id, partition=partition, attempt=attempt)
            raise LoadEndedError(f"load {plan.load_id} ended (committed, aborted or collected) while partition "
                                 f"{partition} attempt {attempt} staged: its files are deleted")
    staged: list[StagedSst] = []
    written: list[str] = []
    now = rt.now_ms()
    seq = plan.seq

    async def put(key: str, data: bytes, mode: Any) -> None:
        await retry_transient(rt, lambda: store.put(key, data, mode), what=f"put {key}")

    async def flush(writer: SstWriter) -> None:
        encoded = writer.finish()
        sst_id = str(rt.new_ulid())
        intent = intent_key(plan.load_id, partition, attempt, sst_id)
        await put(intent, b"", OVERWRITE)  # first the intent: abort and commit find the SST by it
        written.append(sst_id)
        # OVERWRITE: the id is fresh, nobody else writes it; a create-if-absent retried after a
        # lost reply would find its own object and fail the attempt.
        await put(sst_key(ULID.from_str(sst_id)), encoded.data, OVERWRITE)
        await check_open()  # LOAD-10: after the write, so that an ended load's clean-up or this attempt sees it
        info = encoded.info
        staged.append(StagedSst(sst_id, info, encoded.format_version, info.first_entry or b"",
                                info.last_entry or b"", encoded.num_rows, encoded.size_bytes))
        rt.event("load_stage", load_id=plan.load_id, partition=partition, attempt=attempt, sst=sst_id,
                 rows=encoded.num_rows, size=encoded.size_bytes)

    try:
        await check_open()
        writer = SstWriter(sst_options)
        for key, value in zip(keys, values):
            if value is None:
                writer.add(Row(key, seq, RowKind.TOMBSTONE, b"", None, now))
            else:
                writer.add(Row(key, seq, RowKind.VALUE, value, None, now))
            if writer.estimated_size_bytes() >= sst_size_bytes:
                await flush(writer)
                writer = SstWriter(sst_options)
        if len(writer):
            await flush(writer)
    except BaseException:
        # A failing attempt removes what it staged (a killed one cannot: the load's clean-up,
        # or collect_loads once the load ended, finds its intents).
        with trio.CancelScope(shield=True):
            for sst_id in written:
                try:
                    await store.delete(sst_key(ULID.from_str(sst_id)))
                    await store.delete(intent_key(plan.load_id, partition, attempt, sst_id))
                except Exception:  # noqa: BLE001 - the intent stays: collect_loads deletes both
                    pass
        raise
    return TaskResult(partition, attempt, tuple(staged))


# ---------------------------------------------------------------------------------------------
# 3. Commit
# ---------------------------------------------------------------------------------------------


async def check_no_duplicates_across_tasks(store: ObjectStore, rt: Runtime, results: Sequence[TaskResult]) -> None:
    """LOAD-2 across tasks: SSTs of different tasks whose key ranges overlap are merged and
    checked key by key (nothing to read when the input was range-partitioned)."""
    spans = sorted((s.first_key, s.last_key, r.partition, s.sst_id) for r in results for s in r.ssts)
    groups: list[list[tuple]] = []
    hi: bytes | None = None
    for span in spans:
        if groups and hi is not None and span[0] <= hi:
            groups[-1].append(span)
            hi = max(hi, span[1])
        else:
            groups.append([span])
            hi = span[1]
    for group in groups:
        if len({g[2] for g in group}) < 2:
            continue
        keys: list[tuple[bytes, int]] = []
        for _first, _last, partition, sst_id in group:
            reader = await SstReader.open(RetryingReads(store, rt), sst_key(ULID.from_str(sst_id)))
            keys.extend([(row.key, partition) async for row in reader.scan()])
        keys.sort()
        for (k1, p1), (k2, p2) in zip(keys, keys[1:]):
            if k1 == k2:
                raise DuplicateKeyError(k1, f"partitions {p1} and {p2}")


async def commit_load(store: ObjectStore, rt: Runtime, plan: LoadPlan, results: Sequence[TaskResult | None],
                      *, before_commit: Callable[[], Awaitable[None]] | None = None) -> CommitResult:
    """Steps 3.1-3.5 of the module docstring. Raises :class:`LoadRefusedError` (nothing visible)."""
    if any(r is None for r in results):
        raise LoadRefusedError("a task of the load has no result (it failed): nothing committed")
    done: list[TaskResult] = [r for r in results if r is not None]
    parts = [r.partition for r in done]
    if len(parts) != len(set(parts)):
        raise LoadRefusedError(f"two results for one partition ({sorted(parts)}): nothing committed")
    staged = [s for r in done for s in r.ssts]
    rows = sum(s.rows for s in staged)
    manifests = ManifestStore(store, rt)
    await claim_for_commit(store, rt, plan.load_id)  # LOAD-10
    if not staged and not plan.overwrite and plan.base_manifest_id:
        rt.event("load_commit", load_id=plan.load_id, manifest_id=None, ssts=0, rows=0)
        return CommitResult(None, None, 0, 0, plan.seq)
    await check_no_duplicates_across_tasks(store, rt, done)  # LOAD-2
    for s in staged:  # LOAD-3, before fencing anyone: every staged SST is there
        try:
            await retry_transient(rt, lambda s=s: store.head(sst_key(ULID.from_str(s.sst_id))), what="head staged SST")
        except ObjectNotFoundError:
            raise LoadRefusedError(f"staged SST {s.sst_id} is gone (collected by GC? a load must commit "
                                   "within GC's min_age of staging): nothing committed") from None
    if not plan.base_manifest_id:
        # LOAD-11: no database when the load began. Its first manifest is the committed load,
        # written once (create-if-absent): before it nothing is at the URL, so a failed load
        # leaves no database. Someone made one meanwhile: commit into it as into any other.
        first = ManifestV2(
            initialized=True, writer_epoch=1, last_l0_seq=plan.seq, last_l0_clock_tick=rt.now_ms(),
            ssts=tuple(CompactedSsTableV2(ULID.from_str(s.sst_id), s.info, s.format_version) for s in staged),
            l0=tuple(CompactedSsTableView(rt.new_ulid(), ULID.from_str(s.sst_id), None) for s in staged))
        created = await manifests.create_initial(first)
        if created is not None:
            rt.event("load_commit", load_id=plan.load_id, manifest_id=created.id, ssts=len(staged), rows=rows,
                     seq=plan.seq)
            return CommitResult(created.id, 1, len(staged), rows, plan.seq)
        if not staged and not plan.overwrite:
            rt.event("load_commit", load_id=plan.load_id, manifest_id=None, ssts=0, rows=0)
            return CommitResult(None, None, 0, 0, plan.seq)

    # LOAD-4: fence any live writer as a new writer would (epoch bump, then the WAL fence).
    bumped = await manifests.commit(BumpWriterEpoch(checkpoint_id=rt.new_uuid()))
    epoch = bumped.result
    m0 = bumped.stored.manifest
    try:
        wal = await WalWriter.fence(store=store, runtime=rt, manifests=manifests, epoch=epoch,
                                    floor_id=max(m0.replay_after_wal_id, m0.wal_id_last_seen),
                                    sst_options=SstOptions(min_filter_keys=2**31))
    except FencedError as e:
        raise LoadRefusedError(f"a writer opened while the load committed ({e}): nothing committed") from None
    fence_id = wal.fence_id
    rt.event("load_fenced", load_id=plan.load_id, epoch=epoch, fence=fence_id)
    fenced, listed = await manifests.read_latest_listed()
    if (fenced is None or bumped.stored.id - 1 not in listed) and await wal.outlived_destroy(bumped.stored.id, listed):
        raise LoadRefusedError(f"the database at {shown_url(store.url)} was destroyed while the load committed (its epoch bump "
                               f"landed after the database was removed and is taken back): nothing committed")
    assert fenced is not None
    # LOAD-5: no row below the fence may carry a seq at or above the load's.
    tail_end = fence_id - 1 if switches.LOAD_WAL_TAIL_SHORT in rt.bugs else fence_id
    # DUR-4: rows at or below the fenced manifest's last_l0_seq are in its L0 already (a tail
    # holding them again would sit above what a compaction folded them into).
    tail, _count = await replay_wal(store, rt, m0.replay_after_wal_id, tail_end,
                                    after_seq=fenced.manifest.last_l0_seq)
    wal_seq = max((r.seq for r in tail), default=0)
    made: list[ULID] = []  # SSTs this commit wrote: deleted again if it is refused
    attempted = False  # the manifest update was sent: it may have landed whatever the error says
    try:
        # LOAD-7: the WAL rows below the fence go to L0 in the same update (append), so that
        # last_l0_seq = seq keeps its meaning "every seq up to here is in L0": the official
        # engine's replay skips WAL rows at or below last_l0_seq.
        # GC-5: the SSTs this commit adds to L0 carry ULIDs not below the newest L0 of the fenced
        # manifest, whatever the driver's clock says (a driver behind the writer's clock would
        # mint ids below GC's ULID cutoff: load sim seed 33).
        newest_ms = newest_l0_ms(fenced.manifest)
        tail_sst: tuple[CompactedSsTableV2, ...] = ()
        if tail and not plan.overwrite:
            mem = Memtable()
            for row in tail:
                mem.put(row)
            encoded = write_sst(mem.iter_range(), SstOptions())
            tail_id = not_before(rt.new_ulid(), newest_ms)
            made.append(tail_id)
            await retry_transient(rt, lambda: store.put(sst_key(tail_id), encoded.data, OVERWRITE),
                                  what="put WAL-tail SST")
            tail_sst = (CompactedSsTableV2(tail_id, encoded.info, encoded.format_version),)
        # LOAD-3: every SST the commit references exists, and GC may not take it before the
        # commit lands: a staged SST minted before the newest L0 (a live writer flushed after
        # the task wrote it) is below GC's ULID cutoff, so it is copied under an id minted now
        # (after the fence no L0 newer than it can appear before this commit).
        ids: list[ULID] = []
        for s in staged:
            old = ULID.from_str(s.sst_id)
            try:
                if old.milliseconds < newest_ms:
                    new_id = not_before(rt.new_ulid(), newest_ms)
                    made.append(new_id)
                    await retry_transient(rt, lambda: store.copy(sst_key(old), sst_key(new_id)), what="copy staged SST")
                    ids.append(new_id)
                else:
                    await retry_transient(rt, lambda: store.head(sst_key(old)), what="head staged SST")
                    ids.append(old)
            except ObjectNotFoundError:
                raise LoadRefusedError(f"staged SST {s.sst_id} is gone (collected by GC? a load must commit "
                                       "within GC's min_age of staging): nothing committed") from None
        if before_commit is not None:
            await before_commit()
        edit = CommitBulkLoad(
            fence=WriterFence(epoch), load_seq=plan.seq, fence_id=fence_id, wal_seq=wal_seq,
            ssts=tuple(CompactedSsTableV2(i, s.info, s.format_version) for i, s in zip(ids, staged)),
            views=tuple(CompactedSsTableView(rt.new_ulid(), i, None) for i in ids),
            tail=tail_sst[0] if tail_sst else None, overwrite=plan.overwrite, landed_by_ssts=switches.LOAD_LANDED_BY_SSTS in rt.bugs)
        attempted = True
        try:  # LOAD-1: the one update that makes the rows visible (LOAD-12: a retry after a create
            # reported behind GC's boundary recognises the landed load, or raises CommitOutcomeUnknownError)
            committed = await manifests.commit(edit)
            stored = committed.stored
            if not committed.written:  # LOAD-12: a retry found the update it had sent landed
                rt.probe(probes.LOAD_COMMIT_LANDED_FOUND)
        except FencedError as e:
            raise LoadRefusedError(f"a writer opened after the load's fence (epoch {epoch}; {e}): "
                                   "nothing committed") from None
        except InvalidDbStateError as e:
            raise LoadRefusedError(str(e)) from None
    except LoadRefusedError:  # nothing committed: what this commit wrote is no one's
        await _delete_unreferenced(store, made)
        raise
    except BaseException:
        # DUR-1, LOAD-1: once the update was sent, an error (a reply lost and the store gone
        # past the retries, a cancellation) does not say it did not land: a landed update names
        # these SSTs -- the WAL-tail SST holds the fenced writer's acknowledged rows --, so they
        # stay (unreferenced, GC collects them). Deleting them broke the database: every open
        # met ObjectNotFoundError, the acknowledged rows were gone.
        if not attempted or switches.LOAD_DELETES_AFTER_AMBIGUOUS_COMMIT in rt.bugs:
            await _delete_unreferenced(store, made)
        elif made:
            rt.probe(probes.LOAD_COMMIT_UNSURE_KEPT)
        raise
    rt.event("load_commit", load_id=plan.load_id, manifest_id=stored.id, ssts=len(staged), rows=rows, seq=plan.seq)
    return CommitResult(stored.id, epoch, len(staged), rows, plan.seq)


# ---------------------------------------------------------------------------------------------
# 4. Clean up / abort
# ---------------------------------------------------------------------------------------------


async def cleanup_load(store: ObjectStore, rt: Runtime, load_id: str) -> int:
    """End the load (its open marker goes first, LOAD-10: an attempt still running deletes
    what it writes from then on), then delete its staged SSTs that the latest manifest does not
    reference, then its intents. Returns the number of SSTs deleted. Safe to run again (and
    after a crash)."""
    await end_load(store, rt, load_id)
    prefix = intent_prefix(load_id)
    intents = await retry_transient(rt, lambda: store.list(prefix), what=f"list {prefix}")
    if not intents:
        return 0
    manifests = ManifestStore(store, rt)
    latest = await manifests.read_latest()
    referenced = manifest_sst_ids(latest.manifest) if latest is not None else set()
    staged = {i for i in map(_intent_sst, (m.key for m in intents)) if i is not None}
    if latest is not None and staged - referenced and switches.CLEANUP_LATEST_ONLY not in rt.bugs:
        # LOAD-6: an SST the commit made the database's that a compaction has rewritten since is
        # in no latest manifest, but an older manifest a checkpoint pins (a reader's, a clone's)
        # still names it: GC deletes it once nothing pins it, never the load's clean-up.
        since_ms = min(m.last_modified_ms for m in intents) - MANIFEST_CLOCK_MARGIN_MS
        referenced |= await named_by_older_manifests(manifests, staged - referenced, since_ms, latest.id)
    deleted = 0
    for meta in intents:
        sst_id = _intent_sst(meta.key)
        if sst_id is None:
            continue
        if sst_id not in referenced:  # LOAD-6: never delete what the manifest references
            await retry_transient(rt, lambda: store.delete(sst_key(sst_id)), what="delete staged SST")
            deleted += 1
        await retry_transient(rt, lambda: store.delete(meta.key), what="delete intent")
    rt.event("load_cleanup", load_id=load_id, deleted=deleted)
    return deleted


async def _delete_unreferenced(store: ObjectStore, ssts: list[ULID]) -> None:
    """Delete SSTs a commit wrote that no manifest names (best effort: GC takes them otherwise)."""
    for sid in ssts:
        try:
            await store.delete(sst_key(sid))
        except Exception:  # noqa: BLE001 - unreferenced: GC takes it otherwise
            pass


async def collect_loads(store: ObjectStore, rt: Runtime, *,
                        abandoned_after_s: float = DEFAULT_ABANDONED_AFTER_S) -> list[str]:
    """What ended and abandoned loads left under ``bulk-load/`` (LOAD-10): a load without an
    open marker has ended (its commit or abort ran, or began to): its remaining intents are
    those of attempts killed while they staged, cleaned up now. A load whose marker still says
    ``open`` and is older than ``abandoned_after_s`` lost its driver: the collector claims the
    marker (a commit that claimed it first wins) and cleans the load up; its commit, if the
    driver still lives, is refused. A marker its commit claimed counts as ended once that old
    (a commit lands within ``abandoned_after_s`` of its claim). Returns the load ids cleaned."""
    metas = await retry_transient(rt, lambda: store.list(LOAD_DIR), what=f"list {LOAD_DIR}")
    by_load: dict[str, list[ObjectMeta]] = {}
    for meta in metas:
        parts = meta.key[len(LOAD_DIR):].split("/")
        if len(parts) == 2:
            by_load.setdefault(parts[0], []).append(meta)
    now_ms = rt.now_ms()
    cleaned: list[str] = []
    for load_id, objs in sorted(by_load.items()):
        marker = next((m for m in objs if m.key == marker_key(load_id)), None)
        if marker is not None:
            if now_ms - marker.last_modified_ms <= abandoned_after_s * 1000:
                continue  # a load in progress
            try:
                got = await retry_transient(rt, lambda: store.get(marker.key), what=f"get {marker.key}")
            except ObjectNotFoundError:
                got = None
            if got is not None and got.data == MARKER_OPEN and not await _claim(store, rt, load_id, got.meta,
                                                                               MARKER_ABANDONED):
                continue  # its commit claimed it just now
            rt.event("load_abandoned", load_id=load_id)
        await cleanup_load(store, rt, load_id)
        cleaned.append(load_id)
    return cleaned
