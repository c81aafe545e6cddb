"""The official ``VersionedManifest`` (and its SST, view, sorted-run and checkpoint records) of one
of our stored manifests, for ``Admin.read_manifest`` / ``list_manifests``."""

from __future__ import annotations

from typing import Any

from slatedb.format import types as t
import slatedb.uniffi.values as v

_CODECS = {t.CompressionFormat.SNAPPY: v.CompressionCodec.SNAPPY, t.CompressionFormat.ZLIB: v.CompressionCodec.ZLIB,
           t.CompressionFormat.LZ4: v.CompressionCodec.LZ4, t.CompressionFormat.ZSTD: v.CompressionCodec.ZSTD}


def _range(r: t.BytesRange | None) -> v.KeyRange | None:
    if r is None:
        return None
    lo, hi = r.start_bound, r.end_bound
    return v.KeyRange(start=lo.key if lo.bound_type != t.BoundType.UNBOUNDED else None,
                      start_inclusive=lo.bound_type == t.BoundType.INCLUDED,
                      end=hi.key if hi.bound_type != t.BoundType.UNBOUNDED else None,
                      end_inclusive=hi.bound_type == t.BoundType.INCLUDED)


def _size(info: t.SsTableInfo) -> int:
    """The SST's size up to its stats block (the official estimate, data + filter + index)."""
    return max(info.index_offset + info.index_len, info.filter_offset + info.filter_len)


def _handle(sst: t.CompactedSsTableV2) -> v.SsTableHandle:
    i = sst.info
    info = v.SsTableInfo(first_entry=i.first_entry, last_entry=i.last_entry, index_offset=i.index_offset,
                         index_len=i.index_len, filter_offset=i.filter_offset, filter_len=i.filter_len,
                         compression_codec=_CODECS.get(i.compression_format),
                         sst_type=v.SstType.WAL if i.sst_type == t.SstType.WAL else v.SstType.COMPACTED,
                         stats_offset=i.stats_offset, stats_len=i.stats_len,
                         filter_format=v.FilterFormat.COMPOSITE if i.filter_format == t.FilterFormat.COMPOSITE
                         else v.FilterFormat.LEGACY)
    return v.SsTableHandle(id=v.SsTableId(value=str(sst.id)), info=info, estimated_size_bytes=_size(i))


def _views(views: Any, ssts: dict) -> list[v.SsTableView]:
    out = []
    for view in views:
        h = _handle(ssts[view.sst_id])
        out.append(v.SsTableView(id=str(view.id), sst=h, visible_range=_range(view.visible_range),
                                 estimated_size_bytes=h.estimated_size_bytes))
    return out


def _runs(runs: Any, ssts: dict) -> list[v.SortedRun]:
    out = []
    for run in runs:
        views = _views(run.ssts, ssts)
        out.append(v.SortedRun(id=run.id, sst_views=views, estimated_size_bytes=sum(x.estimated_size_bytes for x in views)))
    return out


def checkpoint(c: t.Checkpoint) -> v.Checkpoint:
    return v.Checkpoint(id=str(c.id), manifest_id=c.manifest_id, expire_time_secs=c.checkpoint_expire_time_s or None,
                        create_time_secs=c.checkpoint_create_time_s, name=c.name)


def versioned_manifest(manifest_id: int, m: t.ManifestV2) -> v.VersionedManifest:
    ssts = {s.id: s for s in m.ssts}
    l0_view = str(m.last_compacted_l0_sst_view_id) if m.last_compacted_l0_sst_view_id is not None else None
    l0_sst = None
    if m.last_compacted_l0_sst_view_id is not None:
        l0_sst = l0_view  # the view is gone from l0 once compacted: its id is what the manifest keeps
    return v.VersionedManifest(
        id=manifest_id, writer_epoch=m.writer_epoch, compactor_epoch=m.compactor_epoch,
        external_dbs=[v.ExternalDb(path=e.path, source_checkpoint_id=str(e.source_checkpoint_id),
                                   final_checkpoint_id=None if e.final_checkpoint_id is None else str(e.final_checkpoint_id),
                                   sst_ids=[v.SsTableId(value=str(i)) for i in e.sst_ids]) for e in m.external_dbs],
        initialized=m.initialized, last_compacted_l0_sst_view_id=l0_view, last_compacted_l0_sst_id=l0_sst,
        l0=_views(m.l0, ssts), compacted=_runs(m.compacted, ssts),
        segments=[v.Segment(prefix=s.prefix, last_compacted_l0_sst_view_id=None if s.last_compacted_l0_sst_view_id is None
                            else str(s.last_compacted_l0_sst_view_id), l0=_views(s.l0, ssts),
                            compacted=_runs(s.compacted, ssts)) for s in m.segments],
        next_wal_sst_id=m.wal_id_last_seen + 1, replay_after_wal_id=m.replay_after_wal_id,
        last_l0_clock_tick=m.last_l0_clock_tick, last_l0_seq=m.last_l0_seq,
        recent_snapshot_min_seq=m.recent_snapshot_min_seq, checkpoints=[checkpoint(c) for c in m.checkpoints],
        wal_object_store_uri=None)


_FINISHED = (t.CompactionStatus.COMPLETED, t.CompactionStatus.FAILED)


def _spec(spec: Any) -> Any:
    sources = [v.SourceId.SST_VIEW(str(i)) for i in spec.l0_view_ids] + [v.SourceId.SORTED_RUN(i) for i in spec.sorted_runs]
    if isinstance(spec, t.DrainSegmentSpec):
        return v.CompactionSpec.DRAIN_SEGMENT(segment=spec.segment, sources=sources)
    return v.CompactionSpec.TIERED(segment=spec.segment or b"", sources=sources, destination=spec.destination)


def compaction(c: t.Compaction) -> v.Compaction:
    """The official ``Compaction``. ``bytes_processed`` is a running compactor's in-memory progress,
    not stored in the ``.compactions`` file: 0 here, as the official reports for a job read back."""
    outputs = [_handle(t.CompactedSsTableV2(s.id, s.info, s.format_version)) for s in c.output_ssts]
    return v.Compaction(id=str(c.id), spec=_spec(c.spec), bytes_processed=0,
                        status=v.CompactionStatus[c.status.name], output_ssts=outputs,
                        active=c.status not in _FINISHED)


def versioned_compactions(stored: Any) -> v.VersionedCompactions:
    return v.VersionedCompactions(id=stored.id, compactor_epoch=stored.compactions.compactor_epoch,
                                  recent_compactions=[compaction(c) for c in stored.compactions.recent_compactions])
