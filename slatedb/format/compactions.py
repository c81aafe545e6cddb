"""Codec of ``compactions/<id:020>.compactions`` objects (the compactor's job state).

Framing: ``u16 format version (big-endian)`` then a raw ``CompactionsV1`` FlatBuffer. File
version 2 is current; version 1 is the same table without ``TieredCompactionSpec.destination``
(that slot is simply absent, so it decodes as 0). Both versions are read; version 2 is written
by default, version 1 on request (only if no compaction has a non-zero ``destination``).

Empty optional vectors of a tiered spec (``sorted_runs``, ``l0_view_ids``) are written as empty
vectors rather than left absent: both mean "none", and a present vector is the safer choice
for any reader that does not treat absence as empty.
"""

from __future__ import annotations

import functools

import struct

import flatbuffers

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import memo
from slatedb.format import types as t
from slatedb.format.fb import BytesRange as fb_BytesRange
from slatedb.format.fb import CompactedSsTable as fb_CompactedSsTable
from slatedb.format.fb import Compaction as fb_Compaction
from slatedb.format.fb import CompactionsV1 as fb_CompactionsV1
from slatedb.format.fb import DrainSegmentSpec as fb_Drain
from slatedb.format.fb import Subcompaction as fb_Subcompaction
from slatedb.format.fb import TieredCompactionContext as fb_TieredCtx
from slatedb.format.fb import TieredCompactionSpec as fb_Tiered
from slatedb.format.fb import Ulid as fb_Ulid
from slatedb.format.fb import WorkerSpec as fb_WorkerSpec
from slatedb.format.fb.CompactionContext import CompactionContext as fb_CompactionContext
from slatedb.format.fb.CompactionSpec import CompactionSpec as fb_CompactionSpec
from slatedb.format.fbbuild import FastBuilder as _Builder  # the stock builder's bytes, faster
from slatedb.format.fbbuild import build_cached
from slatedb.format.fbcodec import (
    FbDecodeError,
    FbReader,
    build_bytes_range,
    build_compacted_sst,
    build_table_vector,
    build_u32_vector,
    build_ulid,
    build_ulid_vector,
    decoding,
    read_bytes_range,
    read_compacted_sst,
    read_ulid,
    read_ulid_vector,
)

COMPACTIONS_VERSION_V1 = 1
COMPACTIONS_VERSION_V2 = 2
_HEADER = struct.Struct(">H")


def _vo(slot: int) -> int:
    """vtable offset of the field in schema position ``slot`` (0-based; unions take two)."""
    return 4 + 2 * slot


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def encode_compactions(compactions: t.CompactionsV1, version: int = COMPACTIONS_VERSION_V2) -> bytes:
    """Frame ``compactions`` as a ``.compactions`` object of file ``version`` (1 or 2)."""
    if version not in (COMPACTIONS_VERSION_V1, COMPACTIONS_VERSION_V2):
        raise InvalidArgumentError(f"unsupported compactions file version {version}")
    if version == COMPACTIONS_VERSION_V1:
        for c in compactions.recent_compactions:
            if isinstance(c.spec, t.TieredCompactionSpec) and c.spec.destination != 0:
                raise InvalidArgumentError(
                    f"compaction {c.id}: version 1 files cannot carry destination {c.spec.destination}"
                )
    b = _Builder(512)
    # a job unchanged since the last file is spliced in (:func:`build_cached`: the same bytes)
    jobs = build_table_vector(b, [build_cached(b, _build_compaction, c) for c in compactions.recent_compactions])
    fb_CompactionsV1.Start(b)
    fb_CompactionsV1.AddCompactorEpoch(b, compactions.compactor_epoch)
    fb_CompactionsV1.AddRecentCompactions(b, jobs)
    b.Finish(fb_CompactionsV1.End(b))
    data = _HEADER.pack(version) + bytes(b.Output())
    if version == COMPACTIONS_VERSION_V2:
        memo.remember("compactions", data, compactions)
    return data


def compactions_version(data: bytes, object_name: str) -> int:
    """The framing version of a ``.compactions`` object; unknown versions are corruption."""
    if len(data) < _HEADER.size:
        raise CorruptionError(object_name, 0, f"compactions file of {len(data)} bytes has no version header")
    (version,) = _HEADER.unpack_from(data, 0)
    if version not in (COMPACTIONS_VERSION_V1, COMPACTIONS_VERSION_V2):
        raise CorruptionError(object_name, 0, f"unknown compactions format version {version}")
    return version


def decode_compactions(data: bytes, object_name: str) -> t.CompactionsV1:
    """Decode a ``.compactions`` object of file version 1 or 2.

    Like manifests (:func:`slatedb.format.manifest.decode_manifest_v2`), ``.compactions``
    objects are created once and never overwritten and their decoded values are frozen, so the
    last decodes are cached by content: a compactor's ticks, its workers and GC passes poll the
    same latest file again and again (a sixth of a simulated GC world's CPU went to decoding
    the same ``.compactions`` bytes). A damaged object is not cached: it raises every time."""
    data = bytes(data)
    encoded = memo.recall("compactions", data)  # bytes this process just encoded (the simulator's runs)
    return encoded if encoded is not None else _decode_cached(data, object_name)


@functools.lru_cache(maxsize=256)
def _decode_cached(data: bytes, object_name: str) -> t.CompactionsV1:
    compactions_version(data, object_name)
    with decoding(object_name, _HEADER.size):
        r = FbReader(data[_HEADER.size :])
        fb = r.root(fb_CompactionsV1.CompactionsV1, "CompactionsV1")
        return t.CompactionsV1(
            compactor_epoch=fb.CompactorEpoch(),
            recent_compactions=r.tables(
                fb, _vo(1), fb_Compaction.Compaction, _read_compaction(r), "CompactionsV1.recent_compactions", True
            ),
        )


# ---------------------------------------------------------------------------------------------
# Compaction and its parts
# ---------------------------------------------------------------------------------------------


def _build_spec(b: flatbuffers.Builder, spec: t.TieredCompactionSpec | t.DrainSegmentSpec) -> tuple[int, int]:
    """(union type, table offset) of a CompactionSpec (its table spliced in when it was built
    before: :func:`build_cached`)."""
    if isinstance(spec, t.TieredCompactionSpec):
        return fb_CompactionSpec.TieredCompactionSpec, build_cached(b, _build_spec_table, spec)
    if isinstance(spec, t.DrainSegmentSpec):
        return fb_CompactionSpec.DrainSegmentSpec, build_cached(b, _build_spec_table, spec)
    raise InvalidArgumentError(f"unknown compaction spec {spec!r}")


def _build_spec_table(b: flatbuffers.Builder, spec: t.TieredCompactionSpec | t.DrainSegmentSpec) -> int:
    if isinstance(spec, t.TieredCompactionSpec):
        runs = build_u32_vector(b, spec.sorted_runs)
        views = build_ulid_vector(b, spec.l0_view_ids)
        segment = None if spec.segment is None else b.CreateByteVector(spec.segment)
        fb_Tiered.Start(b)
        fb_Tiered.AddSortedRuns(b, runs)
        fb_Tiered.AddL0ViewIds(b, views)
        if segment is not None:
            fb_Tiered.AddSegment(b, segment)
        fb_Tiered.AddDestination(b, spec.destination)
        return fb_Tiered.End(b)
    segment = b.CreateByteVector(spec.segment)
    views = build_ulid_vector(b, spec.l0_view_ids)
    runs = build_u32_vector(b, spec.sorted_runs)
    fb_Drain.Start(b)
    fb_Drain.AddSegment(b, segment)
    fb_Drain.AddL0ViewIds(b, views)
    fb_Drain.AddSortedRuns(b, runs)
    return fb_Drain.End(b)


def _read_spec(r: FbReader, fb: fb_Compaction.Compaction) -> t.TieredCompactionSpec | t.DrainSegmentSpec:
    kind = fb.SpecType()
    if kind == fb_CompactionSpec.TieredCompactionSpec:
        s = r.req(fb, _vo(2), fb_Tiered.TieredCompactionSpec, "Compaction.spec")
        return t.TieredCompactionSpec(
            sorted_runs=r.u32_vector(s, _vo(1), "TieredCompactionSpec.sorted_runs"),
            l0_view_ids=read_ulid_vector(r, s, _vo(2), "TieredCompactionSpec.l0_view_ids"),
            segment=r.bytes_opt(s, _vo(3), "TieredCompactionSpec.segment"),
            destination=s.Destination(),
        )
    if kind == fb_CompactionSpec.DrainSegmentSpec:
        s = r.req(fb, _vo(2), fb_Drain.DrainSegmentSpec, "Compaction.spec")
        return t.DrainSegmentSpec(
            segment=r.bytes_req(s, _vo(0), "DrainSegmentSpec.segment"),
            l0_view_ids=read_ulid_vector(r, s, _vo(1), "DrainSegmentSpec.l0_view_ids"),
            sorted_runs=r.u32_vector(s, _vo(2), "DrainSegmentSpec.sorted_runs"),
        )
    raise FbDecodeError(None, f"Compaction.spec: unknown or missing union type {kind}")


def build_sst_vector(b: flatbuffers.Builder, ssts: tuple[t.CompactedSsTable, ...]) -> int:
    """The vector of a job's (or a subcompaction's) output SSTs; with :func:`build_cached`
    around it, a tuple of outputs the last file had too is spliced in at once."""
    return build_table_vector(b, [build_cached(b, build_compacted_sst, s) for s in ssts])


def _build_ctx(b: flatbuffers.Builder, ctx: t.TieredCompactionContext) -> int:
    subs = []
    for sub in ctx.subcompactions:
        rng = build_cached(b, build_bytes_range, sub.range)
        outs = build_cached(b, build_sst_vector, sub.output_ssts)
        fb_Subcompaction.Start(b)
        fb_Subcompaction.AddRange(b, rng)
        fb_Subcompaction.AddOutputSsts(b, outs)
        subs.append(fb_Subcompaction.End(b))
    vec = build_table_vector(b, subs)
    fb_TieredCtx.Start(b)
    fb_TieredCtx.AddSubcompactions(b, vec)
    fb_TieredCtx.AddRetentionMinSeq(b, ctx.retention_min_seq)
    return fb_TieredCtx.End(b)


def _read_ctx(r: FbReader, fb: fb_Compaction.Compaction) -> t.TieredCompactionContext | None:
    kind = fb.CtxType()
    if kind == fb_CompactionContext.NONE:
        return None
    if kind != fb_CompactionContext.TieredCompactionContext:
        raise FbDecodeError(None, f"Compaction.ctx: unknown union type {kind}")
    c = r.req(fb, _vo(7), fb_TieredCtx.TieredCompactionContext, "Compaction.ctx")

    def sub(s: fb_Subcompaction.Subcompaction) -> t.Subcompaction:
        return t.Subcompaction(
            range=read_bytes_range(r, r.req(s, _vo(0), fb_BytesRange.BytesRange, "Subcompaction.range")),
            output_ssts=r.tables(
                s, _vo(1), fb_CompactedSsTable.CompactedSsTable, read_compacted_sst(r), "Subcompaction.output_ssts"
            ),
        )

    return t.TieredCompactionContext(
        subcompactions=r.tables(c, _vo(0), fb_Subcompaction.Subcompaction, sub, "TieredCompactionContext.subcompactions"),
        retention_min_seq=c.RetentionMinSeq(),
    )


def _build_compaction(b: flatbuffers.Builder, c: t.Compaction) -> int:
    cid = build_ulid(b, c.id)
    spec_type, spec = _build_spec(b, c.spec)
    outputs = build_cached(b, build_sst_vector, c.output_ssts)
    worker = None
    if c.worker is not None:
        wid = None if c.worker.worker_id is None else b.CreateString(c.worker.worker_id)
        fb_WorkerSpec.Start(b)
        if wid is not None:
            fb_WorkerSpec.AddWorkerId(b, wid)
        fb_WorkerSpec.AddLastHeartbeatMs(b, c.worker.last_heartbeat_ms)
        worker = fb_WorkerSpec.End(b)
    ctx = None if c.ctx is None else build_cached(b, _build_ctx, c.ctx)
    fb_Compaction.Start(b)
    fb_Compaction.AddId(b, cid)
    fb_Compaction.AddSpecType(b, spec_type)
    fb_Compaction.AddSpec(b, spec)
    fb_Compaction.AddStatus(b, int(c.status))
    fb_Compaction.AddOutputSsts(b, outputs)
    if worker is not None:
        fb_Compaction.AddWorker(b, worker)
    if ctx is not None:
        fb_Compaction.AddCtxType(b, fb_CompactionContext.TieredCompactionContext)
        fb_Compaction.AddCtx(b, ctx)
    return fb_Compaction.End(b)


def _read_compaction(r: FbReader):
    def convert(fb: fb_Compaction.Compaction) -> t.Compaction:
        worker = r.sub(fb, _vo(5), fb_WorkerSpec.WorkerSpec, "Compaction.worker")
        return t.Compaction(
            id=read_ulid(r.req(fb, _vo(0), fb_Ulid.Ulid, "Compaction.id")),
            spec=_read_spec(r, fb),
            status=r.enum(t.CompactionStatus, fb.Status(), "Compaction.status"),
            output_ssts=r.tables(
                fb, _vo(4), fb_CompactedSsTable.CompactedSsTable, read_compacted_sst(r), "Compaction.output_ssts"
            ),
            worker=None
            if worker is None
            else t.WorkerSpec(
                worker_id=r.string_opt(worker, _vo(0), "WorkerSpec.worker_id"),
                last_heartbeat_ms=worker.LastHeartbeatMs(),
            ),
            ctx=_read_ctx(r, fb),
        )

    return convert
