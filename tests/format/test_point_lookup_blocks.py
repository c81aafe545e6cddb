"""Which blocks a point lookup reads (``SstReader.lookup_cached`` with ``read_now`` / ``get``).

An index key is the shortest prefix of a block's first key that sorts after the previous
block's last key, so a key that begins a block often *is* its index key (sequential keys:
``k003`` then ``k004``), and :meth:`SstIndex.find_block` then steps back one block (the key's
versions might straddle the boundary). A lookup reading on the calling thread must read every
block it walks, or the get of such a key falls back to the engine's loop (where it waits behind an in-process
compaction)."""

from __future__ import annotations

import pytest
import trio

from slatedb.format.sst import SstOptions
from slatedb.format.sst_reader import NEED_IO, SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.lsm.cache import BlockCache
from slatedb.objstore.local import LocalStore
from slatedb.row import Row, RowKind

ROWS = [Row(b"k%03d" % i, i + 1, RowKind.VALUE, b"v%03d" % i * 25) for i in range(60)]
NAME = "compacted/x.sst"


class CountingReads:
    """A local store counting ranged reads (each a block fetch once the SST is open)."""

    def __init__(self, store: LocalStore) -> None:
        self.store, self.ranges, self.ranges_now = store, [], []

    def read_range_now(self, key, start, end):
        self.ranges_now.append((start, end))
        return self.store.read_range_now(key, start, end)

    async def get(self, key, byte_range=None):
        self.ranges.append(byte_range)
        return await self.store.get(key, byte_range)

    async def head(self, key):
        return await self.store.head(key)


@pytest.fixture
def reader_factory(tmp_path):
    """``make()``: a fresh reader of one SST of 512-byte blocks in a local directory, with an
    empty block cache too small for read-ahead (as for a large SST), and no bloom filter
    (60 rows: below ``min_filter_keys``)."""
    store = LocalStore(str(tmp_path))
    data = write_sst(ROWS, SstOptions(block_size_bytes=512)).data
    trio.run(store.put, NAME, data)

    def make() -> tuple[SstReader, CountingReads]:
        counting = CountingReads(store)
        reader = trio.run(lambda: SstReader.open(counting, NAME, block_cache=BlockCache(4096)))
        assert not reader._readahead and reader.filter is None and len(reader.index) >= 10
        counting.ranges.clear()
        return reader, counting

    yield make
    trio.run(store.aclose)


def test_a_lookup_reading_now_reads_every_block_it_walks(reader_factory):
    reader, _ = reader_factory()
    starts = [i for i in range(1, len(reader.index)) if reader.index.first_keys[i] in {r.key for r in ROWS}]
    assert len(starts) >= 5  # keys whose index key is the whole key: find_block steps back
    for row in ROWS:
        reader, counting = reader_factory()
        assert reader.lookup_cached(row.key, None, True) is NEED_IO
        assert reader.lookup_cached(row.key, None, True, True) == row.value, row.key
        assert counting.ranges == []  # nothing through the event loop
        i = reader.index.find_block(row.key)
        walked = [reader.index.block_range(b) for b in range(i, reader.index.find_last_block(row.key) + 1)]
        assert counting.ranges_now == walked, row.key  # each block the lookup walks, once
        # Searched, not decoded: the next lookups find its bytes cached, and read nothing.
        assert reader.lookup_cached(row.key, None, True, True) == row.value
        assert reader.lookup_cached(row.key, None, True) == row.value
        assert counting.ranges_now == walked and counting.ranges == []
