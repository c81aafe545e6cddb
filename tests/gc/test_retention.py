"""The pure retention functions of slatedb/gc/retention.py, on hand-built manifests."""

from __future__ import annotations

from ulid import ULID

from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, Segment, SortedRunV2, SsTableInfo
from slatedb.gc.retention import manifest_sst_ids


def _ulid(n: int) -> ULID:
    return ULID.from_int((1_600_000_000_000 + n) << 80)


def _view(n: int, sst: int) -> CompactedSsTableView:
    return CompactedSsTableView(_ulid(100 + n), _ulid(sst))


def test_manifest_sst_ids_is_every_sst_any_part_of_the_manifest_names() -> None:
    """The ``ssts`` table, L0 and sorted-run views, and the same in every segment (written by an
    official writer with a segment extractor; this engine carries segments without interpreting
    them, so GC must keep their SSTs)."""
    m = ManifestV2(
        ssts=(CompactedSsTableV2(_ulid(1), SsTableInfo(first_entry=b"a")),),
        l0=(_view(2, 2),),
        compacted=(SortedRunV2(0, (_view(3, 3),)),),
        segments=(Segment(b"p/", l0=(_view(4, 4),), compacted=(SortedRunV2(1, (_view(5, 5), _view(6, 6))),)),
                  Segment(b"q/", l0=(_view(7, 7),))),
    )
    assert manifest_sst_ids(m) == {_ulid(i) for i in range(1, 8)}
    assert manifest_sst_ids(ManifestV2()) == set()
