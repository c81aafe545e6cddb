"""Structural checks of a decoded manifest (spec/protocols/sequenced-metadata.md, "A manifest
is checked before it is built on").

A ``.manifest`` has no checksum: many bit flips decode to another valid FlatBuffer. Those that
break the structure every writer of either engine keeps are caught here, before anything is
written on top of the manifest (:meth:`~slatedb.manifest.store.ManifestStore.commit`) and when a
database or reader opens it, so a damaged manifest is never copied forward and the error names
the damaged object. What the structure cannot tell (a flipped byte inside a key, a timestamp) is
caught when the SST it points at is read, or not at all: the honest limit of the format.
"""

from __future__ import annotations

from slatedb.errors import CorruptionError
from slatedb.format import memo
from slatedb.format.types import (
    BoundType,
    CompactedSsTableView,
    CompressionFormat,
    FilterFormat,
    ManifestV2,
    SstType,
)

from slatedb.format.layout import manifest_key

#: SST format versions a manifest may name (absent = 1).
_SST_VERSIONS = (None, 1, 2)


def manifest_problem(m: ManifestV2, manifest_id: int) -> str | None:
    """The first structural problem of manifest ``manifest_id``, or None."""
    ids = set()
    for s in m.ssts:
        if s.id in ids:
            return f"SST {s.id} listed twice"
        ids.add(s.id)
        problem = _sst_problem(s.info, s.format_version)
        if problem:
            return f"SST {s.id}: {problem}"
    views: set = set()
    for where, view in [("l0", v) for v in m.l0] + [(f"sorted run {r.id}", v) for r in m.compacted for v in r.ssts]:
        if view.sst_id not in ids:
            return f"{where} view {view.id} refers to SST {view.sst_id}, which the manifest does not list"
        # A view id repeated with another range occurs (the official union, projection-union.md).
        if view in views:
            return f"{where} view {view.id} of SST {view.sst_id} listed twice"
        views.add(view)
        problem = _range_problem(view)
        if problem:
            return f"{where} view {view.id}: {problem}"
    runs = [r.id for r in m.compacted]
    if len(set(runs)) != len(runs):
        return f"sorted run ids repeat: {runs}"
    for c in m.checkpoints:
        if c.manifest_id > manifest_id or c.manifest_id < 1:
            return f"checkpoint {c.id} pins manifest {c.manifest_id}, not an id up to {manifest_id}"
    return None


def _sst_problem(info, format_version) -> str | None:
    if format_version not in _SST_VERSIONS:
        return f"unknown SST format version {format_version}"
    for name, enum, value in (("compression_format", CompressionFormat, info.compression_format),
                              ("sst_type", SstType, info.sst_type), ("filter_format", FilterFormat, info.filter_format)):
        if value not in enum.__members__.values():
            return f"unknown {name} {int(value)}"
    if info.sst_type != SstType.COMPACTED:
        return "a WAL SST among the compacted SSTs"
    # Blocks in order, back to back (slatedb-format.md section 4): data, filter, index, stats.
    if info.filter_offset + info.filter_len != info.index_offset:
        return (f"filter block [{info.filter_offset}, +{info.filter_len}) does not end where the index "
                f"starts ({info.index_offset})")
    if info.stats_len and info.index_offset + info.index_len != info.stats_offset:
        return (f"index block [{info.index_offset}, +{info.index_len}) does not end where the stats "
                f"start ({info.stats_offset})")
    if info.first_entry is not None and info.last_entry is not None and info.first_entry > info.last_entry:
        return "first key after last key"
    return None


def _range_problem(view: CompactedSsTableView) -> str | None:
    r = view.visible_range
    if r is None:
        return None
    for b in (r.start_bound, r.end_bound):
        if b.bound_type not in BoundType.__members__.values() or b.bound_type == BoundType.UNKNOWN:
            return f"visible range bound of type {int(b.bound_type)}"
        if (b.bound_type == BoundType.UNBOUNDED) != (b.key is None):
            return "visible range bound with a key and no bound, or a bound and no key"
    lo, hi = r.start_bound, r.end_bound
    if lo.key is not None and hi.key is not None and lo.key > hi.key:
        return "visible range start after its end"
    return None


#: Manifest values found well formed, by (id of the value, manifest id), within a simulated run
#: (:func:`slatedb.format.memo.active`): the processes of a world commit on the same decoded
#: value (the decode caches share it), each checked once. The value is kept in the entry, so its
#: id stays its own; cleared when the run ends.
_FINE: dict[tuple[int, int], ManifestV2] = {}
_MAX_FINE = 4096


def check_manifest(m: ManifestV2, manifest_id: int) -> None:
    """Raise :class:`CorruptionError` naming ``manifest/<id>.manifest`` if ``m`` is malformed."""
    remembering = memo.active()
    if remembering and _FINE.get((id(m), manifest_id)) is m:
        return  # the same frozen value, found well formed before
    problem = manifest_problem(m, manifest_id)
    if problem is not None:
        raise CorruptionError(manifest_key(manifest_id), None, f"malformed manifest: {problem}")
    if remembering:
        if len(_FINE) >= _MAX_FINE:
            _FINE.clear()
        _FINE[(id(m), manifest_id)] = m


memo._AT_END.append(_FINE.clear)  # dropped when the simulated run ends
