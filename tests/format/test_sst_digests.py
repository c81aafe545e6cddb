"""SST bytes pinned by digest: fixed row sets encoded by ``SstWriter.add_sorted`` (the L0 flush's
bulk path, in the flush's 8,192-row slices) hash to the digests below, computed on the encoder as
it was before the rewrites of 2026-11-26 (``add`` of each row gave the same digests then;
``tests/format/test_bulk_encode.py`` compares the two paths). Byte compatibility with the official
wheel is checked by ``tests/interop``; this test holds that a speed-up of the encoder changes no
byte of what it writes, whatever the row shapes (one version per key, versions, tombstones,
merges, timestamps, long shared prefixes, every codec)."""

from __future__ import annotations

import hashlib
import random

import pytest

from slatedb.format.sst import SstOptions
from slatedb.format.sst_writer import SstWriter
from slatedb.format.types import CompressionFormat
from slatedb.row import Row, RowKind


def _plain(n: int) -> list[Row]:
    """The bench's shape: ``key%010d`` keys, 100-byte values, one put each with its create time."""
    rng = random.Random(20240601)
    return [Row(b"key%010d" % i, i + 1, RowKind.VALUE, rng.randbytes(100), None, 1_764_000_000_000 + i // 7)
            for i in range(n)]


def _mixed(n: int) -> list[Row]:
    """Versions, tombstones, merges, expiry and create timestamps, keys of many lengths."""
    rng = random.Random(7)
    keys = sorted({rng.choice([b"", b"user/" * 8, b"k"]) + rng.randbytes(rng.randint(1, 9)) for _ in range(n)})
    rows, seq = [], 10**9
    for key in keys:
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            kind = rng.choice([RowKind.VALUE, RowKind.VALUE, RowKind.TOMBSTONE, RowKind.MERGE_OPERAND])
            value = b"" if kind is RowKind.TOMBSTONE else rng.randbytes(rng.choice([0, 5, 60, 700]))
            expire = rng.choice([None, None, rng.randint(-(2**40), 2**40)])
            create = rng.choice([None, rng.randint(0, 2**45)])
            rows.append(Row(key, seq, kind, value, expire, create))
            seq -= rng.randint(1, 5)
    return rows


def _digest(rows: list[Row], options: SstOptions, bulk: bool) -> str:
    writer = SstWriter(options)
    if bulk:
        for i in range(0, len(rows), 8192):
            writer.add_sorted(rows[i : i + 8192])
    else:
        writer.add_all(rows)
    return hashlib.sha256(writer.finish().data).hexdigest()[:16]


CASES = {
    "plain-20k": (lambda: _plain(20_000), SstOptions()),
    "plain-20k-lz4-1k": (lambda: _plain(20_000), SstOptions(block_size_bytes=1024, compression=CompressionFormat.LZ4)),
    "mixed-3k": (lambda: _mixed(3_000), SstOptions()),
    "mixed-3k-zstd-512": (lambda: _mixed(3_000), SstOptions(block_size_bytes=512, compression=CompressionFormat.ZSTD)),
    "mixed-3k-snappy-nofilter": (lambda: _mixed(3_000), SstOptions(min_filter_keys=10**6, compression=CompressionFormat.SNAPPY)),
}

PINNED = {
    "mixed-3k": "8a1e590a1d0d065e",
    "mixed-3k-snappy-nofilter": "fbf3a53933c619af",
    "mixed-3k-zstd-512": "c1eb33df72853dcb",
    "plain-20k": "33c69de29603bf11",
    "plain-20k-lz4-1k": "b750889e84349f06",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sst_bytes_unchanged(name: str) -> None:
    make, options = CASES[name]
    rows = make()
    assert _digest(rows, options, bulk=True) == PINNED[name]
