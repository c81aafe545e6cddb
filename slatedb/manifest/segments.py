"""Refusing a database with key segments (RFC 0024), which this engine does not implement.

The official 0.17 engine, given a segment extractor at creation, keeps one LSM tree per key
segment in the manifest's ``segments`` and the extractor's name in ``segment_extractor_name``;
it refuses to open such a database without the same extractor. This engine reads and writes the
root tree only: it would read a segmented database as empty and write keys where the official
engine never looks; a clone of it would reference its segments' SSTs without listing them. So every
opener of rows (writer, reader, compactor) and a clone refuse it first, before
writing anything (tests/interop/test_segments_interop.py). The manifest codec still carries both
fields unchanged (spec/format/format.md).
"""

from __future__ import annotations

from slatedb.errors import InvalidDbStateError
from slatedb.format.types import ManifestV2


def refuse_segments(m: ManifestV2, url: str, what: str) -> None:
    """:class:`InvalidDbStateError` when ``m`` has key segments or a segment extractor."""
    if m.segment_extractor_name is None and not m.segments:
        return
    name = "none named" if m.segment_extractor_name is None else repr(m.segment_extractor_name)
    raise InvalidDbStateError(
        f"cannot {what}: the database at {url} has key segments (RFC 0024; segment extractor {name}, "
        f"{len(m.segments)} segment(s)), written by an official engine with a segment extractor; "
        f"this engine does not implement segments (open it with the official engine and the same extractor)")
