"""Corruption is loud: a damaged SST either raises CorruptionError or reads back exactly.

Every block and the SsTableInfo are CRC-protected, so flipped bytes or a truncated object can
never decode to different rows; they must also never escape as another exception type.
"""

from __future__ import annotations

import random

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format.sst import SstOptions, decode_all_rows
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.format.wal_sst import decode_wal_sst, encode_wal_sst
from slatedb.row import Row, RowKind


def _rows(n: int, seed: int) -> list[Row]:
    rnd = random.Random(seed)
    kinds = list(RowKind)
    out = []
    for i in range(n):
        kind = rnd.choice(kinds)
        out.append(
            Row(b"k%05d" % i, rnd.randrange(1 << 40), kind, b"" if kind is RowKind.TOMBSTONE else rnd.randbytes(rnd.randrange(60)),
                rnd.choice([None, rnd.randrange(1 << 50)]), rnd.choice([None, rnd.randrange(1 << 50)]))
        )
    return out


def _build(seed: int):
    rnd = random.Random(seed)
    rows = _rows(rnd.randrange(1, 120), seed)
    opts = SstOptions(block_size_bytes=rnd.choice([64, 256, 4096]), min_filter_keys=rnd.choice([0, 50, 1000]),
                      compression=rnd.randrange(5))
    return rows, write_sst(rows, opts).data


SSTS = [_build(seed) for seed in range(8)]


class _Store:
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def get(self, key, byte_range=None):
        class R:
            pass

        r = R()
        r.data = self.data if byte_range is None else self.data[byte_range[0] : byte_range[1]]
        return r

    async def head(self, key):
        class M:
            pass

        m = M()
        m.size_bytes = len(self.data)
        return m


async def _read_async(data: bytes, rows: list[Row]) -> list[Row]:
    reader = await SstReader.open(_Store(data), "o", tail_read_bytes=64)
    # Point lookups first (bloom + seek paths), then a full scan.
    for row in rows[:: max(1, len(rows) // 5)]:
        got = await reader.get(row.key, max_seq=row.seq)
        assert got is None or got == row, "a lookup returned a different row"
    return [r async for r in reader.scan()]


def _check(data: bytes, rows: list[Row]) -> None:
    try:
        got = decode_all_rows(data, "o")
    except CorruptionError:
        pass
    else:
        assert got == rows
    try:
        got = trio.run(_read_async, data, rows)
    except CorruptionError:
        pass
    else:
        assert got == rows


mutation = st.tuples(st.integers(0, len(SSTS) - 1), st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutation)
def test_flipped_bytes(m):
    idx, flips = m
    rows, data = SSTS[idx]
    buf = bytearray(data)
    for pos, xor in flips:
        buf[pos % len(buf)] ^= xor
    _check(bytes(buf), rows)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, len(SSTS) - 1), st.integers(0, 10**9))
def test_truncated(idx, cut):
    rows, data = SSTS[idx]
    _check(data[: cut % len(data)], rows)


@pytest.mark.parametrize("idx", range(len(SSTS)))
def test_every_single_byte_of_the_tail_is_protected(idx):
    rows, data = SSTS[idx]
    for pos in range(max(0, len(data) - 120), len(data)):
        for xor in (0x01, 0x80):
            buf = bytearray(data)
            buf[pos] ^= xor
            _check(bytes(buf), rows)


WAL_ROWS = _rows(80, 99)
WAL = encode_wal_sst(sorted(WAL_ROWS, key=lambda r: r.seq), SstOptions(block_size_bytes=256)).data


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**9), st.integers(1, 255), st.booleans())
def test_wal_flips_and_truncation(pos, xor, truncate):
    expected = sorted(WAL_ROWS, key=lambda r: r.seq)
    if truncate:
        data = WAL[: pos % len(WAL)]
    else:
        buf = bytearray(WAL)
        buf[pos % len(buf)] ^= xor
        data = bytes(buf)
    try:
        wal = decode_wal_sst(data, "w")
    except CorruptionError:
        return
    assert (wal.is_fence and data == b"") or list(wal.rows) == expected


@pytest.mark.parametrize("idx", range(len(SSTS)))
def test_format_version_2_relabelled_as_1_is_caught(idx):
    rows, data = SSTS[idx]
    buf = bytearray(data)
    assert buf[-1] == 2
    buf[-1] = 1
    _check(bytes(buf), rows)


def test_an_open_leaves_the_index_to_the_first_read_which_still_checks_it():
    """``SstReader.open`` reads the index block and checks its CRC, and decodes it only when a
    read first needs it (a database's open then decodes no index). A damaged index is still
    loud: a bad CRC at open, a bad structure under a valid CRC at the first read."""
    import struct
    import zlib

    from slatedb.format.sst import SstIndex

    rows = _rows(300, 5)
    enc = write_sst(rows, SstOptions(block_size_bytes=256, compression=0))
    info, data = enc.info, enc.data

    async def first_lookup(obj: bytes) -> tuple[bool, Row | None]:
        reader = await SstReader.open(_Store(obj), "o")
        decoded_at_open = isinstance(reader.index, SstIndex)
        return decoded_at_open, await reader.get(rows[150].key, max_seq=rows[150].seq)

    decoded_at_open, got = trio.run(first_lookup, data)
    assert not decoded_at_open and got == rows[150]
    # The index's flatbuffer zeroed under a valid CRC: the open passes, the first lookup raises.
    start, end = info.index_offset, info.index_offset + info.index_len - 4
    raw = bytes(end - start)
    bad = data[:start] + raw + struct.pack(">I", zlib.crc32(raw)) + data[end + 4:]
    with pytest.raises(CorruptionError, match="'o'|\\bo\\b"):
        trio.run(first_lookup, bad)
    # The same zeroes under the old CRC: the open itself raises.
    with pytest.raises(CorruptionError):
        trio.run(first_lookup, data[:start] + raw + data[end:])
