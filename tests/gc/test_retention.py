"""The pure retention functions of slatedb/gc/retention.py, on hand-built manifests."""

from __future__ import annotations

from ulid import ULID

from slatedb.format.types import (
    CompactedSsTableV2,
    CompactedSsTableView,
    CompactionsV1,
    ManifestV2,
    Segment,
    SortedRunV2,
    SsTableInfo,
)
from slatedb.gc.retention import compaction_low_watermark_ms, manifest_sst_ids, sst_ulid_cutoff_ms
from slatedb.manifest.sst_ids import newest_l0_ms


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


def test_manifest_sst_ids_asked_again_is_remembered_and_a_new_set(monkeypatch) -> None:  # noqa: ANN001
    """GC asks about the same pinned manifests at every pass: the answer for a manifest object
    asked about before is remembered, and every call gets a set of its own to change."""
    from slatedb.gc import retention

    computed = []
    real = retention._manifest_sst_ids
    monkeypatch.setattr(retention, "_manifest_sst_ids", lambda m: computed.append(m) or real(m))
    m = ManifestV2(ssts=(CompactedSsTableV2(_ulid(1), SsTableInfo()),), l0=(_view(2, 2),))
    first = manifest_sst_ids(m)
    first.add(_ulid(99))  # the caller's own set
    again = manifest_sst_ids(m)
    assert again == {_ulid(1), _ulid(2)} and again is not first
    again.discard(_ulid(1))  # a set of its own again
    assert manifest_sst_ids(m) == {_ulid(1), _ulid(2)}
    assert computed == [m]
    other = ManifestV2(ssts=(CompactedSsTableV2(_ulid(3), SsTableInfo()),))  # another manifest object
    assert manifest_sst_ids(other) == {_ulid(3)} and computed == [m, other]


def test_without_compactor_state_the_ulid_cutoff_keeps_every_sst() -> None:
    """``compaction_low_watermark_ms`` is 0 when there is no compactions file or it lists no
    compaction: no compactor state to reason from, so the cutoff is 0 whatever the manifest's
    newest L0, and every SST id -- ULID time 0 included -- is at or after it: by the cutoff GC
    deletes none."""
    m = ManifestV2(ssts=(CompactedSsTableV2(_ulid(5), SsTableInfo()),), l0=(_view(5, 5),))
    assert newest_l0_ms(m) > 0
    for compactions in (None, CompactionsV1(compactor_epoch=1)):
        assert compaction_low_watermark_ms(compactions) == 0
        cutoff = sst_ulid_cutoff_ms(m, compactions)
        assert all(u.milliseconds >= cutoff for u in (ULID.from_int(0), ULID.from_int(1 << 80), _ulid(1)))
