"""Manifest codec: round-trips, official-file decoding, V1 reading, corruption behaviour.

The corruption properties, stated honestly: a manifest carries no checksum, so a flipped byte
can turn it into a *different but well-formed* manifest, which no decoder can detect. What we
guarantee (and test) is:

* any mutation: decoding raises :class:`CorruptionError` or returns a value; never any other
  exception;
* truncation: decoding raises :class:`CorruptionError`, or (only when the cut removed nothing
  but trailing alignment padding) returns exactly the original value;
* unknown versions and a missing header raise.
"""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format import manifest as mf
from slatedb.format import types as t

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
ulids = st.integers(0, 2**128 - 1).map(ULID.from_int)
uuids = st.integers(0, 2**128 - 1).map(lambda n: uuid.UUID(int=n))
keys = st.binary(max_size=12)
opt_text = st.none() | st.text(max_size=12)

sst_infos = st.builds(
    t.SsTableInfo,
    first_entry=st.none() | keys,
    index_offset=u64,
    index_len=u64,
    filter_offset=u64,
    filter_len=u64,
    compression_format=st.sampled_from(t.CompressionFormat),
    sst_type=st.sampled_from(t.SstType),
    last_entry=st.none() | keys,
    stats_offset=u64,
    stats_len=u64,
    filter_format=st.sampled_from(t.FilterFormat),
)
bounds = st.builds(t.BytesBound, key=st.none() | keys, bound_type=st.sampled_from(t.BoundType))
ranges = st.builds(t.BytesRange, start_bound=bounds, end_bound=bounds)
format_versions = st.none() | st.integers(0, 2**16 - 1)


def tuples(elem, max_size: int = 3):
    return st.lists(elem, max_size=max_size).map(tuple)


compacted_ssts = st.builds(
    t.CompactedSsTable, id=ulids, info=sst_infos, visible_range=st.none() | ranges, format_version=format_versions
)
ssts_v2 = st.builds(t.CompactedSsTableV2, id=ulids, info=sst_infos, format_version=format_versions)
views = st.builds(t.CompactedSsTableView, id=ulids, sst_id=ulids, visible_range=st.none() | ranges)
runs_v1 = st.builds(t.SortedRun, id=u32, ssts=tuples(compacted_ssts))
runs_v2 = st.builds(t.SortedRunV2, id=u32, ssts=tuples(views))
external_dbs = st.builds(
    t.ExternalDb,
    path=st.text(max_size=12),
    source_checkpoint_id=uuids,
    final_checkpoint_id=st.none() | uuids,
    sst_ids=tuples(ulids),
)
checkpoints = st.builds(
    t.Checkpoint,
    id=uuids,
    manifest_id=u64,
    checkpoint_expire_time_s=u32,
    checkpoint_create_time_s=u32,
    metadata=st.none() | st.builds(t.WriterCheckpoint, epoch=u64),
    name=opt_text,
)
segments = st.builds(
    t.Segment,
    prefix=keys,
    last_compacted_l0_sst_view_id=st.none() | ulids,
    l0=tuples(views),
    compacted=tuples(runs_v2, 2),
)
manifests_v2 = st.builds(
    t.ManifestV2,
    manifest_id=st.just(0),  # always written as 0: the id is the object name
    external_dbs=tuples(external_dbs, 2),
    initialized=st.booleans(),
    writer_epoch=u64,
    compactor_epoch=u64,
    replay_after_wal_id=u64,
    wal_id_last_seen=u64,
    last_compacted_l0_sst_view_id=st.none() | ulids,
    ssts=tuples(ssts_v2),
    l0=tuples(views),
    compacted=tuples(runs_v2, 2),
    last_l0_clock_tick=i64,
    checkpoints=tuples(checkpoints, 2),
    last_l0_seq=u64,
    recent_snapshot_min_seq=u64,
    sequence_tracker=st.none() | st.binary(max_size=30),
    segments=tuples(segments, 2),
    segment_extractor_name=opt_text,
)
manifests_v1 = st.builds(
    t.ManifestV1,
    manifest_id=st.just(0),
    external_dbs=tuples(external_dbs, 2),
    initialized=st.booleans(),
    writer_epoch=u64,
    compactor_epoch=u64,
    replay_after_wal_id=u64,
    wal_id_last_seen=u64,
    l0_last_compacted=st.none() | ulids,
    l0=tuples(compacted_ssts),
    compacted=tuples(runs_v1, 2),
    last_l0_clock_tick=i64,
    checkpoints=tuples(checkpoints, 2),
    last_l0_seq=u64,
    wal_object_store_uri=opt_text,
    recent_snapshot_min_seq=u64,
    sequence_tracker=st.none() | st.binary(max_size=30),
)

SLOW = settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)


@SLOW
@given(manifests_v2)
def test_v2_round_trip(m: t.ManifestV2) -> None:
    data = mf.encode_manifest(m)
    assert data[:2] == b"\x00\x02"
    assert mf.decode_manifest(data, "m") == m


@SLOW
@given(manifests_v1)
def test_v1_round_trip_and_upgrade(m: t.ManifestV1) -> None:
    data = mf.encode_manifest_v1(m)
    assert data[:2] == b"\x00\x01"
    assert mf.decode_manifest(data, "m") == m
    v2 = mf.decode_manifest_v2(data, "m")
    assert v2.l0 == tuple(t.CompactedSsTableView(s.id, s.id, s.visible_range) for s in m.l0)
    assert {s.id for s in v2.ssts} == {s.id for s in m.l0} | {s.id for r in m.compacted for s in r.ssts}
    assert (v2.writer_epoch, v2.last_l0_seq, v2.sequence_tracker) == (m.writer_epoch, m.last_l0_seq, m.sequence_tracker)


def test_manifest_id_is_written_as_zero() -> None:
    data = mf.encode_manifest(t.ManifestV2(manifest_id=42))
    assert mf.decode_manifest(data, "m").manifest_id == 0


def test_fresh_manifest_defaults_match_the_official_engine() -> None:
    assert t.ManifestV2().last_l0_clock_tick == -(2**63)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x03" + bytes(40), b"\xff\xff" + bytes(40)])
def test_bad_header_raises(data: bytes) -> None:
    with pytest.raises(CorruptionError) as info:
        mf.decode_manifest(data, "manifest/00000000000000000001.manifest")
    assert info.value.offset == 0


def test_missing_required_field_raises() -> None:
    import flatbuffers

    from slatedb.format.fb import ManifestV2 as fb_ManifestV2

    b = flatbuffers.Builder(64)
    fb_ManifestV2.Start(b)
    fb_ManifestV2.AddWriterEpoch(b, 3)
    b.Finish(fb_ManifestV2.End(b))
    with pytest.raises(CorruptionError, match="required field ManifestV2.ssts"):
        mf.decode_manifest(struct.pack(">H", 2) + bytes(b.Output()), "m")


@SLOW
@given(manifests_v2, st.data())
def test_mutations_raise_only_corruption(m: t.ManifestV2, data) -> None:
    raw = bytearray(mf.encode_manifest(m))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= data.draw(st.integers(1, 255))
    try:
        mf.decode_manifest(bytes(raw), "m")
    except CorruptionError:
        pass  # a decode to some other well-formed manifest is also possible: no checksum


@SLOW
@given(manifests_v2, st.data())
def test_truncation_raises_or_is_identical(m: t.ManifestV2, data) -> None:
    raw = mf.encode_manifest(m)
    cut = data.draw(st.integers(0, len(raw) - 1))
    try:
        decoded = mf.decode_manifest(raw[:cut], "m")
    except CorruptionError:
        return
    assert decoded == m
    assert cut >= len(raw) - 7, "only trailing alignment padding may be cut without an error"


def test_every_truncation_of_a_full_manifest_raises() -> None:
    sst = t.CompactedSsTableV2(ULID.from_int(7), t.SsTableInfo(first_entry=b"a", last_entry=b"z"), 2)
    m = t.ManifestV2(
        initialized=True,
        writer_epoch=2,
        ssts=(sst,),
        l0=(t.CompactedSsTableView(sst.id, sst.id),),
        sequence_tracker=b"\x01\x00\x00\x00\x00",
        checkpoints=(t.Checkpoint(uuid.UUID(int=5), 3, metadata=t.WriterCheckpoint(2), name="n"),),
    )
    raw = mf.encode_manifest(m)
    for cut in range(len(raw)):
        with pytest.raises(CorruptionError):
            mf.decode_manifest(raw[:cut], "m")
