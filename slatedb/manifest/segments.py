"""Refusing a database with key segments (RFC 0024), which this engine does not implement.

The official 0.17 engine, given a segment extractor at creation, keeps one LSM tree per key
segment in the manifest's ``segments`` and the extractor's name in ``segment_extractor_name``;
it refuses to open such a database without the same extractor. This engine reads and writes the
root tree only: it would read a segmented database as empty and write keys where the official
engine never looks; a clone of it would reference its segments' SSTs without listing them. So every
opener of rows (writer, reader, compactor, a Spark read or bulk load) and a clone refuse it first, before
writing anything (tests/interop/test_segments_interop.py). The manifest codec still carries both
fields unchanged (spec/format/format.md).
"""

from __future__ import annotations

from slatedb.errors import SegmentsUnsupportedError
from slatedb.format.types import ManifestV2
from slatedb.redact import shown_url


def refuse_segments(m: ManifestV2, url: str, what: str) -> None:
    """:class:`SegmentsUnsupportedError` (an ``InvalidDbStateError``) when ``m`` has key segments or
    a segment extractor."""
    if m.segment_extractor_name is None and not m.segments:
        return
    name = "none named" if m.segment_extractor_name is None else repr(m.segment_extractor_name)
    raise SegmentsUnsupportedError(
        f"cannot {what}: the database at {shown_url(url)} has key segments (RFC 0024; segment extractor {name}, "
        f"{len(m.segments)} segment(s)), written by an official engine with a segment extractor; "
        f"this engine does not implement segments (open it with the official engine and the same extractor)")


def segments_json(m: ManifestV2) -> dict:
    """``read-manifest``'s view of the segments, only when the manifest has any (``{}`` else):
    this engine refuses such a database but shows the operator where its rows are."""
    if m.segment_extractor_name is None and not m.segments:
        return {}
    return {"segment_extractor_name": m.segment_extractor_name,
            "segments": [{"prefix_hex": seg.prefix.hex(), "l0": [str(v.sst_id) for v in seg.l0],
                          "compacted": [{"id": r.id, "ssts": [str(v.sst_id) for v in r.ssts]} for r in seg.compacted]}
                         for seg in m.segments]}


def segments_text(view: dict) -> list[str]:
    """The text lines of :func:`segments_json`'s view (none when it is empty)."""
    if "segments" not in view:
        return []
    lines = [f"  segments ({len(view['segments'])}, extractor {view['segment_extractor_name'] or '-'}; "
             f"this engine does not open them):"]
    for s in view["segments"]:
        runs = " ".join(f"run {r['id']} ({len(r['ssts'])} SSTs)" for r in s["compacted"]) or "-"
        lines.append(f"    prefix {bytes.fromhex(s['prefix_hex'])!r}: L0 ({len(s['l0'])}) {' '.join(s['l0']) or '-'}; "
                     f"sorted runs ({len(s['compacted'])}) {runs}")
    return lines
