"""Codec of ``manifest/<id:020>.manifest`` objects.

Framing: ``u16 format version (big-endian)`` then the raw ``ManifestV1`` (version 1) or
``ManifestV2`` (version 2) FlatBuffer root table; no checksum, no file identifier.

We read both versions and write V2, as SlateDB 0.17.0 does. The ``manifest_id`` field is always
written as 0 (the real id is the object name, as in the official engine). Fields we do not
interpret (``sequence_tracker``, ``segments``, ``segment_extractor_name``,
``recent_snapshot_min_seq``, ...) are carried by :class:`~slatedb.format.types.ManifestV2`, so
decode -> encode keeps them.

Which optional vectors are written when empty mirrors the official writer (observed on files
written by the 0.17.0 wheel): ``external_dbs`` only when non-empty; ``segments`` always.
"""

from __future__ import annotations

import functools

import struct

import flatbuffers

from slatedb.errors import CorruptionError
from slatedb.format import memo
from slatedb.format import types as t
from slatedb.format.fb import Checkpoint as fb_Checkpoint
from slatedb.format.fb import CompactedSsTable as fb_CompactedSsTable
from slatedb.format.fb import CompactedSsTableV2 as fb_CompactedSsTableV2
from slatedb.format.fb import CompactedSsTableView as fb_View
from slatedb.format.fb import ExternalDb as fb_ExternalDb
from slatedb.format.fb import ManifestV1 as fb_ManifestV1
from slatedb.format.fb import ManifestV2 as fb_ManifestV2
from slatedb.format.fb import Segment as fb_Segment
from slatedb.format.fb import SortedRun as fb_SortedRun
from slatedb.format.fb import SortedRunV2 as fb_SortedRunV2
from slatedb.format.fb import Ulid as fb_Ulid
from slatedb.format.fb import Uuid as fb_Uuid
from slatedb.format.fb import WriterCheckpoint as fb_WriterCheckpoint
from slatedb.format.fb.CheckpointMetadata import CheckpointMetadata as fb_CheckpointMetadata
from slatedb.format.fbbuild import FastBuilder as _Builder  # the stock builder's bytes, faster
from slatedb.format.fbbuild import build_cached
from slatedb.format.fbcodec import (
    FbDecodeError,
    FbReader,
    build_bytes_range,
    build_compacted_sst,
    build_sst_info,
    build_table_vector,
    build_ulid,
    build_ulid_vector,
    build_uuid,
    decoding,
    read_bytes_range,
    read_compacted_sst,
    read_sst_info,
    read_ulid,
    read_ulid_vector,
    read_uuid,
)
from slatedb.format.fb import BytesRange as fb_BytesRange
from slatedb.format.fb import SsTableInfo as fb_SsTableInfo

MANIFEST_VERSION_V1 = 1
MANIFEST_VERSION_V2 = 2
_HEADER = struct.Struct(">H")


def _vo(slot: int) -> int:
    """vtable offset of the field in schema position ``slot`` (0-based)."""
    return 4 + 2 * slot


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def encode_manifest(manifest: t.ManifestV2) -> bytes:
    """Frame ``manifest`` as a version-2 ``.manifest`` object (``manifest_id`` written as 0)."""
    b = _Builder(1024)
    b.Finish(_build_manifest_v2(b, manifest))
    data = _HEADER.pack(MANIFEST_VERSION_V2) + bytes(b.Output())
    if manifest.manifest_id == 0:  # what decoding gives back (the id is the object's name)
        memo.remember("manifest", data, manifest)
    return data


def encode_manifest_v1(manifest: t.ManifestV1) -> bytes:
    """Frame ``manifest`` as a legacy version-1 object.

    The engine never writes V1 (0.17.0 writes V2); this exists so tests and tools can make V1
    files to exercise the reader.
    """
    b = _Builder(1024)
    b.Finish(_build_manifest_v1(b, manifest))
    return _HEADER.pack(MANIFEST_VERSION_V1) + bytes(b.Output())


def manifest_version(data: bytes, object_name: str) -> int:
    """The framing version of a ``.manifest`` object (1 or 2); anything else is corruption."""
    if len(data) < _HEADER.size:
        raise CorruptionError(object_name, 0, f"manifest of {len(data)} bytes has no version header")
    (version,) = _HEADER.unpack_from(data, 0)
    if version not in (MANIFEST_VERSION_V1, MANIFEST_VERSION_V2):
        raise CorruptionError(object_name, 0, f"unknown manifest format version {version}")
    return version


def decode_manifest(data: bytes, object_name: str) -> t.ManifestV1 | t.ManifestV2:
    """Decode a ``.manifest`` object of either version, as stored (no upgrade)."""
    version = manifest_version(data, object_name)
    with decoding(object_name, _HEADER.size):
        r = FbReader(data[_HEADER.size :])
        if version == MANIFEST_VERSION_V1:
            return _read_manifest_v1(r, r.root(fb_ManifestV1.ManifestV1, "ManifestV1"))
        return _read_manifest_v2(r, r.root(fb_ManifestV2.ManifestV2, "ManifestV2"))


def decode_manifest_v2(data: bytes, object_name: str) -> t.ManifestV2:
    """Decode a ``.manifest`` of either version and return it as V2 (see :func:`upgrade_v1`).

    Manifests are immutable objects (created once, never overwritten) and their decoded values
    frozen, so the last decodes are cached by content: GC passes, readers and writers polling
    the latest manifest decode the same bytes again and again (half the CPU of a simulated GC
    world went to decoding the same manifests, issue 27 item 2)."""
    data = bytes(data)
    encoded = memo.recall("manifest", data)  # bytes this process just encoded (the simulator's runs)
    return encoded if encoded is not None else _decode_v2_cached(data, object_name)


@functools.lru_cache(maxsize=512)
def _decode_v2_cached(data: bytes, object_name: str) -> t.ManifestV2:
    decoded = decode_manifest(data, object_name)
    return upgrade_v1(decoded) if isinstance(decoded, t.ManifestV1) else decoded


def upgrade_v1(v1: t.ManifestV1) -> t.ManifestV2:
    """The V2 equivalent of a V1 manifest.

    V1 embeds SSTs (with their visible range) directly in ``l0`` and sorted runs; V2 lists each
    physical SST once in ``ssts`` and refers to it from views. As for SSTs newly added to L0 by
    the official engine, each view's id is its SST's id. ``wal_object_store_uri`` has no V2
    field and is dropped.
    """
    ssts: dict[object, t.CompactedSsTableV2] = {}

    def view(sst: t.CompactedSsTable) -> t.CompactedSsTableView:
        ssts.setdefault(sst.id, t.CompactedSsTableV2(sst.id, sst.info, sst.format_version))
        return t.CompactedSsTableView(id=sst.id, sst_id=sst.id, visible_range=sst.visible_range)

    l0 = tuple(view(s) for s in v1.l0)
    compacted = tuple(t.SortedRunV2(sr.id, tuple(view(s) for s in sr.ssts)) for sr in v1.compacted)
    return t.ManifestV2(
        manifest_id=v1.manifest_id,
        external_dbs=v1.external_dbs,
        initialized=v1.initialized,
        writer_epoch=v1.writer_epoch,
        compactor_epoch=v1.compactor_epoch,
        replay_after_wal_id=v1.replay_after_wal_id,
        wal_id_last_seen=v1.wal_id_last_seen,
        last_compacted_l0_sst_view_id=v1.l0_last_compacted,
        ssts=tuple(ssts.values()),
        l0=l0,
        compacted=compacted,
        last_l0_clock_tick=v1.last_l0_clock_tick,
        checkpoints=v1.checkpoints,
        last_l0_seq=v1.last_l0_seq,
        recent_snapshot_min_seq=v1.recent_snapshot_min_seq,
        sequence_tracker=v1.sequence_tracker,
    )


# ---------------------------------------------------------------------------------------------
# Shared pieces: external dbs, checkpoints, views, sorted runs
# ---------------------------------------------------------------------------------------------


def _build_external_db(b: flatbuffers.Builder, db: t.ExternalDb) -> int:
    path = b.CreateString(db.path)
    source = build_uuid(b, db.source_checkpoint_id)
    final = None if db.final_checkpoint_id is None else build_uuid(b, db.final_checkpoint_id)
    sst_ids = build_ulid_vector(b, db.sst_ids)
    fb_ExternalDb.Start(b)
    fb_ExternalDb.AddPath(b, path)
    fb_ExternalDb.AddSourceCheckpointId(b, source)
    if final is not None:
        fb_ExternalDb.AddFinalCheckpointId(b, final)
    fb_ExternalDb.AddSstIds(b, sst_ids)
    return fb_ExternalDb.End(b)


def _read_external_db(r: FbReader):
    def convert(fb: fb_ExternalDb.ExternalDb) -> t.ExternalDb:
        final = r.sub(fb, _vo(2), fb_Uuid.Uuid, "ExternalDb.final_checkpoint_id")
        return t.ExternalDb(
            path=r.string_req(fb, _vo(0), "ExternalDb.path"),
            source_checkpoint_id=read_uuid(r.req(fb, _vo(1), fb_Uuid.Uuid, "ExternalDb.source_checkpoint_id")),
            final_checkpoint_id=None if final is None else read_uuid(final),
            sst_ids=read_ulid_vector(r, fb, _vo(3), "ExternalDb.sst_ids", required=True),
        )

    return convert


def _build_checkpoint(b: flatbuffers.Builder, cp: t.Checkpoint) -> int:
    cid = build_uuid(b, cp.id)
    meta = None
    if cp.metadata is not None:
        fb_WriterCheckpoint.Start(b)
        fb_WriterCheckpoint.AddEpoch(b, cp.metadata.epoch)
        meta = fb_WriterCheckpoint.End(b)
    name = None if cp.name is None else b.CreateString(cp.name)
    fb_Checkpoint.Start(b)
    fb_Checkpoint.AddId(b, cid)
    fb_Checkpoint.AddManifestId(b, cp.manifest_id)
    fb_Checkpoint.AddCheckpointExpireTimeS(b, cp.checkpoint_expire_time_s)
    fb_Checkpoint.AddCheckpointCreateTimeS(b, cp.checkpoint_create_time_s)
    if meta is not None:
        fb_Checkpoint.AddMetadataType(b, fb_CheckpointMetadata.WriterCheckpoint)
        fb_Checkpoint.AddMetadata(b, meta)
    if name is not None:
        fb_Checkpoint.AddName(b, name)
    return fb_Checkpoint.End(b)


def _read_checkpoint(r: FbReader):
    def convert(fb: fb_Checkpoint.Checkpoint) -> t.Checkpoint:
        kind = fb.MetadataType()
        if kind == fb_CheckpointMetadata.NONE:
            metadata = None
        elif kind == fb_CheckpointMetadata.WriterCheckpoint:
            wc = r.req(fb, _vo(5), fb_WriterCheckpoint.WriterCheckpoint, "Checkpoint.metadata")
            metadata = t.WriterCheckpoint(epoch=wc.Epoch())
        else:
            raise FbDecodeError(None, f"Checkpoint.metadata: unknown union type {kind}")
        return t.Checkpoint(
            id=read_uuid(r.req(fb, _vo(0), fb_Uuid.Uuid, "Checkpoint.id")),
            manifest_id=fb.ManifestId(),
            checkpoint_expire_time_s=fb.CheckpointExpireTimeS(),
            checkpoint_create_time_s=fb.CheckpointCreateTimeS(),
            metadata=metadata,
            name=r.string_opt(fb, _vo(6), "Checkpoint.name"),
        )

    return convert


def _build_view(b: flatbuffers.Builder, view: t.CompactedSsTableView) -> int:
    vid = build_ulid(b, view.id)
    sid = build_ulid(b, view.sst_id)
    rng = None if view.visible_range is None else build_cached(b, build_bytes_range, view.visible_range)
    fb_View.Start(b)
    fb_View.AddId(b, vid)
    fb_View.AddSstId(b, sid)
    if rng is not None:
        fb_View.AddVisibleRange(b, rng)
    return fb_View.End(b)


def _read_view(r: FbReader):
    def convert(fb: fb_View.CompactedSsTableView) -> t.CompactedSsTableView:
        rng = r.sub(fb, _vo(2), fb_BytesRange.BytesRange, "CompactedSsTableView.visible_range")
        return t.CompactedSsTableView(
            id=read_ulid(r.req(fb, _vo(0), fb_Ulid.Ulid, "CompactedSsTableView.id")),
            sst_id=read_ulid(r.req(fb, _vo(1), fb_Ulid.Ulid, "CompactedSsTableView.sst_id")),
            visible_range=None if rng is None else read_bytes_range(r, rng),
        )

    return convert


def _build_sorted_run_v2(b: flatbuffers.Builder, sr: t.SortedRunV2) -> int:
    views = build_cached(b, _build_views, sr.ssts)
    fb_SortedRunV2.Start(b)
    fb_SortedRunV2.AddId(b, sr.id)
    fb_SortedRunV2.AddSsts(b, views)
    return fb_SortedRunV2.End(b)


def _read_sorted_run_v2(r: FbReader):
    def convert(fb: fb_SortedRunV2.SortedRunV2) -> t.SortedRunV2:
        ssts = r.tables(fb, _vo(1), fb_View.CompactedSsTableView, _read_view(r), "SortedRunV2.ssts", True)
        return t.SortedRunV2(id=fb.Id(), ssts=ssts)

    return convert


def _build_sst_v2(b: flatbuffers.Builder, sst: t.CompactedSsTableV2) -> int:
    sid = build_ulid(b, sst.id)
    info = build_cached(b, build_sst_info, sst.info)
    fb_CompactedSsTableV2.Start(b)
    fb_CompactedSsTableV2.AddId(b, sid)
    fb_CompactedSsTableV2.AddInfo(b, info)
    if sst.format_version is not None:
        fb_CompactedSsTableV2.AddFormatVersion(b, sst.format_version)
    return fb_CompactedSsTableV2.End(b)


def _read_sst_v2(r: FbReader):
    def convert(fb: fb_CompactedSsTableV2.CompactedSsTableV2) -> t.CompactedSsTableV2:
        return t.CompactedSsTableV2(
            id=read_ulid(r.req(fb, _vo(0), fb_Ulid.Ulid, "CompactedSsTableV2.id")),
            info=read_sst_info(r, r.req(fb, _vo(1), fb_SsTableInfo.SsTableInfo, "CompactedSsTableV2.info")),
            format_version=fb.FormatVersion(),
        )

    return convert


def _build_segment(b: flatbuffers.Builder, seg: t.Segment) -> int:
    prefix = b.CreateByteVector(seg.prefix)
    last = None if seg.last_compacted_l0_sst_view_id is None else build_ulid(b, seg.last_compacted_l0_sst_view_id)
    l0 = build_table_vector(b, [_build_view(b, v) for v in seg.l0])
    compacted = build_table_vector(b, [_build_sorted_run_v2(b, sr) for sr in seg.compacted])
    fb_Segment.Start(b)
    fb_Segment.AddPrefix(b, prefix)
    if last is not None:
        fb_Segment.AddLastCompactedL0SstViewId(b, last)
    fb_Segment.AddL0(b, l0)
    fb_Segment.AddCompacted(b, compacted)
    return fb_Segment.End(b)


def _read_segment(r: FbReader):
    def convert(fb: fb_Segment.Segment) -> t.Segment:
        last = r.sub(fb, _vo(1), fb_Ulid.Ulid, "Segment.last_compacted_l0_sst_view_id")
        return t.Segment(
            prefix=r.bytes_req(fb, _vo(0), "Segment.prefix"),
            last_compacted_l0_sst_view_id=None if last is None else read_ulid(last),
            l0=r.tables(fb, _vo(2), fb_View.CompactedSsTableView, _read_view(r), "Segment.l0", True),
            compacted=r.tables(fb, _vo(3), fb_SortedRunV2.SortedRunV2, _read_sorted_run_v2(r), "Segment.compacted", True),
        )

    return convert


# ---------------------------------------------------------------------------------------------
# ManifestV2
# ---------------------------------------------------------------------------------------------


def _build_manifest_v2(b: flatbuffers.Builder, m: t.ManifestV2) -> int:
    # Every part that is usually the previous manifest's too is spliced in when it was built
    # before (:func:`build_cached`: the same bytes; only in the simulator's runs).
    # A tuple of them the same object as in an earlier manifest (a manifest is the last one with
    # some fields changed) is spliced in whole, its vector with it.
    external = build_cached(b, _build_external_dbs, m.external_dbs) if m.external_dbs else None
    last = None if m.last_compacted_l0_sst_view_id is None else build_ulid(b, m.last_compacted_l0_sst_view_id)
    ssts = build_cached(b, _build_ssts_v2, m.ssts)
    l0 = build_cached(b, _build_views, m.l0)
    compacted = build_cached(b, _build_sorted_runs_v2, m.compacted)
    checkpoints = build_table_vector(b, [build_cached(b, _build_checkpoint, cp) for cp in m.checkpoints])
    tracker = None if m.sequence_tracker is None else b.CreateByteVector(m.sequence_tracker)
    segments = build_table_vector(b, [_build_segment(b, s) for s in m.segments])
    extractor = None if m.segment_extractor_name is None else b.CreateString(m.segment_extractor_name)

    fb_ManifestV2.Start(b)
    fb_ManifestV2.AddManifestId(b, 0)  # the id is the object name; 0 as the official writer does
    if external is not None:
        fb_ManifestV2.AddExternalDbs(b, external)
    fb_ManifestV2.AddInitialized(b, m.initialized)
    fb_ManifestV2.AddWriterEpoch(b, m.writer_epoch)
    fb_ManifestV2.AddCompactorEpoch(b, m.compactor_epoch)
    fb_ManifestV2.AddReplayAfterWalId(b, m.replay_after_wal_id)
    fb_ManifestV2.AddWalIdLastSeen(b, m.wal_id_last_seen)
    if last is not None:
        fb_ManifestV2.AddLastCompactedL0SstViewId(b, last)
    fb_ManifestV2.AddSsts(b, ssts)
    fb_ManifestV2.AddL0(b, l0)
    fb_ManifestV2.AddCompacted(b, compacted)
    fb_ManifestV2.AddLastL0ClockTick(b, m.last_l0_clock_tick)
    fb_ManifestV2.AddCheckpoints(b, checkpoints)
    fb_ManifestV2.AddLastL0Seq(b, m.last_l0_seq)
    fb_ManifestV2.AddRecentSnapshotMinSeq(b, m.recent_snapshot_min_seq)
    if tracker is not None:
        fb_ManifestV2.AddSequenceTracker(b, tracker)
    fb_ManifestV2.AddSegments(b, segments)
    if extractor is not None:
        fb_ManifestV2.AddSegmentExtractorName(b, extractor)
    if m.destroyed_at_s:
        fb_ManifestV2.AddDestroyedAtS(b, m.destroyed_at_s)
    return fb_ManifestV2.End(b)


def _build_external_dbs(b: flatbuffers.Builder, dbs: tuple[t.ExternalDb, ...]) -> int:
    return build_table_vector(b, [build_cached(b, _build_external_db, db) for db in dbs])


def _build_ssts_v2(b: flatbuffers.Builder, ssts: tuple[t.CompactedSsTableV2, ...]) -> int:
    return build_table_vector(b, [build_cached(b, _build_sst_v2, s) for s in ssts])


def _build_views(b: flatbuffers.Builder, views: tuple[t.CompactedSsTableView, ...]) -> int:
    return build_table_vector(b, [build_cached(b, _build_view, v) for v in views])


def _build_sorted_runs_v2(b: flatbuffers.Builder, runs: tuple[t.SortedRunV2, ...]) -> int:
    return build_table_vector(b, [build_cached(b, _build_sorted_run_v2, sr) for sr in runs])


def _read_manifest_v2(r: FbReader, fb: fb_ManifestV2.ManifestV2) -> t.ManifestV2:
    last = r.sub(fb, _vo(7), fb_Ulid.Ulid, "ManifestV2.last_compacted_l0_sst_view_id")
    return t.ManifestV2(
        manifest_id=fb.ManifestId(),
        external_dbs=r.tables(fb, _vo(1), fb_ExternalDb.ExternalDb, _read_external_db(r), "ManifestV2.external_dbs"),
        initialized=fb.Initialized(),
        writer_epoch=fb.WriterEpoch(),
        compactor_epoch=fb.CompactorEpoch(),
        replay_after_wal_id=fb.ReplayAfterWalId(),
        wal_id_last_seen=fb.WalIdLastSeen(),
        last_compacted_l0_sst_view_id=None if last is None else read_ulid(last),
        ssts=r.tables(fb, _vo(8), fb_CompactedSsTableV2.CompactedSsTableV2, _read_sst_v2(r), "ManifestV2.ssts", True),
        l0=r.tables(fb, _vo(9), fb_View.CompactedSsTableView, _read_view(r), "ManifestV2.l0", True),
        compacted=r.tables(fb, _vo(10), fb_SortedRunV2.SortedRunV2, _read_sorted_run_v2(r), "ManifestV2.compacted", True),
        last_l0_clock_tick=fb.LastL0ClockTick(),
        checkpoints=r.tables(fb, _vo(12), fb_Checkpoint.Checkpoint, _read_checkpoint(r), "ManifestV2.checkpoints", True),
        last_l0_seq=fb.LastL0Seq(),
        recent_snapshot_min_seq=fb.RecentSnapshotMinSeq(),
        sequence_tracker=r.bytes_opt(fb, _vo(15), "ManifestV2.sequence_tracker"),
        segments=r.tables(fb, _vo(16), fb_Segment.Segment, _read_segment(r), "ManifestV2.segments"),
        segment_extractor_name=r.string_opt(fb, _vo(17), "ManifestV2.segment_extractor_name"),
        destroyed_at_s=fb.DestroyedAtS(),
    )


# ---------------------------------------------------------------------------------------------
# ManifestV1 (legacy)
# ---------------------------------------------------------------------------------------------


def _build_sorted_run_v1(b: flatbuffers.Builder, sr: t.SortedRun) -> int:
    ssts = build_table_vector(b, [build_compacted_sst(b, s) for s in sr.ssts])
    fb_SortedRun.Start(b)
    fb_SortedRun.AddId(b, sr.id)
    fb_SortedRun.AddSsts(b, ssts)
    return fb_SortedRun.End(b)


def _read_sorted_run_v1(r: FbReader):
    def convert(fb: fb_SortedRun.SortedRun) -> t.SortedRun:
        ssts = r.tables(fb, _vo(1), fb_CompactedSsTable.CompactedSsTable, read_compacted_sst(r), "SortedRun.ssts", True)
        return t.SortedRun(id=fb.Id(), ssts=ssts)

    return convert


def _build_manifest_v1(b: flatbuffers.Builder, m: t.ManifestV1) -> int:
    external = (
        build_table_vector(b, [_build_external_db(b, db) for db in m.external_dbs]) if m.external_dbs else None
    )
    last = None if m.l0_last_compacted is None else build_ulid(b, m.l0_last_compacted)
    l0 = build_table_vector(b, [build_compacted_sst(b, s) for s in m.l0])
    compacted = build_table_vector(b, [_build_sorted_run_v1(b, sr) for sr in m.compacted])
    checkpoints = build_table_vector(b, [_build_checkpoint(b, cp) for cp in m.checkpoints])
    uri = None if m.wal_object_store_uri is None else b.CreateString(m.wal_object_store_uri)
    tracker = None if m.sequence_tracker is None else b.CreateByteVector(m.sequence_tracker)

    fb_ManifestV1.Start(b)
    fb_ManifestV1.AddManifestId(b, 0)
    if external is not None:
        fb_ManifestV1.AddExternalDbs(b, external)
    fb_ManifestV1.AddInitialized(b, m.initialized)
    fb_ManifestV1.AddWriterEpoch(b, m.writer_epoch)
    fb_ManifestV1.AddCompactorEpoch(b, m.compactor_epoch)
    fb_ManifestV1.AddReplayAfterWalId(b, m.replay_after_wal_id)
    fb_ManifestV1.AddWalIdLastSeen(b, m.wal_id_last_seen)
    if last is not None:
        fb_ManifestV1.AddL0LastCompacted(b, last)
    fb_ManifestV1.AddL0(b, l0)
    fb_ManifestV1.AddCompacted(b, compacted)
    fb_ManifestV1.AddLastL0ClockTick(b, m.last_l0_clock_tick)
    fb_ManifestV1.AddCheckpoints(b, checkpoints)
    fb_ManifestV1.AddLastL0Seq(b, m.last_l0_seq)
    if uri is not None:
        fb_ManifestV1.AddWalObjectStoreUri(b, uri)
    fb_ManifestV1.AddRecentSnapshotMinSeq(b, m.recent_snapshot_min_seq)
    if tracker is not None:
        fb_ManifestV1.AddSequenceTracker(b, tracker)
    return fb_ManifestV1.End(b)


def _read_manifest_v1(r: FbReader, fb: fb_ManifestV1.ManifestV1) -> t.ManifestV1:
    last = r.sub(fb, _vo(7), fb_Ulid.Ulid, "ManifestV1.l0_last_compacted")
    return t.ManifestV1(
        manifest_id=fb.ManifestId(),
        external_dbs=r.tables(fb, _vo(1), fb_ExternalDb.ExternalDb, _read_external_db(r), "ManifestV1.external_dbs"),
        initialized=fb.Initialized(),
        writer_epoch=fb.WriterEpoch(),
        compactor_epoch=fb.CompactorEpoch(),
        replay_after_wal_id=fb.ReplayAfterWalId(),
        wal_id_last_seen=fb.WalIdLastSeen(),
        l0_last_compacted=None if last is None else read_ulid(last),
        l0=r.tables(fb, _vo(8), fb_CompactedSsTable.CompactedSsTable, read_compacted_sst(r), "ManifestV1.l0", True),
        compacted=r.tables(fb, _vo(9), fb_SortedRun.SortedRun, _read_sorted_run_v1(r), "ManifestV1.compacted", True),
        last_l0_clock_tick=fb.LastL0ClockTick(),
        checkpoints=r.tables(fb, _vo(11), fb_Checkpoint.Checkpoint, _read_checkpoint(r), "ManifestV1.checkpoints", True),
        last_l0_seq=fb.LastL0Seq(),
        wal_object_store_uri=r.string_opt(fb, _vo(13), "ManifestV1.wal_object_store_uri"),
        recent_snapshot_min_seq=fb.RecentSnapshotMinSeq(),
        sequence_tracker=r.bytes_opt(fb, _vo(15), "ManifestV1.sequence_tracker"),
    )
