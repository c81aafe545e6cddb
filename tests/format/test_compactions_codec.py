"""Compactions-file codec: round-trips (file versions 1 and 2) and corruption behaviour.

Like a manifest, a ``.compactions`` object has no checksum: a flipped byte may decode to a
different well-formed value. Guaranteed: only :class:`CorruptionError` is ever raised, and a
truncation raises unless it cut only trailing padding (then the value is identical).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import compactions as cf
from slatedb.format import types as t

from .test_manifest_codec import SLOW, compacted_ssts, keys, ranges, tuples, u32, u64, ulids

tiered = st.builds(
    t.TieredCompactionSpec,
    sorted_runs=tuples(u32),
    l0_view_ids=tuples(ulids),
    segment=st.none() | keys,
    destination=u32,
)
drain = st.builds(t.DrainSegmentSpec, segment=keys, l0_view_ids=tuples(ulids), sorted_runs=tuples(u32))
ctxs = st.builds(
    t.TieredCompactionContext,
    subcompactions=tuples(st.builds(t.Subcompaction, range=ranges, output_ssts=tuples(compacted_ssts, 2)), 2),
    retention_min_seq=u64,
)
compaction_jobs = st.builds(
    t.Compaction,
    id=ulids,
    spec=tiered | drain,
    status=st.sampled_from(t.CompactionStatus),
    output_ssts=tuples(compacted_ssts, 2),
    worker=st.none() | st.builds(t.WorkerSpec, worker_id=st.none() | st.text(max_size=10), last_heartbeat_ms=u64),
    ctx=st.none() | ctxs,
)
compactions_values = st.builds(t.CompactionsV1, compactor_epoch=u64, recent_compactions=tuples(compaction_jobs))


@SLOW
@given(compactions_values)
def test_round_trip_v2(c: t.CompactionsV1) -> None:
    data = cf.encode_compactions(c)
    assert data[:2] == b"\x00\x02"
    assert cf.decode_compactions(data, "c") == c


def _without_destination(c: t.CompactionsV1) -> t.CompactionsV1:
    import attrs

    jobs = tuple(
        attrs.evolve(j, spec=attrs.evolve(j.spec, destination=0)) if isinstance(j.spec, t.TieredCompactionSpec) else j
        for j in c.recent_compactions
    )
    return attrs.evolve(c, recent_compactions=jobs)


@SLOW
@given(compactions_values.map(_without_destination))
def test_round_trip_v1(c: t.CompactionsV1) -> None:
    data = cf.encode_compactions(c, version=1)
    assert data[:2] == b"\x00\x01"
    assert cf.decode_compactions(data, "c") == c


def test_v1_refuses_a_destination() -> None:
    job = t.Compaction(ULID.from_int(1), t.TieredCompactionSpec(sorted_runs=(3,), destination=3))
    with pytest.raises(InvalidArgumentError):
        cf.encode_compactions(t.CompactionsV1(1, (job,)), version=1)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00" + bytes(20), b"\x00\x03" + bytes(20)])
def test_bad_header_raises(data: bytes) -> None:
    with pytest.raises(CorruptionError):
        cf.decode_compactions(data, "compactions/00000000000000000001.compactions")


def test_unknown_union_type_raises() -> None:
    job = t.Compaction(ULID.from_int(1), t.DrainSegmentSpec(segment=b"p"))
    raw = bytearray(cf.encode_compactions(t.CompactionsV1(1, (job,))))
    # The spec_type byte is the only 0x02 (DrainSegmentSpec) scalar; find it via the decoder.
    for pos in range(2, len(raw)):
        if raw[pos] == 2:
            mutated = bytearray(raw)
            mutated[pos] = 7
            try:
                cf.decode_compactions(bytes(mutated), "c")
            except CorruptionError as e:
                if "union type 7" in e.reason:
                    return
    pytest.fail("no mutation produced the unknown-union error")


@SLOW
@given(compactions_values, st.data())
def test_mutations_raise_only_corruption(c: t.CompactionsV1, data) -> None:
    raw = bytearray(cf.encode_compactions(c))
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] ^= data.draw(st.integers(1, 255))
    try:
        cf.decode_compactions(bytes(raw), "c")
    except CorruptionError:
        pass


@SLOW
@given(compactions_values, st.data())
def test_truncation_raises_or_is_identical(c: t.CompactionsV1, data) -> None:
    raw = cf.encode_compactions(c)
    cut = data.draw(st.integers(0, len(raw) - 1))
    try:
        decoded = cf.decode_compactions(raw[:cut], "c")
    except CorruptionError:
        return
    assert decoded == c
    assert cut >= len(raw) - 7
