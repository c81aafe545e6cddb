"""A point lookup that searches a V2 block without decoding it whole (``block.seek_key_v2``), and
the reader's cold lookups built on it (``SstReader.lookup_cached(..., read_now=True)`` in an SST
too large for read-ahead: the block searched, its checked bytes cached as a ``RawBlock`` with its
last answer, searched again for another key, decoded whole by the third key's lookup).

The answers are the whole-block decoder's, key by key; a restart offset that does not start an
entry of the chain the whole decoder walks is a ``CorruptionError`` naming the object, or (when
the lookup's answer does not depend on it) the right answer: never a wrong one.
"""

from __future__ import annotations

import gc
import struct

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format import block as blk
from slatedb.format.compression import frame_block
from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import NEED_IO, SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.lsm.cache import BlockCache
from slatedb.row import Row, RowKind

from .test_block_columns import _newest, sorted_rows
from .test_sst import FakeStore


def _whole(raw: bytes, key: bytes) -> tuple[list[int], bool]:
    """What the whole-block decoder says: the metas of ``key``'s rows, and whether every key of
    the block is <= ``key`` (the lookup goes on to the next block)."""
    b = blk.decode_block_v2(raw, "x", 0)
    return [b._metas[i] for i, k in enumerate(b.keys) if k == key], all(k <= key for k in b.keys)


def _probes(keys: list[bytes]) -> list[bytes]:
    return sorted(set(keys) | {k + b"\x00" for k in keys} | {k[:-1] for k in keys if len(k) > 1}
                  | {b"\x00", b"\xff" * 13})


def _seek(raw: bytes, key: bytes) -> tuple[list[int], bool]:
    spans, ended = blk.seek_key_v2(raw, key, "x", 0)
    b = blk.decode_block_v2(raw, "x", 0) if spans else None
    for value_start, meta in zip(spans[::2], spans[1::2]):  # the value span is the stored value's
        i = b._metas.index(meta)  # type: ignore[union-attr]
        row = b.row(i)  # type: ignore[union-attr]
        assert row.kind is RowKind.TOMBSTONE or raw[value_start:meta] == row.value
    return list(spans[1::2]), ended


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows(max_keys=80))
def test_seek_finds_what_the_whole_decode_finds(rows: list[Row]) -> None:
    raw = blk.encode_block_v2(rows)
    for key in _probes([r.key for r in rows]):
        assert _seek(raw, key) == _whole(raw, key), key


def test_keys_at_and_around_restart_points_the_first_and_the_last() -> None:
    rows = [Row(b"key%05d" % i, 9, RowKind.VALUE, b"v%d" % i, None, 1) for i in range(0, 200, 2)]
    raw = blk.encode_block_v2(rows)
    _, restarts = blk.parse_block_v2_trailer(raw, "x", 0)
    assert len(restarts) == 7  # 100 rows, a restart every 16
    at = [0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 95, 96, 97, 98, 99]
    for i in at:
        key = rows[i].key
        value_start, meta = blk.seek_key_v2(raw, key, "x", 0)[0]
        assert raw[value_start:meta] == rows[i].value
        assert blk.seek_key_v2(raw, key, "x", 0)[1] is (i == 99)
        for absent in (b"key%05d" % (2 * i + 1), key[:-1], key + b"\x00"):
            spans, ended = blk.seek_key_v2(raw, absent, "x", 0)
            assert spans == () and ended is (absent > rows[-1].key), absent
    assert blk.seek_key_v2(raw, b"a", "x", 0) == ((), False)  # before the first key
    assert blk.seek_key_v2(raw, b"z", "x", 0) == ((), True)  # after the last


def test_versions_of_a_key_across_restart_points_come_newest_first() -> None:
    rows = [Row(b"a", 1, RowKind.VALUE, b"0")] + [Row(b"k", 100 - s, RowKind.VALUE, b"%d" % s) for s in range(40)]
    rows.append(Row(b"z", 1, RowKind.TOMBSTONE, b""))
    raw = blk.encode_block_v2(rows)
    spans, ended = blk.seek_key_v2(raw, b"k", "x", 0)
    assert [raw[a:m] for a, m in zip(spans[::2], spans[1::2])] == [b"%d" % s for s in range(40)] and not ended
    assert [struct.unpack_from(">Q", raw, m)[0] for m in spans[1::2]] == list(range(100, 60, -1))


def test_a_restart_at_an_entry_sharing_a_prefix_is_caught_where_versions_run_over_it() -> None:
    """Restart 2 moved onto a later version of the key (an entry with ``shared`` > 0): the
    lookup of that key walks its versions over it and raises, as the whole decoder does."""
    rows = [Row(b"a", 1, RowKind.VALUE, b"0")] + [Row(b"k", 100 - s, RowKind.VALUE, b"%d" % s) for s in range(40)]
    rows.append(Row(b"z", 1, RowKind.TOMBSTONE, b""))
    raw = blk.encode_block_v2(rows)
    b = blk.decode_block_v2(raw, "x", 0)
    restarts = _restarts_of(raw)
    restarts[2] = b._metas[32] + 9  # entry 33 (no timestamps): a version of b"k", with shared = 1
    damaged = _with_restarts(raw, restarts)
    with pytest.raises(CorruptionError):
        blk.decode_block_v2(damaged, "x", 0)
    with pytest.raises(CorruptionError) as e:
        blk.seek_key_v2(damaged, b"k", "obj", 0)
    assert "shares a key prefix" in e.value.reason


def test_a_restart_before_the_search_at_an_entry_sharing_a_prefix_is_caught() -> None:
    """Restart 1 moved onto entry 20 (``shared`` > 0): the search for row 70 never reads
    restart 1's key, but the walk of the chain up to restart 4 meets it and raises."""
    raw = blk.encode_block_v2(PREFIXED)
    b = blk.decode_block_v2(raw, "x", 0)
    restarts = _restarts_of(raw)
    restarts[1] = b._metas[19] + 17  # entry 20
    damaged = _with_restarts(raw, restarts)
    with pytest.raises(CorruptionError) as e:
        blk.seek_key_v2(damaged, PREFIXED[70].key, "obj", 0)
    assert "shares a key prefix" in e.value.reason


def _with_restarts(raw: bytes, restarts: list[int]) -> bytes:
    n = len(restarts)
    entries_end = len(raw) - 2 * ((raw[-2] << 8 | raw[-1]) + 1)
    return raw[:entries_end] + struct.pack(f">{n}H", *restarts) + struct.pack(">H", n)


PREFIXED = [Row(b"key%05d" % i, 9, RowKind.VALUE, b"value %d" % i, None, 1) for i in range(80)]


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("shift", [1, 3, -1, -2])
def test_a_restart_offset_inside_an_entry_is_a_typed_error_never_a_wrong_answer(k, shift) -> None:
    """Restart ``k`` moved into an entry (its CRC would match: a faulty writer). A lookup of a
    row at or after it raises (its search starts there, or walks over it); one before it raises
    (its binary search read the damaged restart) or answers right."""
    raw = blk.encode_block_v2(PREFIXED)
    _, restarts = blk.parse_block_v2_trailer(raw, "x", 0)
    bad = list(restarts)
    bad[k] += shift
    damaged = _with_restarts(raw, bad)
    with pytest.raises(CorruptionError):
        blk.decode_block_v2(damaged, "x", 0)
    raised = 0
    for i, row in enumerate(PREFIXED):
        try:
            got = _seek_metas(damaged, row.key)
        except CorruptionError as e:
            assert e.object_name == "obj" and e.offset is not None and e.offset >= 100
            raised += 1
            continue
        assert got == _seek_metas(raw, row.key), i  # the answer of the undamaged block
        assert i < 16 * k, f"row {i}, at or after the damaged restart {k}, answered"
    assert raised >= len(PREFIXED) - 16 * k


def _seek_metas(raw: bytes, key: bytes) -> tuple[tuple[int, ...], bool]:
    return blk.seek_key_v2(raw, key, "obj", 100)


@pytest.mark.parametrize("restarts, what", [
    ([0, 70000 % 65536, 200], "out of order"),
    ([0, 150, 140, 300], "out of order"),
    ([0, 150, 150, 300], "repeated"),
    ([5, 150], "not at 0"),
    ([0, 60000], "out of range"),
])
def test_restart_offsets_out_of_order_or_range_are_typed_errors(restarts, what) -> None:
    raw = _with_restarts(blk.encode_block_v2(PREFIXED), restarts)
    for row in (PREFIXED[0], PREFIXED[40], PREFIXED[-1]):
        try:
            got = blk.seek_key_v2(raw, row.key, "obj", 0)
        except CorruptionError as e:
            assert e.object_name == "obj"
            continue
        assert got == blk.seek_key_v2(blk.encode_block_v2(PREFIXED), row.key, "obj", 0), (what, row.key)
    with pytest.raises(CorruptionError):
        blk.seek_key_v2(raw, PREFIXED[-1].key, "obj", 0)  # walks over every restart offset


@pytest.mark.parametrize("raw", [b"", b"\x00", b"\x00\x00", b"\x00\x00\x00\x05", b"abc\x00\x00\x00\x01"])
def test_a_block_too_short_for_its_restarts_is_a_typed_error(raw) -> None:
    with pytest.raises(CorruptionError) as e:
        blk.seek_key_v2(raw, b"k", "obj", 10)
    assert e.value.object_name == "obj"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows(max_keys=50), st.data())
def test_damaged_restart_offsets_raise_or_answer_as_the_undamaged_block(rows: list[Row], data) -> None:
    """Any restart offsets (the entries intact, as a faulty writer could leave them under a
    matching CRC): each lookup raises the typed error or gives the undamaged block's answer."""
    raw = blk.encode_block_v2(rows)
    _, restarts = blk.parse_block_v2_trailer(raw, "x", 0)
    bad = list(restarts)
    for _ in range(data.draw(st.integers(1, 3))):
        bad[data.draw(st.integers(0, len(bad) - 1))] = data.draw(
            st.one_of(st.integers(0, len(raw)), st.integers(0, 65535)))
    damaged = _with_restarts(raw, bad)
    for key in _probes([r.key for r in rows]):
        try:
            got = blk.seek_key_v2(damaged, key, "obj", 0)
        except CorruptionError as e:
            assert e.object_name == "obj"
            continue
        assert got == blk.seek_key_v2(raw, key, "obj", 0), key


# -- the reader's cold lookups -----------------------------------------------------------------


class DirectStore(FakeStore):
    """A store that also reads on the calling thread (as a local directory does)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        super().__init__(objects)
        self.now: list[tuple[int, int]] = []

    def read_range_now(self, key: str, start: int, end: int) -> bytes:
        self.now.append((start, end))
        return self.objects[key][start:end]


def _cold_reader(rows: list[Row], block_size: int = 512, data: bytes | None = None):
    data = data if data is not None else write_sst(rows, SstOptions(block_size_bytes=block_size, min_filter_keys=0)).data
    store = DirectStore({"s": data})
    cache = BlockCache(1 << 20)
    reader = trio.run(lambda: SstReader.open(store, "s", block_cache=cache, cache_id="s"))
    reader._readahead = False  # as in an SST over a quarter of the cache (tests/db covers that)
    store.gets.clear()  # the open's reads
    return reader, cache, store


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sorted_rows(), st.sampled_from([64, 256, 1024]), st.data())
def test_cold_lookups_answer_the_newest_version_at_or_below_max_seq(rows, block_size, data) -> None:
    """A block searched on first touch (a ``RawBlock`` left in the cache), searched or decoded
    whole on the next touches: each answer is the model's, as a row or (a value without
    expiry) as the value itself."""
    reader, cache, store = _cold_reader(rows, block_size)
    keys = sorted({r.key for r in rows})
    probes = keys + [k + b"\x00" for k in keys] + [b"\x00", b"\xff" * 13]
    seqs = [None, 0] + [r.seq for r in rows]
    for _ in range(40):
        key = data.draw(st.sampled_from(probes))
        max_seq = data.draw(st.sampled_from(seqs))
        want = _newest(rows, key, max_seq)
        if data.draw(st.booleans()):
            cache.clear()
        for value_ok in (True, False):
            got = reader.lookup_cached(key, max_seq, value_ok, True)
            if value_ok and type(got) is bytes:
                assert want is not None and want.kind is RowKind.VALUE and want.expire_ts_ms is None
                assert got == want.value
            else:
                assert got == want, (key, max_seq)
    assert store.gets == []  # nothing through the event loop


def test_a_cold_block_is_searched_then_decoded_whole_by_the_third_search(monkeypatch) -> None:
    """The lookup that reads a block searches it (a ``RawBlock`` cached); the same key again is
    answered by that search's answer at any seq (no search, no filter probe); a second key is
    searched again; the third decodes the block whole."""
    import slatedb.format.sst_reader as sst_reader

    searched: list[bytes] = []
    seek = blk.seek_key_v2

    def counting_seek(raw, key, object_name, offset):
        searched.append(key)
        return seek(raw, key, object_name, offset)

    monkeypatch.setattr(sst_reader, "seek_key_v2", counting_seek)
    monkeypatch.setattr(blk, "seek_key_v2", counting_seek)
    rows = [Row(b"key%05d" % i, 1 + i % 2, RowKind.VALUE, b"v%05d" % i * 8, None, 5) for i in range(400)]
    reader, cache, store = _cold_reader(rows)
    i = reader.index.find_block(rows[3].key)
    assert reader.lookup_cached(rows[3].key, None, True) is NEED_IO
    assert reader.lookup_cached(rows[3].key, None, True, True) == rows[3].value
    raw_block = cache.get(("s", i))
    assert type(raw_block) is blk.RawBlock and raw_block.lookups == 1 and searched == [rows[3].key]
    assert cache.size_bytes == raw_block.size_bytes + 128  # weighed as the decoded block would be
    # The same key again: the last search's answer, at any seq, and no filter probe.
    monkeypatch.setattr(reader, "might_contain", lambda key: pytest.fail("probed"))
    assert reader.lookup_cached(rows[3].key, None, False) == rows[3]
    assert reader.lookup_cached(rows[3].key, 1, True) is None  # rows[3] is seq 2: none at or below 1
    assert reader.lookup_cached(rows[3].key, 2, True) == rows[3].value
    assert searched == [rows[3].key] and raw_block.lookups == 1 and len(store.now) == 1
    monkeypatch.undo()
    monkeypatch.setattr(sst_reader, "seek_key_v2", counting_seek)
    monkeypatch.setattr(blk, "seek_key_v2", counting_seek)
    # A second key: searched (no read: the cached bytes), and the block's answer is now its own.
    assert reader.lookup_cached(rows[4].key, None, False) == rows[4]
    assert cache.get(("s", i)) is raw_block and raw_block.lookups == 2 and raw_block.last[0] == rows[4].key
    gc.collect()  # the kept answer is a flat tuple: the cyclic GC stops tracking it (16,000 of them in a full cache)
    assert not gc.is_tracked(raw_block.last)
    assert reader.lookup_cached(rows[4].key, None, True) == rows[4].value and raw_block.lookups == 2
    assert searched == [rows[3].key, rows[4].key] and len(store.now) == 1
    # A third: the block decoded whole, for every lookup to come.
    assert reader.lookup_cached(rows[5].key, None, True) == rows[5].value
    assert type(cache.get(("s", i))) is blk.Block and len(searched) == 2 and len(store.now) == 1
    assert reader.lookup_cached(rows[6].key, None, True) == rows[6].value
    # A miss the bloom filter rules out leaves a searched block as it is.
    rows = [Row(b"key%05d" % i, 1, RowKind.VALUE, b"v%05d" % i * 8, None, 5) for i in range(1200)]
    reader, cache, store = _cold_reader(rows, data=write_sst(rows, SstOptions(block_size_bytes=512)).data)
    assert reader.filter is not None
    i = reader.index.find_block(rows[3].key)
    assert reader.lookup_cached(rows[3].key, None, True, True) == rows[3].value
    ruled_out = [b"key%05d~" % n for n in range(0, 20) if not reader.might_contain(b"key%05d~" % n)]
    assert ruled_out and all(reader.index.find_block(k) == i for k in ruled_out[:3])
    for key in ruled_out:
        assert reader.lookup_cached(key, None, True, True) is None
    assert type(cache.get(("s", i))) is blk.RawBlock and cache.get(("s", i)).lookups == 1
    # The scan path decodes a searched block whole.
    (block,) = reader.read_blocks_now(i, i + 1)
    assert i == 0 and list(block.keys) == [r.key for r in rows[: len(block.keys)]] and len(block.keys) > 5
    assert cache.get(("s", i)) is block and len(store.now) == 1


def test_a_corrupt_restart_offset_in_an_sst_block_is_a_typed_error_naming_the_object() -> None:
    """The block's CRC matches (a faulty writer): the cold lookup's restart check raises."""
    rows = [Row(b"key%05d" % i, 1, RowKind.VALUE, b"v%05d" % i * 8, None, 5) for i in range(400)]
    data = bytearray(write_sst(rows, SstOptions(block_size_bytes=2048, min_filter_keys=0)).data)
    reader, _, _ = _cold_reader(rows, data=bytes(data))
    start, end = reader.index.block_range(0)
    raw = bytes(data[start : end - 4])  # no compression: the payload is the raw block
    _, restarts = blk.parse_block_v2_trailer(raw, "s", 0)
    assert len(restarts) >= 2
    bad = _with_restarts(raw, [restarts[0], restarts[1] + 2] + list(restarts[2:]))
    data[start:end] = frame_block(0, bad)
    reader, cache, store = _cold_reader(rows, data=bytes(data))
    block_rows = [r for r in rows if reader.index.find_block(r.key) == 0]
    with pytest.raises(CorruptionError) as e:
        reader.lookup_cached(block_rows[-1].key, None, True, True)
    assert e.value.object_name == "s" and start <= e.value.offset < end
    assert cache.get(("s", 0)) is None  # nothing cached of it
    for row in block_rows:
        try:
            got = reader.lookup_cached(row.key, None, True, True)
        except CorruptionError as e:
            assert e.object_name == "s" and start <= e.offset < end
        else:
            assert got == row.value and block_rows.index(row) < 16  # before the damaged restart


def _key(i: int) -> bytes:
    return bytes([0x30 + i]) + b"-row"  # no two keys share a prefix: every entry has shared = 0


def _block_with_fake_entry(n: int, j: int, fake_key: bytes) -> tuple[list[Row], bytes, list[int], int]:
    """``n`` rows whose row ``j`` carries, in its value, bytes that read as a whole entry of key
    ``fake_key`` ending where row ``j`` ends (its seq and flags are row ``j``'s): a restart offset
    pointed there decodes plausibly. No key shares a prefix with the one before, so every entry
    could be a restart point: only the chain checks tell a misplaced offset. Returns the rows, the
    block, its entries' offsets and the fake entry's offset."""
    fake = bytes([0, len(fake_key), 10]) + fake_key + b"f" * 10
    rows = [Row(_key(i), 9, RowKind.VALUE, fake if i == j else b"value %d" % i, None, 1) for i in range(n)]
    raw = blk.encode_block_v2(rows)
    b = blk.decode_block_v2(raw, "x", 0)
    starts = [0] + [m + 17 for m in b._metas[:-1]]  # seq, flags, create_ts after each value
    assert starts[16] == blk.parse_block_v2_trailer(raw, "x", 0)[1][1]
    return rows, raw, starts, b._metas[j] - len(fake)


def _restarts_of(raw: bytes) -> list[int]:
    return list(blk.parse_block_v2_trailer(raw, "x", 0)[1])


@pytest.mark.parametrize("case", ["search starts inside an entry", "first restart not at 0",
                                  "a restart passed over", "a restart inside the last entry",
                                  "a restart before the search's out of order"])
def test_a_misplaced_restart_offset_that_reads_as_an_entry_is_caught(case) -> None:
    """Restart offsets that point at plausible entries (a faulty writer under a matching CRC):
    at one hidden in a value, or at a real entry that is not where the block's restarts are.
    Each case is caught by one of the chain checks alone: without the first two the lookup
    answers wrong (a key present reads as absent); the last three keep a block whose restart
    offsets disagree with its entries from answering at all, as the whole decoder does."""
    if case == "search starts inside an entry":
        rows, raw, starts, fake_at = _block_with_fake_entry(80, 15, _key(5))
        restarts = _restarts_of(raw)
        restarts[1] = fake_at  # the search for row 10 starts at the fake row 5, then meets row 16
        key = rows[10].key
    elif case == "first restart not at 0":
        rows, raw, starts, _ = _block_with_fake_entry(80, 70, b"\x7f")
        restarts = _restarts_of(raw)
        restarts[0] = starts[3]  # a real entry: the search for row 1 starts at row 3
        key = rows[1].key
    elif case == "a restart passed over":
        rows, raw, starts, fake_at = _block_with_fake_entry(80, 20, b"\x7f\x7f")
        restarts = _restarts_of(raw)
        restarts[2] = fake_at  # the search for row 25 starts at row 16 and walks over row 20
        key = rows[25].key
    elif case == "a restart inside the last entry":
        rows, raw, starts, fake_at = _block_with_fake_entry(40, 39, b"\x7f\x7f")
        restarts = _restarts_of(raw)
        restarts[2] = fake_at  # the search for b"\x7f" walks from row 16 to the end
        key = b"\x7f"
    else:
        rows, raw, starts, _ = _block_with_fake_entry(80, 70, b"\x7f")
        restarts = _restarts_of(raw)
        restarts[1] = starts[48]  # a real entry past restart 2, where the search for row 40 starts
        key = rows[40].key
    damaged = _with_restarts(raw, restarts)
    with pytest.raises(CorruptionError):
        blk.decode_block_v2(damaged, "x", 0)
    assert blk.seek_key_v2(raw, key, "x", 0) == _seek_metas(raw, key)  # the undamaged block answers
    with pytest.raises(CorruptionError) as e:
        blk.seek_key_v2(damaged, key, "obj", 100)
    assert e.value.object_name == "obj" and e.value.offset >= 100
