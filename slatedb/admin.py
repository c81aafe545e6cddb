"""Administration of a database without opening a writer (coroutine functions for trio and
asyncio alike, :mod:`slatedb.runtime.anyloop`; the CLI wraps them).

Compactions (RFC 002 "External Process Integration"): :func:`submit_compaction`,
:func:`read_compaction`, :func:`read_compactions`, :func:`list_compactions`,
:func:`run_compactor`.

Checkpoints (RFC 000 "Public API" ``mod admin``): :func:`create_checkpoint`,
:func:`refresh_checkpoint`, :func:`delete_checkpoint`, :func:`list_checkpoints`. Manifests:
:func:`read_manifest`, :func:`list_manifests`. Garbage collection: :func:`run_gc`. Clones and
destroy: :func:`create_clone`, :func:`destroy`. See docs/admin.md.

Every function but :func:`create_clone` takes an :class:`~slatedb.objstore.base.ObjectStore` of
the database root; time, ids and sleeps come from ``runtime`` (``ProductionRuntime("admin")``
by default).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import attrs
import trio
from ulid import ULID

from slatedb import checkpoint as _ckpt
from slatedb.api.args import STORE_METHODS, coerce_settings
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions
from slatedb.compactor import CompactionSpec, Compactor, full_spec
from slatedb.compactor import submit_compaction as _submit
from slatedb.format.layout import failed_reason_key
from slatedb.format import seq_tracker as _seqtrack
from slatedb.compactor.store import CompactionsStore, StoredCompactions
from slatedb.clone import create_clone_url
from slatedb.config import GarbageCollectorOptions, Settings
from slatedb.destroy import destroy as _destroy
from slatedb.errors import FencedError, InvalidArgumentError, NotFoundError, ObjectNotFoundError, SlateDBError  # noqa: F401
from slatedb.format.types import Checkpoint, Compaction, ManifestV2, TieredCompactionSpec, WriterCheckpoint
from slatedb.format.layout import MANIFEST_DIR, MANIFEST_SUFFIX, manifest_key, parse_id
from slatedb.compactor.service import max_retries_of, serve
from slatedb.gc import DEFAULT_DB_DELETE_GRACE_S, run_gc as _run_gc
from slatedb.manifest.edits import DeleteCheckpoint
from slatedb.manifest.missing import require_latest
from slatedb.manifest.segments import segments_json
from slatedb.manifest.store import ManifestStore, StoredManifest
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import retry_transient
from slatedb.projection import parse_range
from slatedb.projection.create import CloneSource, create_database_url
from slatedb.runtime import Runtime, opened, with_max_retries
from slatedb.runtime.anyloop import on_any_loop
from slatedb.runtime.production import ProductionRuntime
from slatedb.redact import shown_url


def parse_request(request: Any) -> CompactionSpec | str:
    """A submission: ``"Full"``, ``{"Spec": {...}}`` or a bare spec (see ``CompactionSpec.from_json``).

    JSON text is accepted too. Returns ``"Full"`` or the spec."""
    if isinstance(request, CompactionSpec):
        return request
    if isinstance(request, str):
        if request.strip().strip('"').lower() == "full":
            return "Full"
        try:
            request = json.loads(request)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f"compaction request is not JSON: {e.msg} (at {e.pos})") from e
        if isinstance(request, str):
            return parse_request(request)
    if isinstance(request, dict) and set(request) == {"Spec"}:
        request = request["Spec"]
    spec = CompactionSpec.from_json(request)
    # Refused at the call, whatever the database holds (found: recorded Submitted, then failed by
    # the compactor with this reason); whether the sources exist is the compactor's to judge.
    if not spec.sources:
        raise InvalidArgumentError("a compaction needs at least one source (sources is empty)")
    if len(set(spec.sources)) != len(spec.sources):
        raise InvalidArgumentError(f"duplicate sources in {spec.render()}")
    return spec


@on_any_loop
async def submit_compaction(store: ObjectStore, request: Any, runtime: Runtime | None = None) -> Compaction:
    """Record a compaction as ``Submitted``; the running compactor validates and runs it.
    :class:`NotFoundError` when the path holds no database (nothing is written there: a
    ``.compactions`` file alone would make ``Db.open`` refuse the path as a database whose
    manifests were lost), :class:`ManifestsMissingError` when it holds data but no manifest."""
    _check_store(store)
    rt = _admin_runtime(runtime)
    spec = parse_request(request)
    latest = await require_latest(ManifestStore(store, rt))
    if spec == "Full":
        spec = full_spec(latest.manifest)
        if spec is None:
            raise InvalidArgumentError("nothing to compact: the database has no L0 SST and no sorted run")
    assert isinstance(spec, CompactionSpec)
    return await _submit(store, rt, spec)


@on_any_loop
async def read_compactions(store: ObjectStore, compactions_id: int | None = None, runtime: Runtime | None = None) -> StoredCompactions:
    cs = CompactionsStore(_check_store(store), _admin_runtime(runtime))
    if compactions_id is None:
        got = await cs.read_latest()
        if got is None:
            raise NotFoundError("the database has no .compactions file yet")
        return got
    if isinstance(compactions_id, bool) or not isinstance(compactions_id, int) or not 0 <= compactions_id < 2**64:
        raise InvalidArgumentError(f"compactions id must be an integer in [0, 2^64), got {compactions_id!r}")
    try:
        return await cs.read(compactions_id)
    except ObjectNotFoundError:
        raise NotFoundError(f"compactions file {compactions_id} does not exist") from None


@on_any_loop
async def read_compaction(store: ObjectStore, compaction_id: str | ULID, compactions_id: int | None = None,
                          runtime: Runtime | None = None) -> Compaction:
    _check_store(store)
    try:
        cid = compaction_id if isinstance(compaction_id, ULID) else ULID.from_str(compaction_id)
    except (ValueError, TypeError):
        raise InvalidArgumentError(f"compaction id {compaction_id!r} is not a ULID") from None
    stored = await read_compactions(store, compactions_id, runtime)
    found = stored.find(cid)
    if found is None and compactions_id is None:
        # Finished compactions are trimmed from later files (only the most recent one stays):
        # look back through the older files that GC has not removed yet, newest first.
        for older in reversed(await list_compactions(store, end=stored.id - 1, runtime=runtime)):
            found = older.find(cid)
            if found is not None:
                break
    if found is None:
        where = f"compactions file {stored.id}" if compactions_id is not None else "any compactions file"
        raise NotFoundError(f"no compaction {cid} in {where}")
    return found


@on_any_loop
async def list_compactions(store: ObjectStore, start: int | None = None, end: int | None = None,
                           runtime: Runtime | None = None) -> list[StoredCompactions]:
    """Every ``.compactions`` file with ``start <= id <= end`` (files GC removed are skipped)."""
    start, end = _id_bound("start", start), _id_bound("end", end)
    cs = CompactionsStore(_check_store(store), _admin_runtime(runtime))
    out = []
    for i in await cs.list_ids():
        if (start is None or i >= start) and (end is None or i <= end):
            try:
                out.append(await cs.read(i))
            except ObjectNotFoundError:
                continue
    return out


@on_any_loop
async def failure_reason(store: ObjectStore, compaction_id: ULID) -> str | None:
    _check_store(store)
    try:
        got = await store.get(failed_reason_key(compaction_id))
    except ObjectNotFoundError:
        return None
    return json.loads(bytes(got.data))["reason"]


async def _release_startup_pin(c: Compactor, *, stopped: bool = False) -> None:
    """A clean stop drops the compactor's startup pin (compaction.md step 1, writer.md CKPT-5):
    it only made the claim's bytes unique, and would keep a hard destroy refused for
    ``checkpoint_lifetime``. Nothing is written when it is already gone. ``stopped``: the stop
    may have cut the claim's commit short, after it landed: the claim's pin is dropped then."""
    pin = c.startup_pin_id if c.startup_pin_id is not None or not stopped else c.claim_pin_id
    if pin is None:
        return
    await c.manifests.commit(DeleteCheckpoint(pin, missing_ok=True))
    c.runtime.event("compactor_pin_released", epoch=c.epoch, pin=str(pin))
    c.startup_pin_id = None


@on_any_loop
async def run_compactor(store: ObjectStore, settings: Settings | None = None, *, once: bool = False,
                        runtime: Runtime | None = None, merge_operator: Any = None) -> Compactor:
    """Run a standalone compactor (it fences any other). ``once``: until there is nothing left
    to compact of what L0 held at its start (L0 SSTs a live writer flushes meanwhile are left
    for the next run: beside a steady writer a ``once`` run used never to end); otherwise until cancelled or fenced, going on after a store outage longer than
    its retries (logged as a ``compactor_error``, slatedb/compactor/service.py). ``merge_operator``: folds merge operands
    (spec/protocols/merge.md; without one they are kept as they are). ``settings``: a
    ``Settings``, a dict or a JSON/TOML path, as ``Db.open`` takes them."""
    settings = coerce_settings(settings)
    once = _check_flag("once", once)
    _check_store(store)
    rt = _admin_runtime(runtime, "compactor")
    with_max_retries(rt, max_retries_of(settings))
    c = Compactor(store, rt, settings, merge_operator=merge_operator)
    if once:
        await c.start()
        opened(rt)  # fenced in: from now on, the pauses of an open database (below)
        await c.run_until_idle(leave_new_l0=True)
        await _release_startup_pin(c)
        return c
    try:
        try:
            await c.start()  # with the open's short pauses: a wrong endpoint fails within seconds
        except FencedError:
            return c  # a newer compactor took over before we did (as Compactor.run)
        # Its epoch committed, the compactor has opened the database as its writer of runs: its
        # calls pause from now on as an open Db's do (100 ms doubling to 15 s, about a minute of
        # outage ridden out by the default 10 retries, rather than 7 s, after which a tick's
        # failing read stopped the service). A call that exhausts its retries all the same (a
        # longer outage) is logged and the service goes on after a pause (compactor/service.py).
        opened(rt)
        await serve(c)
    except BaseException as e:
        # Stopped by its caller (a cancelled task, Ctrl-C on ``slatedb run-compactor``): the only
        # way a compactor without ``once`` ends but fenced, so it is the clean stop that drops
        # the startup pin, as ``once`` and a writer's close do; else a hard destroy right after
        # was refused for ``checkpoint_lifetime``. Best effort: a failing store keeps the pin
        # (it expires) and the stop goes on as it came.
        if _is_stop(e):
            with trio.CancelScope(shield=True):
                try:
                    await _release_startup_pin(c, stopped=True)
                except SlateDBError as failed:
                    rt.event("compactor_error", error=f"startup pin not released at the stop: {failed}")
        raise
    return c


def _is_stop(e: BaseException) -> bool:
    """A cancellation or an interrupt (possibly in a group from the compactor's nursery)."""
    if isinstance(e, BaseExceptionGroup):
        return all(_is_stop(x) for x in e.exceptions)
    return isinstance(e, (trio.Cancelled, KeyboardInterrupt))


# ---------------------------------------------------------------------------------------------
# Checkpoints and manifests
# ---------------------------------------------------------------------------------------------


def _admin_runtime(runtime: Runtime | None, name: str = "admin") -> Runtime:
    """``runtime``, or a production one named ``name`` when None; anything else is refused."""
    if runtime is None:
        return ProductionRuntime(name)
    if not isinstance(runtime, Runtime):
        raise InvalidArgumentError(f"runtime must be a slatedb Runtime or None, not {type(runtime).__name__}")
    return runtime


def _check_store(store: Any) -> ObjectStore:
    """The admin functions' ``store``: an ObjectStore (or one of its shape); a URL or anything
    else is refused at the call, saying how to make one."""
    how = "slatedb.objstore.resolve_store(url) makes one"
    if isinstance(store, str):
        raise InvalidArgumentError(f"store must be an ObjectStore, not the URL {store!r}: {how}")
    if store is None or not all(callable(getattr(store, m, None)) for m in STORE_METHODS):
        raise InvalidArgumentError(f"store must be an ObjectStore ({how}), not {type(store).__name__}")
    return store


def _id_bound(name: str, value: Any) -> int | None:
    return None if value is None else _int_arg(name, value, 0, 2**64)


async def _latest(manifests: ManifestStore) -> StoredManifest:
    """The latest manifest; NotFoundError (no database) or ManifestsMissingError (data left
    without a manifest)."""
    return await require_latest(manifests)


def as_checkpoint_id(value: Any) -> uuid.UUID:
    """A checkpoint id from a UUID or its text; :class:`InvalidArgumentError` otherwise."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise InvalidArgumentError(f"checkpoint id {value!r} is not a UUID (e.g. 01740ee5-6459-44af-9a45-85deb6e468e3)") from None


async def _forget_created(store: ObjectStore, options: CheckpointOptions = CheckpointOptions(),
                          runtime: Runtime | None = None, *, made: CheckpointCreateResult) -> None:
    """Delete the checkpoint a :func:`create_checkpoint` made for an asyncio caller that was
    cancelled before it received the result."""
    rt = _admin_runtime(runtime)
    await _ckpt.delete_checkpoint(ManifestStore(store, rt), rt, made.id, missing_ok=True)


@on_any_loop(undo=_forget_created)
async def create_checkpoint(store: ObjectStore, options: CheckpointOptions = CheckpointOptions(),
                            runtime: Runtime | None = None) -> CheckpointCreateResult:
    """RFC 000 ``admin::create_checkpoint``: a checkpoint of the latest manifest (pinning the
    manifest that adds it), or of ``options.source``'s manifest. There is no scope: nothing is
    flushed (a writer's unflushed writes are not in it; use ``Db.create_checkpoint`` for that).
    Errors: :class:`NotFoundError` (no database), :class:`CheckpointNotFoundError` (unknown
    source), :class:`InvalidDbStateError` (not initialized, destroyed, expired source).

    A call cancelled (a timeout, a cancelled task or cancel scope) once its manifest commit has
    begun lets the commit end, then deletes the checkpoint it added and raises the cancellation:
    nobody learns its id, and without a lifetime it would pin its manifest and SSTs for good
    (a cancelled put may already have landed). ``options``: a CheckpointOptions, a dict of its
    fields or None."""
    _check_store(store)
    options = CheckpointOptions.of(options)
    rt = _admin_runtime(runtime)
    manifests = ManifestStore(store, rt)
    await _latest(manifests)
    with trio.CancelScope(shield=True):
        made = await _ckpt.create_checkpoint(manifests, rt, options)
    try:
        await trio.lowlevel.checkpoint()  # a cancellation that arrived during the commit, delivered here
    except trio.Cancelled:
        with trio.CancelScope(shield=True):
            await _ckpt.delete_checkpoint(manifests, rt, made.id, missing_ok=True)
        raise
    return made


@on_any_loop
async def refresh_checkpoint(store: ObjectStore, checkpoint_id: uuid.UUID | str, lifetime_s: float | None = None,
                             runtime: Runtime | None = None) -> Checkpoint:
    """Set the checkpoint's expiry to now + ``lifetime_s`` (None: never expires); returns it."""
    _check_store(store)
    rt = _admin_runtime(runtime)
    cid = as_checkpoint_id(checkpoint_id)
    manifests = ManifestStore(store, rt)
    await _latest(manifests)
    return await _ckpt.refresh_checkpoint(manifests, rt, cid, lifetime_s)


@on_any_loop
async def delete_checkpoint(store: ObjectStore, checkpoint_id: uuid.UUID | str, runtime: Runtime | None = None) -> None:
    """Remove the checkpoint (:class:`CheckpointNotFoundError` when there is none with that id)."""
    _check_store(store)
    rt = _admin_runtime(runtime)
    cid = as_checkpoint_id(checkpoint_id)
    manifests = ManifestStore(store, rt)
    await _latest(manifests)
    await _ckpt.delete_checkpoint(manifests, rt, cid)


@on_any_loop
async def list_checkpoints(store: ObjectStore, name: str | None = None, runtime: Runtime | None = None) -> list[Checkpoint]:
    """The checkpoints of the latest manifest (only those named ``name`` when given), writer
    checkpoints and expired ones (until GC removes them) included."""
    _check_store(store)
    if name is not None and not isinstance(name, str):
        raise InvalidArgumentError(f"checkpoint name to list must be a str or None, not {type(name).__name__}")
    manifests = ManifestStore(store, _admin_runtime(runtime))
    latest = await _latest(manifests)
    return [c for c in latest.manifest.checkpoints if name is None or c.name == name]


@on_any_loop
async def read_manifest(store: ObjectStore, manifest_id: int | None = None, runtime: Runtime | None = None) -> StoredManifest:
    """The manifest ``manifest_id``, or the latest when None. :class:`NotFoundError` when it does
    not exist (never written, or deleted by GC)."""
    _check_store(store)
    manifests = ManifestStore(store, _admin_runtime(runtime))
    if manifest_id is None:
        return await _latest(manifests)
    if isinstance(manifest_id, bool) or not isinstance(manifest_id, int) or not 0 <= manifest_id < 2**64:
        raise InvalidArgumentError(f"manifest id must be an integer in [0, 2^64), got {manifest_id!r}")
    try:
        return await manifests.read(manifest_id)
    except ObjectNotFoundError:
        raise NotFoundError(f"manifest {manifest_id} does not exist at {shown_url(store.url)}") from None


def _int_arg(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value < hi:
        raise InvalidArgumentError(f"{name} must be an integer in [{lo}, {hi}), got {value!r}")
    return value


def _check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be a bool, got {value!r}")
    return value


@on_any_loop
async def sequence_tracker(store: ObjectStore, runtime: Runtime | None = None) -> _seqtrack.SequenceTracker:
    """The latest manifest's sequence tracker (RFC 0012, :mod:`slatedb.format.seq_tracker`);
    :class:`~slatedb.errors.CorruptionError` naming the manifest when its bytes do not decode."""
    _check_store(store)
    latest = await _latest(ManifestStore(store, _admin_runtime(runtime)))
    return _seqtrack.decode(latest.manifest.sequence_tracker, manifest_key(latest.id))


@on_any_loop
async def get_sequence_for_timestamp(store: ObjectStore, timestamp_s: int, round_up: bool = False,
                                     runtime: Runtime | None = None) -> int | None:
    """The sequence number the latest manifest's tracker recorded at ``timestamp_s`` (Unix
    seconds); without an exact entry the next later entry's (``round_up``) or the next earlier
    one's; None when there is none. The official ``Admin.get_sequence_for_timestamp``."""
    ts = _int_arg("timestamp_s", timestamp_s, -2**63, 2**63)
    up = _check_flag("round_up", round_up)
    return (await sequence_tracker(store, runtime)).find_seq(ts, up)


@on_any_loop
async def get_timestamp_for_sequence(store: ObjectStore, seq: int, round_up: bool = False,
                                     runtime: Runtime | None = None) -> int | None:
    """The timestamp (Unix seconds) the latest manifest's tracker recorded for ``seq``; without
    an exact entry the next higher entry's (``round_up``) or the next lower one's; None when
    there is none. The official ``Admin.get_timestamp_for_sequence``."""
    q = _int_arg("seq", seq, 0, 2**64)
    up = _check_flag("round_up", round_up)
    return (await sequence_tracker(store, runtime)).find_ts(q, up)


@attrs.frozen
class ManifestInfo:
    """One manifest file as listed: its id, key, size and last-modified time."""

    id: int
    key: str
    size_bytes: int
    last_modified_ms: int


@on_any_loop
async def list_manifests(store: ObjectStore, start: int | None = None, end: int | None = None,
                         runtime: Runtime | None = None) -> list[ManifestInfo]:
    """The manifest files with ``start <= id <= end`` (both inclusive, None: open), by id."""
    _check_store(store)
    start, end = _id_bound("start", start), _id_bound("end", end)
    rt = _admin_runtime(runtime)
    metas = await retry_transient(rt, lambda: store.list(MANIFEST_DIR), what=f"list {MANIFEST_DIR}")
    out = []
    for m in metas:
        i = parse_id(m.key, MANIFEST_DIR, MANIFEST_SUFFIX)
        if i is not None and (start is None or i >= start) and (end is None or i <= end):
            out.append(ManifestInfo(i, m.key, m.size_bytes, m.last_modified_ms))
    return sorted(out, key=lambda info: info.id)


# ---------------------------------------------------------------------------------------------
# Garbage collection, clones, destroy (the engines are slatedb.gc, slatedb.clone, slatedb.destroy)
# ---------------------------------------------------------------------------------------------


@on_any_loop
async def run_gc(store: ObjectStore, settings: Settings | None = None, once: bool = False, *,
                 db_delete_grace_s: float | None = None, runtime: Runtime | None = None) -> Any:
    """Run the garbage collector with ``settings.garbage_collector_options`` (the defaults when
    unset): one pass (``once``) or until cancelled or the database is gone. Returns its
    :class:`~slatedb.gc.GcStats` (of the pass, or the totals). ``settings``: a ``Settings``, a
    dict or a JSON/TOML path, as ``Db.open`` takes them."""
    settings = coerce_settings(settings)
    once = _check_flag("once", once)
    options = settings.garbage_collector_options or GarbageCollectorOptions()
    grace = DEFAULT_DB_DELETE_GRACE_S if db_delete_grace_s is None else db_delete_grace_s
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace >= 0:  # inf: never deleted
        raise InvalidArgumentError(f"db_delete_grace_s must be a number of seconds >= 0, got {grace!r}")
    _check_store(store)
    rt = _admin_runtime(runtime, "gc")
    own = options.object_store_max_retries
    with_max_retries(rt, own if own is not None else settings.object_store_max_retries)
    if not once:
        # A service: its first pass comes an interval after the start, and from then on its calls
        # pause as an open Db's do (a pass rides out about a minute of outage, not 7 s). One pass
        # (``once``, a scheduled job) keeps the short pauses: it fails within seconds and the
        # next run redoes it.
        opened(rt)
    return await _run_gc(store, rt, options, once, db_delete_grace_s=grace)


@on_any_loop
async def create_clone(clone_url: str, parent_url: str, parent_checkpoint: uuid.UUID | str | None = None,
                       runtime: Runtime | None = None) -> StoredManifest:
    """RFC 000 ``admin::create_clone``: make the database at ``clone_url`` a clone of the one at
    ``parent_url``, from ``parent_checkpoint`` or from the parent's current state. Returns the
    clone's manifest. See docs/clones.md."""
    cp = None if parent_checkpoint is None else as_checkpoint_id(parent_checkpoint)
    return await create_clone_url(clone_url, parent_url, cp, _admin_runtime(runtime))


@on_any_loop
async def create_clone_from_sources(dest_url: str, sources: Any, runtime: Runtime | None = None) -> StoredManifest:
    """RFC 000 projection and union (the official ``CloneBuilder`` with one ``CloneSourceSpec``
    per source): make the database at ``dest_url`` from ``sources``, each a
    :class:`~slatedb.projection.create.CloneSource` (url, checkpoint, key_range) or its text form
    ``URL[@CHECKPOINT][:RANGE]`` (``a..m``, either side open, ``\\xNN`` escapes). One source
    with a range is a projection, several a union. Safe to re-run after a crash. Returns the
    new database's manifest. See docs/rescaling.md."""
    if isinstance(sources, (str, bytes, CloneSource)):
        sources = [sources]
    try:
        sources = list(sources)
    except TypeError:
        raise InvalidArgumentError(f"sources must be a list of sources (CloneSource or 'URL[@CHECKPOINT][:RANGE]'), "
                                   f"not {type(sources).__name__}") from None
    return await create_database_url(dest_url, sources, _admin_runtime(runtime))


@on_any_loop
async def project(dest_url: str, source_url: str, key_range: Any, checkpoint: uuid.UUID | str | None = None,
                  runtime: Runtime | None = None) -> StoredManifest:
    """The projection of the database at ``source_url`` onto ``key_range`` (a
    :class:`~slatedb.projection.KeyRange` or ``"a..m"``) as a new database at ``dest_url``."""
    rng = parse_range(key_range) if isinstance(key_range, str) else key_range
    return await create_clone_from_sources(dest_url, [CloneSource(source_url, checkpoint, rng)], runtime)


@on_any_loop
async def union(dest_url: str, source_urls: Any, runtime: Runtime | None = None) -> StoredManifest:
    """The union of the databases at ``source_urls`` (non-overlapping key ranges; each may be
    ``URL[@CHECKPOINT][:RANGE]``) as a new database at ``dest_url``."""
    return await create_clone_from_sources(dest_url, source_urls, runtime)


@on_any_loop
async def destroy(store: ObjectStore, soft: bool, runtime: Runtime | None = None) -> None:
    """RFC 000 ``Db::destroy``: ``soft`` marks the database destroyed (GC removes it after the
    grace period once no checkpoint is active); otherwise delete the database's objects now (not
    another database nested under its path, nor a user's file there), refused with
    :class:`~slatedb.errors.InvalidDeletionError` while an unexpired checkpoint exists."""
    _check_store(store)
    await _destroy(store, _admin_runtime(runtime), soft=soft)  # a bool only (checked there)


# ---------------------------------------------------------------------------------------------
# JSON views (the CLI prints these)
# ---------------------------------------------------------------------------------------------


def checkpoint_json(cp: Checkpoint, now_s: int | None = None) -> dict:
    """A checkpoint: ``expire_time_s`` None means it never expires; ``writer_epoch`` is set for
    a writer's own checkpoint; ``expired`` is given when ``now_s`` is."""
    out: dict[str, Any] = {
        "id": str(cp.id),
        "manifest_id": cp.manifest_id,
        "expire_time_s": cp.checkpoint_expire_time_s or None,
        "create_time_s": cp.checkpoint_create_time_s,
        "name": cp.name,
    }
    if isinstance(cp.metadata, WriterCheckpoint):
        out["writer_epoch"] = cp.metadata.epoch
    if now_s is not None:
        out["expired"] = _ckpt.is_expired(cp, now_s)
    return out


def manifest_json(stored: StoredManifest, now_s: int | None = None) -> dict:
    m: ManifestV2 = stored.manifest
    return {
        "id": stored.id,
        "writer_epoch": m.writer_epoch,
        "compactor_epoch": m.compactor_epoch,
        "initialized": m.initialized,
        "destroyed_at_s": m.destroyed_at_s or None,
        "replay_after_wal_id": m.replay_after_wal_id,
        "wal_id_last_seen": m.wal_id_last_seen,
        "last_l0_seq": m.last_l0_seq,
        "last_l0_clock_tick": m.last_l0_clock_tick,
        "recent_snapshot_min_seq": m.recent_snapshot_min_seq,
        "last_compacted_l0_sst_view_id": None if m.last_compacted_l0_sst_view_id is None else str(m.last_compacted_l0_sst_view_id),
        "l0": [str(v.sst_id) for v in m.l0],
        "compacted": [{"id": run.id, "ssts": [str(v.sst_id) for v in run.ssts]} for run in m.compacted],
        "checkpoints": [checkpoint_json(c, now_s) for c in m.checkpoints],
        "external_dbs": [
            {"path": shown_url(e.path), "source_checkpoint_id": str(e.source_checkpoint_id),
             "final_checkpoint_id": None if e.final_checkpoint_id is None else str(e.final_checkpoint_id),
             "sst_ids": [str(i) for i in e.sst_ids]}
            for e in m.external_dbs],
        **segments_json(m),  # only when it has any (an official database with a segment extractor)
    }


def manifest_info_json(info: ManifestInfo) -> dict:
    return {"id": info.id, "key": info.key, "size_bytes": info.size_bytes, "last_modified_ms": info.last_modified_ms}


def gc_stats_json(stats: Any) -> dict:
    out = attrs.asdict(stats)
    out["deleted"] = stats.deleted
    return out


def compaction_json(c: Compaction, reason: str | None = None) -> dict:
    spec: dict[str, Any]
    if isinstance(c.spec, TieredCompactionSpec):
        spec = CompactionSpec.from_format(c.spec).to_json()
    else:
        spec = {"drain_segment": c.spec.segment.hex()}
    out = {"id": str(c.id), "status": c.status.name.title(), "spec": spec,
           "output_ssts": [str(s.id) for s in c.output_ssts]}
    if c.ctx is not None:
        out["retention_min_seq"] = c.ctx.retention_min_seq
    if reason is not None:
        out["reason"] = reason
    return out


def compactions_json(stored: StoredCompactions) -> dict:
    return {"id": stored.id, "compactor_epoch": stored.compactions.compactor_epoch,
            "recent_compactions": [compaction_json(c) for c in stored.compactions.recent_compactions]}
