"""SST writer and readers: layout, index keys, filter, stats, async ranged reads."""

from __future__ import annotations

import random
import struct
import zlib

import pytest

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import fbcodec
from slatedb.format.block import encode_block_v1
from slatedb.format.bloom import decode_composite_filter
from slatedb.format.compression import CompressionCodec, frame_block
from slatedb.format.sst import (
    SstOptions,
    decode_all_blocks,
    decode_all_rows,
    decode_layout,
    decode_stats,
    encode_info_with_crc,
    encode_trailer,
)
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import compute_index_key, write_sst
from slatedb.format.types import BlockMeta, CompressionFormat, FilterFormat, SsTableInfo, SstType
from slatedb.row import Row, RowKind


class _Result:
    def __init__(self, data: bytes) -> None:
        self.data = data


class _Meta:
    def __init__(self, size: int) -> None:
        self.size_bytes = size


class FakeStore:
    """The two methods of the object-store interface the reader uses, counting requests."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects = objects
        self.gets: list[tuple[int, int] | None] = []
        self.heads = 0

    async def get(self, key, byte_range=None):
        self.gets.append(byte_range)
        data = self.objects[key]
        return _Result(data if byte_range is None else data[byte_range[0] : byte_range[1]])

    async def head(self, key):
        self.heads += 1
        return _Meta(len(self.objects[key]))


def make_rows(n: int, seed: int = 20240601, value_len: int = 100) -> list[Row]:
    rnd = random.Random(seed)
    return [Row(b"key%010d" % i, 1, RowKind.VALUE, rnd.randbytes(value_len), None, 1000 + i) for i in range(n)]


ROWS = make_rows(3000)


def test_compute_index_key():
    assert compute_index_key(None, b"abc") == b""
    assert compute_index_key(b"abc", b"abd") == b"abd"
    assert compute_index_key(b"abcde", b"abd") == b"abd"
    assert compute_index_key(b"ab", b"abcd") == b"abc"
    assert compute_index_key(b"key0000000035", b"key0000000036") == b"key0000000036"
    assert compute_index_key(b"key0000000039", b"key0000000040") == b"key000000004"
    assert compute_index_key(b"same", b"same") == b"same"


def test_layout_of_a_compacted_sst():
    enc = write_sst(ROWS)
    data = enc.data
    meta_off, version = struct.unpack(">QH", data[-10:])
    assert version == 2
    info_bytes = data[meta_off:-14]
    assert struct.unpack(">I", data[-14:-10])[0] == zlib.crc32(info_bytes)
    info = fbcodec.decode_sst_info(info_bytes, "o")
    assert info == enc.info
    assert info.first_entry == ROWS[0].key and info.last_entry == ROWS[-1].key
    assert info.sst_type == SstType.COMPACTED and info.filter_format == FilterFormat.COMPOSITE
    # Order: data blocks, filter, index, stats, info.
    layout = decode_layout(data, "o")
    assert info.filter_offset == layout.index.offsets[-1] > enc.block_meta[-1].offset
    assert info.filter_offset + info.filter_len == info.index_offset
    assert info.index_offset + info.index_len == info.stats_offset
    assert info.stats_offset + info.stats_len == meta_off
    keys = layout.index.first_keys
    assert keys[0] == b""
    # Every index key is the shortest prefix of the block's first key above the previous last key.
    blocks = decode_all_blocks(data, layout)
    for i in range(1, len(blocks)):
        first, prev_last = blocks[i].keys[0], blocks[i - 1].keys[-1]
        assert first.startswith(keys[i]) and keys[i] > prev_last and keys[i][:-1] <= prev_last
    assert decode_all_rows(data, "o") == ROWS
    filt = decode_composite_filter(data[info.filter_offset : info.filter_offset + info.filter_len - 4], "o", 0)
    assert list(filt) == [b"_bf"]
    stats = decode_stats(data[info.stats_offset : info.stats_offset + info.stats_len], info, "o")
    assert stats.num_puts == 3000 and stats.num_deletes == 0 and stats.num_merges == 0
    assert stats.raw_key_size == 3000 * 13 and stats.raw_val_size == 3000 * 100
    assert len(stats.block_stats) == len(enc.block_meta)
    assert sum(b.num_puts for b in stats.block_stats) == 3000


def test_blocks_are_about_block_size():
    enc = write_sst(ROWS)
    offsets = [m.offset for m in enc.block_meta] + [enc.info.filter_offset]
    sizes = [b - a for a, b in zip(offsets, offsets[1:])]
    assert max(sizes) <= 4096 + 4
    assert min(sizes[:-1]) > 3500


def test_filter_threshold():
    assert write_sst(make_rows(999)).info.filter_len == 0
    small = write_sst(make_rows(999))
    assert small.info.filter_offset == small.info.index_offset
    assert write_sst(make_rows(1000)).info.filter_len > 0
    assert write_sst(make_rows(5), SstOptions(min_filter_keys=0)).info.filter_len > 0


def test_bits_per_key_controls_filter_size():
    a = write_sst(make_rows(2000), SstOptions(filter_bits_per_key=10)).info.filter_len
    b = write_sst(make_rows(2000), SstOptions(filter_bits_per_key=20)).info.filter_len
    assert b - a == 2000 * 10 // 8


@pytest.mark.parametrize("codec", list(CompressionCodec))
def test_compression_round_trip(codec):
    enc = write_sst(ROWS, SstOptions(compression=codec))
    assert enc.info.compression_format == codec
    assert decode_all_rows(enc.data, "o") == ROWS


def test_all_row_kinds_and_versions():
    rows = [
        Row(b"a", 9, RowKind.VALUE, b"v9", 123, 5),
        Row(b"a", 8, RowKind.TOMBSTONE, b"", None, 4),
        Row(b"a", 7, RowKind.MERGE_OPERAND, b"m", None, None),
        Row(b"b", 1, RowKind.MERGE_OPERAND, b"", 1, 2),
    ]
    enc = write_sst(rows)
    assert decode_all_rows(enc.data, "o") == rows
    assert enc.stats.num_puts == 1 and enc.stats.num_deletes == 1 and enc.stats.num_merges == 2


def test_writer_rejects_bad_order_and_empty():
    with pytest.raises(InvalidArgumentError):
        write_sst([Row(b"b", 1, RowKind.VALUE), Row(b"a", 1, RowKind.VALUE)])
    with pytest.raises(InvalidArgumentError):
        write_sst([Row(b"a", 1, RowKind.VALUE), Row(b"a", 2, RowKind.VALUE)])
    with pytest.raises(InvalidArgumentError):
        write_sst([])
    with pytest.raises(InvalidArgumentError):
        SstOptions(block_size_bytes=70000)


def test_oversized_rows_get_their_own_blocks():
    rows = [Row(b"k%02d" % i, 1, RowKind.VALUE, bytes([i]) * (9000 if i % 3 == 0 else 10)) for i in range(12)]
    enc = write_sst(rows)
    assert decode_all_rows(enc.data, "o") == rows
    assert len(enc.block_meta) >= 4


# -- async reader --------------------------------------------------------------------------


async def test_open_reads_metadata_in_one_tail_read_when_small():
    enc = write_sst(ROWS[:500])
    store = FakeStore({"s.sst": enc.data})
    reader = await SstReader.open(store, "s.sst")
    assert store.heads == 1 and len(store.gets) == 1
    assert reader.info == enc.info and reader.format_version == 2


async def test_open_with_small_tail_uses_at_most_two_metadata_reads():
    enc = write_sst(make_rows(20000))
    store = FakeStore({"s.sst": enc.data})
    reader = await SstReader.open(store, "s.sst", size_bytes=len(enc.data), tail_read_bytes=10)
    # trailer, metadata, then one read covering filter + index
    assert store.heads == 0 and len(store.gets) == 3
    assert store.gets[0] == (len(enc.data) - 10, len(enc.data))
    assert reader.filter is not None and reader.num_blocks == len(enc.block_meta)


async def test_point_lookups_and_bloom_before_block_reads():
    rows = make_rows(20000)
    enc = write_sst(rows)
    store = FakeStore({"s.sst": enc.data})
    reader = await SstReader.open(store, "s.sst")
    rnd = random.Random(3)
    for i in rnd.sample(range(20000), 300):
        assert await reader.get(rows[i].key) == rows[i]
    n_before = len(store.gets)
    misses = [b"key%010d~" % i for i in range(2000)]
    found = [await reader.get(k) for k in misses]
    assert found == [None] * 2000
    # Bloom filter (10 bits/key, ~1% fp) spares almost every block read.
    assert len(store.gets) - n_before < 60
    n_before = len(store.gets)
    assert await reader.get(b"zzz") is None and await reader.get(b"a") is None
    assert len(store.gets) == n_before  # outside [first_entry, last_entry]: no read at all


async def test_block_cache_serves_repeated_lookups():
    enc = write_sst(ROWS)
    store = FakeStore({"s.sst": enc.data})
    cache: dict = {}
    reader = await SstReader.open(store, "s.sst", block_cache=cache, cache_id=42)
    assert await reader.get(ROWS[100].key) == ROWS[100]
    n = len(store.gets)
    assert await reader.get(ROWS[101].key) == ROWS[101]
    assert len(store.gets) == n
    assert all(k[0] == 42 for k in cache)


async def test_point_lookups_read_ahead_only_in_an_sst_small_beside_the_cache():
    """A cold lookup reads ahead (and caches the blocks it brought) in an SST whose data takes at
    most READAHEAD_MAX_CACHE_SHARE of the block cache; in a larger one it reads its one block,
    instead of evicting dozens of cached blocks per random lookup (the scale curve's 1M-key gets)."""
    from slatedb.format.sst_reader import READAHEAD_MAX_CACHE_SHARE
    from slatedb.lsm.cache import BlockCache

    enc = write_sst(ROWS)
    data_bytes = decode_layout(enc.data, "s.sst").index.offsets[-1]
    key = ROWS[1500].key
    for capacity, reads_ahead in ((int(data_bytes / READAHEAD_MAX_CACHE_SHARE) + 1, True),
                                  (int(data_bytes / READAHEAD_MAX_CACHE_SHARE) - 1, False)):
        store = FakeStore({"s.sst": enc.data})
        cache = BlockCache(capacity)
        reader = await SstReader.open(store, "s.sst", block_cache=cache, cache_id=1)
        n = len(store.gets)
        assert await reader.get(key) == ROWS[1500]
        (lo, hi), = store.gets[n:]
        i = reader.index.find_block(key)
        assert lo == reader.index.offsets[i]
        assert (hi > reader.index.offsets[i + 1]) is reads_ahead, capacity
        assert (len(cache._entries) > 1) is reads_ahead


async def test_versions_straddling_blocks_and_max_seq():
    rows = [Row(b"a", 1, RowKind.VALUE, b"x")]
    rows += [Row(b"k", seq, RowKind.VALUE, bytes([seq % 256]) * 300) for seq in range(100, 0, -1)]
    rows += [Row(b"z", 1, RowKind.VALUE, b"y")]
    enc = write_sst(rows, SstOptions(min_filter_keys=0))
    layout = decode_layout(enc.data, "o")
    assert layout.index.first_keys.count(b"k") > 3  # the key's versions span several blocks
    for cache in (None, {}):
        store = FakeStore({"s": enc.data})
        reader = await SstReader.open(store, "s", block_cache=cache)
        assert (await reader.get(b"k")).seq == 100
        assert (await reader.get(b"k", max_seq=50)).seq == 50
        assert (await reader.get(b"k", max_seq=1)).seq == 1
        assert await reader.get(b"k", max_seq=0) is None
        assert (await reader.get(b"z")).value == b"y"
        assert [r.seq for r in await reader.get_versions(b"k")] == list(range(100, 0, -1))


async def test_scans():
    rows = make_rows(5000)
    enc = write_sst(rows)
    store = FakeStore({"s": enc.data})
    reader = await SstReader.open(store, "s")
    assert [r async for r in reader.scan()] == rows
    assert [r async for r in reader.scan(rows[1234].key, rows[2345].key)] == rows[1234:2345]
    assert [r async for r in reader.scan(rows[1234].key, rows[2345].key, end_inclusive=True)] == rows[1234:2346]
    assert [r async for r in reader.scan(b"key0000001234x", None)] == rows[1235:]
    assert [r async for r in reader.scan(None, b"key0000000003")] == rows[:3]
    assert [r async for r in reader.scan(b"zz")] == []
    assert [r async for r in reader.scan(b"a", b"b")] == []


async def test_truncated_object_is_corruption():
    enc = write_sst(ROWS[:100])
    store = FakeStore({"s": enc.data[:-3]})
    with pytest.raises(CorruptionError):
        await SstReader.open(store, "s")
    store = FakeStore({"s": b""})
    with pytest.raises(CorruptionError):
        await SstReader.open(store, "s")


# -- format version 1 ----------------------------------------------------------------------


def build_v1_sst(rows: list[Row], rows_per_block: int = 7) -> bytes:
    """A format-version-1 SST (block V1, row codec V0) with the same metadata framing."""
    chunks, metas, offset, prev_last = [], [], 0, None
    for i in range(0, len(rows), rows_per_block):
        part = rows[i : i + rows_per_block]
        framed = frame_block(CompressionFormat.NONE, encode_block_v1(part))
        metas.append(BlockMeta(offset, compute_index_key(prev_last, part[0].key)))
        chunks.append(framed)
        offset += len(framed)
        prev_last = part[-1].key
    index = frame_block(CompressionFormat.NONE, fbcodec.encode_sst_index(metas))
    info = SsTableInfo(
        first_entry=rows[0].key, index_offset=offset, index_len=len(index), filter_offset=offset,
        last_entry=rows[-1].key,
    )
    chunks.append(index)
    meta_off = offset + len(index)
    chunks.append(encode_info_with_crc(info))
    chunks.append(encode_trailer(meta_off, 1))
    return b"".join(chunks)


async def test_reads_format_version_1():
    rows = make_rows(100, value_len=10) + [Row(b"key9999999999", 4, RowKind.TOMBSTONE, b"", 5, 6)]
    data = build_v1_sst(rows)
    assert decode_all_rows(data, "v1") == rows
    store = FakeStore({"v1": data})
    reader = await SstReader.open(store, "v1")
    assert reader.format_version == 1
    assert await reader.get(rows[50].key) == rows[50]
    assert await reader.get(b"key9999999999") == rows[-1]
    assert [r async for r in reader.scan(rows[10].key, rows[20].key)] == rows[10:20]


def test_unknown_format_version_is_corruption():
    data = bytearray(write_sst(ROWS[:10]).data)
    data[-1] = 3
    with pytest.raises(CorruptionError) as e:
        decode_layout(bytes(data), "o")
    assert e.value.offset == len(data) - 2
