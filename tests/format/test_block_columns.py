"""The cached block form (columns, rows built on demand) against the row decoder it replaced,
and the read paths built on it (``SstReader.locate_cached``/``get_cached_value`` skipping the
bloom filter for cached blocks; the one-source scan taking plain blocks as columns) against
plain models.

Each equivalence is a hypothesis property: block bytes (valid or damaged) decode to the same rows
or to a ``CorruptionError`` either way; a cached lookup answers what the newest version at or
below ``max_seq`` is; a scan yields what :func:`slatedb.merge.visible` yields over the rows.
"""

from __future__ import annotations

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format import block as blk
from slatedb.format.row_codec import decode_entries_v2
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import NEED_IO, SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.lsm.cache import BlockCache
from slatedb.lsm.scan import MergeScan, NeedIO, SstSource
from slatedb.lsm.view import KeyBounds, SstHandle
from slatedb.merge import visible
from slatedb.row import Row, RowKind

from .test_sst import FakeStore

_KINDS = st.sampled_from([RowKind.VALUE, RowKind.VALUE, RowKind.VALUE, RowKind.TOMBSTONE, RowKind.MERGE_OPERAND])
_TS = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))


@st.composite
def sorted_rows(draw, max_keys: int = 60, plain: bool = False) -> list[Row]:
    """Rows in SST order (key ascending, seq descending within a key)."""
    keys = sorted(draw(st.sets(st.binary(min_size=1, max_size=12), min_size=1, max_size=max_keys)))
    rows = []
    for key in keys:
        n = 1 if plain else draw(st.integers(1, 3))
        seqs = sorted(draw(st.sets(st.integers(0, 2**64 - 1) if not plain else st.integers(0, 50),
                                   min_size=n, max_size=n)), reverse=True)
        for seq in seqs:
            kind = RowKind.VALUE if plain else draw(_KINDS)
            value = b"" if kind is RowKind.TOMBSTONE else draw(st.binary(max_size=300))
            expire = None if plain else draw(_TS)
            rows.append(Row(key, seq, kind, value, expire, draw(_TS)))
    return rows


def _check(block: blk.Block, rows: list[Row]) -> None:
    assert list(block.keys) == [r.key for r in rows]
    assert [block.row(i) for i in range(len(rows))] == rows
    assert [block.seq(i) for i in range(len(rows))] == [r.seq for r in rows]
    assert block.rows == rows
    final = all(r.kind is RowKind.VALUE and r.expire_ts_ms is None for r in rows)
    assert block.values_final is final
    if final:
        assert list(block.values) == [r.value for r in rows]
    unique = len({r.key for r in rows}) == len(rows)
    assert block.plain_max_seq == (max(r.seq for r in rows) if final and unique else None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows())
def test_columns_decode_the_rows_the_row_decoder_decodes(rows: list[Row]) -> None:
    raw = blk.encode_block_v2(rows)
    entries_end, restarts = blk.parse_block_v2_trailer(raw, "o", 0)
    _, want = decode_entries_v2(raw, entries_end, restarts, "o", 0)
    assert want == rows
    _check(blk.decode_block_v2(raw, "o", 0), rows)
    _check(blk.decode_block_v2(raw, "o", 0), rows)  # accessors in another order: rows built last
    b = blk.decode_block_v2(raw, "o", 0)
    assert b.rows == rows and [b.row(i) for i in range(len(rows))] == rows


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows(max_keys=8), st.data())
def test_damaged_blocks_decode_alike_or_raise_corruption_alike(rows: list[Row], data) -> None:
    raw = bytearray(blk.encode_block_v2(rows))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):][: data.draw(st.integers(0, 4))]
    raw = bytes(raw)

    def old():
        entries_end, restarts = blk.parse_block_v2_trailer(raw, "obj", 7)
        return decode_entries_v2(raw, entries_end, restarts, "obj", 7)[1]

    try:
        want = old()
    except CorruptionError as e:
        want = e
    try:
        got = blk.decode_block_v2(raw, "obj", 7)
    except CorruptionError as e:
        assert isinstance(want, CorruptionError), (want, e)
        assert e.object_name == "obj"
        return
    assert not isinstance(want, CorruptionError), want
    assert got.rows == want
    assert [got.row(i) for i in range(len(want))] == want


@st.composite
def _prefix_runs(draw) -> list[Row]:
    """Plain rows whose keys share prefixes of runs of equal lengths (consecutive entries with
    the same ``shared``: the decoder reuses the prefix), some sharing nothing mid-interval."""
    stems = sorted(draw(st.sets(st.binary(min_size=0, max_size=4), min_size=1, max_size=6)))
    keys = sorted({stem + tail for stem in stems
                   for tail in draw(st.sets(st.binary(min_size=1, max_size=3), min_size=1, max_size=12))})
    return [Row(k, 7, RowKind.VALUE, draw(st.binary(max_size=140))) for k in keys]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(sorted_rows(max_keys=12), _prefix_runs()), st.data())
def test_the_fast_column_loop_answers_what_the_checked_loop_answers(rows: list[Row], data) -> None:
    """``decode_columns_v2`` (checks without per-entry bookkeeping, a reused prefix) against
    ``_decode_columns_v2_checked`` (entry by entry): the same columns, or the same
    ``CorruptionError`` (object, offset and reason), for valid and damaged entries and for any
    list of restart offsets (missing, extra, repeated, out of order, inside entries)."""
    from slatedb.format.row_codec import _decode_columns_v2_checked, decode_columns_v2

    raw = bytearray(blk.encode_block_v2(rows))
    entries_end, restarts = blk.parse_block_v2_trailer(bytes(raw), "o", 0)
    if data.draw(st.booleans()):
        for _ in range(data.draw(st.integers(1, 3))):
            raw[data.draw(st.integers(0, entries_end - 1))] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        restarts = data.draw(st.lists(st.integers(0, entries_end + 2), max_size=6))
    raw = bytes(raw)

    def run(fn):
        try:
            return fn(raw, entries_end, restarts, "obj", 9)
        except CorruptionError as e:
            return ("error", e.object_name, e.offset, e.reason)

    assert run(decode_columns_v2) == run(_decode_columns_v2_checked)


def test_the_fast_column_loop_sends_an_overrun_an_empty_key_and_a_long_prefix_to_the_checked_loop() -> None:
    """Damages the property above seldom draws: the last entry's value running past the
    entries (into the restart offsets), an empty key after the restart point, and a shared
    prefix longer than the previous key."""
    from slatedb.format.row_codec import decode_columns_v2

    def error(raw: bytes) -> CorruptionError:
        with pytest.raises(CorruptionError) as e:
            decode_columns_v2(raw, len(raw) - 4, [0], "obj", 9)
        assert e.value.object_name == "obj"
        return e.value

    raw = bytearray(blk.encode_block_v2([Row(b"k", 1, RowKind.VALUE, b"vv")]))
    assert raw[2] == 2  # value_len of the only entry
    raw[2] = 3
    assert "runs past the end" in error(bytes(raw)).reason
    raw = blk.encode_block_v2([Row(b"a", 1, RowKind.VALUE, b"v"), Row(b"", 1, RowKind.VALUE, b"v")], check=False)
    assert "empty key" in error(raw).reason
    raw = bytearray(blk.encode_block_v2([Row(b"k", 1, RowKind.VALUE, b"v"), Row(b"ka", 1, RowKind.VALUE, b"v")]))
    second = 3 + 1 + 1 + 9
    assert raw[second : second + 2] == b"\x01\x01"  # shared 1, unshared 1
    raw[second] = 2
    assert "shared prefix longer" in error(bytes(raw)).reason


def test_a_bad_flags_byte_is_a_typed_error_naming_the_object() -> None:
    rows = [Row(b"key%02d" % i, 5, RowKind.VALUE, b"v", None, 7) for i in range(20)]
    raw = bytearray(blk.encode_block_v2(rows))
    flags_at = 3 + len(rows[0].key) + 1 + 8
    assert raw[flags_at] == 0x04  # has create_ts
    for bad in (0x14, 0x09, 0x84):
        raw[flags_at] = bad
        try:
            blk.decode_block_v2(bytes(raw), "obj", 100)
        except CorruptionError as e:
            assert e.object_name == "obj" and e.offset == 100 and "flags" in e.reason
        else:
            raise AssertionError(f"flags 0x{bad:02x} accepted")


def test_a_tombstone_carrying_value_bytes_reads_as_the_row_decoder_reads_it() -> None:
    """The format lets a tombstone's entry carry value bytes (``value_len`` > 0); both decoders
    read its value as ``b""``."""
    rows = [Row(b"key%02d" % i, 5, RowKind.VALUE, b"vvv", None, 7) for i in range(20)]
    raw = bytearray(blk.encode_block_v2(rows))
    flags_at = 3 + len(rows[0].key) + 3 + 8
    assert raw[flags_at] == 0x04
    raw[flags_at] = 0x05  # tombstone, create_ts
    raw = bytes(raw)
    entries_end, restarts = blk.parse_block_v2_trailer(raw, "o", 0)
    _, want = decode_entries_v2(raw, entries_end, restarts, "o", 0)
    assert want[0].kind is RowKind.TOMBSTONE and want[0].value == b""
    got = blk.decode_block_v2(raw, "o", 0)
    assert got.values[0] == b"" and got.rows == want and not got.values_final


def _newest(rows: list[Row], key: bytes, max_seq: int | None) -> Row | None:
    for r in rows:
        if r.key == key and (max_seq is None or r.seq <= max_seq):
            return r
    return None


def _reader(rows: list[Row], block_size: int, cache_bytes: int):
    enc = write_sst(rows, SstOptions(block_size_bytes=block_size, min_filter_keys=0))
    store = FakeStore({"s": enc.data})
    cache = BlockCache(cache_bytes)
    reader = trio.run(lambda: SstReader.open(store, "s", block_cache=cache, cache_id="s"))
    return reader, cache


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows(), st.sampled_from([64, 256, 4096]), st.data())
def test_cached_lookups_answer_the_newest_version_at_or_below_max_seq(rows, block_size, data) -> None:
    """Cold (NEED_IO, then ``get`` loads), framed read-ahead bytes, and decoded blocks: each
    answer is the model's, with or without a bloom probe (it is skipped for decoded blocks)."""
    reader, cache = _reader(rows, block_size, 1 << 30)
    keys = sorted({r.key for r in rows})
    probes = keys + [k + b"\x00" for k in keys] + [b"\x00", b"\xff" * 13]
    seqs = [None, 0] + [r.seq for r in rows]
    for _ in range(40):
        key = data.draw(st.sampled_from(probes))
        max_seq = data.draw(st.sampled_from(seqs))
        want = _newest(rows, key, max_seq)
        got = reader.get_cached(key, max_seq)
        if got is NEED_IO:
            assert trio.run(reader.get, key, max_seq) == want
            got = reader.get_cached(key, max_seq)
        assert got is not NEED_IO and got == want
        value = reader.get_cached_value(key, max_seq)
        if type(value) is bytes:
            assert want is not None and want.kind is RowKind.VALUE and want.expire_ts_ms is None
            assert value == want.value
        else:
            assert value == want


def test_a_corrupt_cached_block_is_a_typed_error_naming_the_object() -> None:
    rows = [Row(b"key%05d" % i, 1, RowKind.VALUE, b"v" * 50, None, 5) for i in range(400)]
    reader, cache = _reader(rows, 4096, 1 << 30)
    assert trio.run(reader.get, rows[0].key) == rows[0]  # reads ahead: framed bytes in the cache
    i = reader.index.find_block(rows[-1].key)
    framed = bytearray(cache.get(("s", i)))
    assert type(cache.get(("s", i))) is bytes
    framed[10] ^= 0x40
    cache[("s", i)] = bytes(framed)
    try:
        reader.get_cached(rows[-1].key)
    except CorruptionError as e:
        assert e.object_name == "s" and "CRC" in str(e)
    else:
        raise AssertionError("a damaged block was decoded")


def test_damaged_read_ahead_bytes_answer_a_key_the_bloom_filter_rules_out_as_absent() -> None:
    """Framed bytes read ahead are decoded before the bloom filter is asked (a hit needs the
    block anyway); when they are damaged, a key the filter rules out is still absent (as when the
    filter was asked first) and a key it does not rule out meets the typed error."""
    rows = [Row(b"key%05d" % i, 1, RowKind.VALUE, b"v" * 50, None, 5) for i in range(0, 800, 2)]
    reader, cache = _reader(rows, 4096, 1 << 30)
    assert trio.run(reader.get, rows[0].key) == rows[0]  # reads ahead: framed bytes in the cache
    i = reader.index.find_block(rows[-1].key)
    framed = bytearray(cache.get(("s", i)))
    framed[10] ^= 0x40
    cache[("s", i)] = bytes(framed)
    absent = [b"key%05d" % k for k in range(1, 800, 2) if reader.index.find_block(b"key%05d" % k) == i]
    ruled_out = [k for k in absent if not reader.might_contain(k)]
    assert ruled_out
    for key in ruled_out:
        assert reader.get_cached_value(key) is None and reader.get_cached(key) is None
    for key in [r.key for r in rows if reader.index.find_block(r.key) == i]:
        with pytest.raises(CorruptionError) as e:
            reader.get_cached_value(key)
        assert e.value.object_name == "s" and "CRC" in str(e.value)
    assert type(cache.get(("s", i))) is bytes  # still the damaged bytes: never decoded


def test_read_ahead_blocks_enter_the_cache_in_one_batch_and_lookups_keep_the_lru_order() -> None:
    """``BlockCache.add_absent`` (a read-ahead's blocks) adds only what is missing, within the
    capacity, least recently used out first; a reader's lookup (``c_lookups``) marks its block
    recently used as ``BlockCache.get`` does."""
    from slatedb.format.block import Block

    cache = BlockCache(10 * (1000 + 128))
    cache[("s", 0)] = kept = Block(keys=[], values=[], size_bytes=1000)
    cache.add_absent([(("s", k), b"x" * 1000) for k in range(0, 5)])
    assert cache.get(("s", 0)) is kept and len(cache) == 5
    cache.add_absent([(("s", k), b"x" * 1000) for k in range(3, 13)])
    assert cache.size_bytes == 10 * (1000 + 128) == cache.capacity_bytes
    # The get above made 0 recent; 1, 2, 3 were the oldest; 3 and 4 were not added again.
    assert [k for _, k in cache._entries] == [4, 0] + list(range(5, 13))
    rows = [Row(b"key%05d" % i, 1, RowKind.VALUE, b"v" * 50) for i in range(400)]
    reader, cache = _reader(rows, 4096, 1 << 30)
    lookup, touch = cache.c_lookups()
    assert reader._cache_lookup == lookup and reader._cache_touch == touch
    assert trio.run(reader.get, rows[0].key) == rows[0]
    order = list(cache._entries)
    assert len(order) > 2 and order[0] == ("s", 1) and order[-1] == ("s", 0)
    key = reader.index.first_keys[1]
    assert reader.get_cached_value(key) == b"v" * 50  # decodes block 1's read-ahead bytes
    assert reader.get_cached_value(rows[0].key) == rows[0].value  # block 0: decoded already
    assert list(cache._entries)[-2:] == [("s", 1), ("s", 0)]  # block 0 is the most recently used


def _concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + b"+" + operand


def _scan(reader: SstReader, bounds: KeyBounds, max_seq: int, n: int, reverse: bool = False,
          ceiling: int | None = None) -> list:
    h = SstHandle(None, None, reader, KeyBounds())  # type: ignore[arg-type]
    merge = MergeScan([SstSource([h], bounds, reverse, ceiling)], reverse=reverse, max_seq=max_seq, now_ms=0, op=_concat)
    out = []
    while True:
        try:
            batch = merge.next_batch(n)
        except NeedIO as e:
            src = e.source
            r, first, last = src.io_request()
            src.supply(first, trio.run(r.read_blocks, first, last))
            continue
        assert len(batch) <= n  # a pending key emitted before a plain block's columns counts too
        if not batch:
            return out
        out += batch


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(sorted_rows(plain=True), sorted_rows()), st.sampled_from([64, 256, 4096]),
       st.integers(1, 70), st.data())
def test_one_source_scans_yield_what_the_merge_model_yields(rows, block_size, n, data) -> None:
    """The heap-free one-source scan (plain blocks as columns, others row by row, a key's
    versions across blocks) against :func:`visible`, at any seq, within any bounds."""
    # Plain runs with a straddling key: the newest version closes one block, older ones open
    # the next (small blocks make that common).
    reader, _ = _reader(rows, block_size, 1 << 30)
    keys = sorted({r.key for r in rows})
    max_seq = data.draw(st.sampled_from([0, 2**64 - 1] + [r.seq for r in rows]))
    lo = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
    hi = data.draw(st.one_of(st.none(), st.sampled_from(keys)))
    bounds = KeyBounds(lo, True, hi, data.draw(st.booleans()))
    want = [(k, v) for k, v in visible(iter(rows), snapshot_seq=max_seq, now_ms=0, op=_concat) if bounds.contains(k)]
    assert _scan(reader, bounds, max_seq, n) == want
    assert _scan(reader, bounds, max_seq, n, reverse=True) == want[::-1]
    # With the SST's true ceiling (its highest seq, as DUR-2 bounds a view's SSTs by the
    # manifest's last_l0_seq) a scan at or above it skips the blocks' highest seqs: same rows.
    ceiling = max(r.seq for r in rows)
    assert _scan(reader, bounds, max_seq, n, ceiling=ceiling) == want
    assert _scan(reader, bounds, max_seq, n, reverse=True, ceiling=ceiling) == want[::-1]


def test_a_scan_at_or_above_the_seq_ceiling_reads_no_row_seq_and_below_it_does() -> None:
    """A forward scan at or above its SSTs' seq ceiling takes plain blocks as columns without
    computing any block's highest seq (no row's seq read); below the ceiling, or with none
    known, every plain block's highest seq decides, so a newer version stays hidden. The
    ceiling is only as good as DUR-2: one that understates the rows lets a row above the scan's
    seq through (which is why it is the manifest's ``last_l0_seq`` and nothing less)."""
    rows = [Row(b"k%04d" % i, 100 + i, RowKind.VALUE, b"v%04d" % i) for i in range(200)]
    top = rows[-1].seq
    want = [(r.key, r.value) for r in rows]
    for ceiling, max_seq, hidden in ((top, top, False), (top, 2**64 - 1, False), (None, top, True), (top + 1, top, True)):
        reader, cache = _reader(rows, 256, 1 << 30)
        assert _scan(reader, KeyBounds(), max_seq, 1000, ceiling=ceiling) == want
        blocks = [cache.get(("s", i)) for i in range(len(reader.index))]
        assert len(blocks) > 5 and all(b is not None and b.plain for b in blocks)
        computed = [b._plain is not False for b in blocks]
        assert all(computed) if hidden else not any(computed), (ceiling, max_seq)
    reader, _ = _reader(rows, 256, 1 << 30)
    below = [(r.key, r.value) for r in rows if r.seq <= 150]
    assert _scan(reader, KeyBounds(), 150, 1000, ceiling=top) == below  # below the ceiling
    reader, _ = _reader(rows, 256, 1 << 30)
    assert _scan(reader, KeyBounds(), 150, 1000, ceiling=150) != below  # an understated ceiling


def test_a_plain_block_ending_on_a_key_whose_versions_go_on_emits_it_once() -> None:
    """The newest version of ``k`` closes a plain block (taken as columns) and older ones open
    the next: ``k`` is emitted once, with its newest value."""
    straddles = 0
    for pad in range(8):
        rows = [Row(b"a%03d" % i, 10, RowKind.VALUE, b"x" * 40) for i in range(pad)]
        rows += [Row(b"k", seq, RowKind.VALUE, bytes([seq]) * 40) for seq in (9, 8)]
        rows += [Row(b"z%03d" % i, 10, RowKind.VALUE, b"y" * 40) for i in range(20)]
        reader, cache = _reader(rows, 256, 1 << 30)
        want = list(visible(iter(rows), snapshot_seq=100, now_ms=0))
        for n in (1, 3, 1000):
            assert _scan(reader, KeyBounds(), 100, n) == want
        i = reader.index.first_keys.index(b"k") if b"k" in reader.index.first_keys else -1
        if i > 0:
            block = cache.get(("s", i - 1))
            straddles += block.keys[-1] == b"k" and block.plain_max_seq is not None
    assert straddles  # the case happened
