"""The async SST reader: ranged reads through an object store, decoding with pure functions.

The store needs two methods (the interface of :mod:`slatedb.objstore`)::

    await store.get(key, byte_range=(start, end_exclusive)) -> result with .data: bytes
    await store.head(key) -> meta with .size_bytes

Opening costs at most two ranged reads for the metadata (one speculative read of the last
``tail_read_bytes`` that usually also covers index and filter; a second one when it did not)
plus one read covering filter and index when they were not in the tail. Point lookups consult
the bloom filter before any block read, locate the block by binary search of the index and
seek inside it through restart points. Decoded blocks go to an optional block cache keyed by
``(cache_id, block index)`` so that hot lookups never leave synchronous Python.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, MutableMapping
from typing import Any, Protocol

from slatedb.errors import CorruptionError
from slatedb.format.block import NEXT_BLOCK, WHOLE_DECODE_LOOKUPS, Block, RawBlock, answer_of, seek_key_v2
from slatedb.format.bloom import BloomFilter
from slatedb.format.compression import unframe_block
from slatedb.format.sst import (
    FORMAT_VERSION_V2,
    TRAILER_SIZE_BYTES,
    SstIndex,
    SstLayout,
    check_info,
    decode_data_block,
    decode_filter,
    data_end_offset,
    decode_index,
    decode_index_raw,
    decode_info_with_crc,
    decode_stats,
    decode_trailer,
)
from slatedb.format.types import SsTableInfo, SstStats, SstType
from slatedb.row import Row

#: Size of the speculative read of an SST's tail when opening it. 64 KiB covers the metadata,
#: index and filter of SSTs up to a few MiB in one request.
DEFAULT_TAIL_READ_BYTES = 64 * 1024
#: Point lookups that miss the cache read this much ahead (see ``_fetch_with_readahead``).
READAHEAD_BYTES = 256 * 1024
#: ... but only in an SST whose data blocks take at most this share of the block cache: read-ahead
#: pays when the blocks it brings will be asked for before they are evicted; in an SST much
#: larger than the cache, each random lookup would evict 64 blocks to use one of them.
READAHEAD_MAX_CACHE_SHARE = 0.25
#: Scans fetch consecutive blocks in reads of about this size.
DEFAULT_SCAN_READ_BYTES = 256 * 1024


#: Returned by :meth:`SstReader.get_cached` when the answer needs a block read.
NEED_IO = object()


class RangeReadable(Protocol):
    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Any: ...

    async def head(self, key: str) -> Any: ...


async def read_range(store: RangeReadable, object_name: str, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of an object; a short answer means the object is truncated."""
    assert 0 <= start <= end
    if start == end:
        return b""
    data = bytes((await store.get(object_name, byte_range=(start, end))).data)
    if len(data) != end - start:
        raise CorruptionError(object_name, start, f"read of [{start}, {end}) returned {len(data)} bytes: truncated")
    return data


class SstReader:
    """Reads one SST through a ranged-read store. Build it with :meth:`open`.

    ``block_cache`` is any mapping (e.g. an LRU) from ``(cache_id, block_index)`` to
    :class:`Block`; without one, point lookups decode only the rows they need.
    """

    def __init__(
        self,
        store: RangeReadable,
        layout: SstLayout,
        *,
        block_cache: MutableMapping[tuple[Any, int], Block] | None = None,
        cache_id: Any = None,
    ) -> None:
        self.store = store
        self.layout = layout
        self.object_name = layout.object_name
        self.info: SsTableInfo = layout.info
        self.format_version = layout.format_version
        #: The decoded index; until a read first needs it (an opened SST), a stand-in that
        #: decodes it then and puts it here (:class:`_IndexOnFirstUse`).
        self.index: SstIndex = (layout.index if layout.index is not None
                                else _IndexOnFirstUse(self, layout.index_raw))  # type: ignore[assignment]
        self.filter: BloomFilter | None = layout.filter
        self.block_cache = block_cache
        self.cache_id = object_name_or(cache_id, layout.object_name)
        self._is_compacted = layout.info.sst_type == SstType.COMPACTED
        first, last = layout.info.first_entry, layout.info.last_entry  # the key range a point lookup tests:
        self._key_range = (first, last) if self._is_compacted and first is not None and last is not None else None
        capacity = getattr(block_cache, "capacity_bytes", None)  # None: an unbounded mapping
        data_bytes = data_end_offset(layout.info) if layout.index is None else (
            layout.index.offsets[-1] if layout.index.offsets else 0)
        #: The store's synchronous ranged read of an object never overwritten (a local
        #: directory's ``read_range_now``), or None: reads then go through the event loop.
        self._read_now = getattr(store, "read_range_now", None)
        self._readahead = block_cache is not None and (
            capacity is None or data_bytes <= capacity * READAHEAD_MAX_CACHE_SHARE)
        #: The cache's lookup and its LRU touch as C calls where it offers them
        #: (:meth:`~slatedb.lsm.cache.BlockCache.c_lookups`): a point lookup's one cache access
        #: costs no Python frame.
        c_lookups = getattr(block_cache, "c_lookups", None)
        self._cache_lookup, self._cache_touch = (
            c_lookups() if c_lookups is not None else (getattr(block_cache, "get", None), None))

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: RangeReadable,
        object_name: str,
        *,
        size_bytes: int | None = None,
        block_cache: MutableMapping[tuple[Any, int], Block] | None = None,
        cache_id: Any = None,
        tail_read_bytes: int = DEFAULT_TAIL_READ_BYTES,
    ) -> SstReader:
        layout = await read_layout(store, object_name, size_bytes=size_bytes, tail_read_bytes=tail_read_bytes,
                                   lazy_index=True)
        return cls(store, layout, block_cache=block_cache, cache_id=cache_id)

    @property
    def num_blocks(self) -> int:
        return len(self.index)

    async def read_stats(self) -> SstStats | None:
        info = self.info
        if not info.stats_len:
            return None
        framed = await read_range(self.store, self.object_name, info.stats_offset, info.stats_offset + info.stats_len)
        return decode_stats(framed, info, self.object_name)

    # -- blocks ----------------------------------------------------------------------------

    def cached_block(self, i: int) -> Block | None:
        """Block ``i`` from the cache, decoding it first if only its framed bytes (read ahead by
        an earlier lookup) are there: CPU work, no I/O."""
        cache = self.block_cache
        if cache is None:
            return None
        value = cache.get((self.cache_id, i))
        if value is None or type(value) is Block:
            return value
        if type(value) is RawBlock:
            return self._decode_raw(value, i)
        return self._decode(value, i)

    async def _fetch_with_readahead(self, i: int) -> bytes:
        """Framed block ``i``, fetched together with the following blocks up to
        :data:`READAHEAD_BYTES`; those go into the cache undecoded (point lookups on random keys
        then need one read per ``READAHEAD_BYTES`` instead of one per block)."""
        offsets = self.index.offsets
        j = self._readahead_end(i)
        data = await read_range(self.store, self.object_name, offsets[i], offsets[j])
        return self._cache_ahead(data, i, j)

    def _readahead_end(self, i: int) -> int:
        offsets = self.index.offsets
        n = len(self.index)
        j = i + 1
        while j < n and offsets[j + 1] - offsets[i] <= READAHEAD_BYTES:
            j += 1
        return j

    def _cache_ahead(self, data: bytes, i: int, j: int) -> bytes:
        """Cache blocks ``(i, j)`` of ``data`` (blocks ``[i, j)``) undecoded, where not cached
        yet; block ``i``'s bytes."""
        offsets = self.index.offsets
        base = offsets[i]
        cache = self.block_cache
        assert cache is not None
        cache_id = self.cache_id
        if j == i + 1:
            return data
        items = [((cache_id, k), data[offsets[k] - base : offsets[k + 1] - base]) for k in range(i + 1, j)]
        add_absent = getattr(cache, "add_absent", None)
        if add_absent is not None:
            add_absent(items)
        else:
            for key, framed in items:
                if key not in cache:
                    cache[key] = framed
        return data[: offsets[i + 1] - base]

    # -- reads on the calling thread (a store that reads synchronously) ----------------------

    def _range_now(self, start: int, end: int) -> bytes | None:
        """Bytes ``[start, end)`` read on the calling thread; None when the store cannot, or the
        read failed (the event loop's path then reads it, with retries and typed errors)."""
        read_now = self._read_now
        if read_now is None:
            return None
        try:
            data = read_now(self.object_name, start, end)
        except Exception:  # noqa: BLE001 - the loop's path reports it
            return None
        if len(data) != end - start:
            return None  # a short object: the loop's path names the truncation
        return data

    def _read_for_lookup(self, key: bytes, i: int) -> Block | tuple[bytes, tuple[int, ...], bool] | None:
        """Block ``i`` (not cached) read on the calling thread for a lookup of ``key``; None when
        the read must go through the event loop. With read-ahead (the SST's blocks fit the
        cache: lookups come back to them) it is decoded whole, and read alone (a memory map's
        slice: reading ahead would save no round trip, only copy the neighbours once more).
        Otherwise a random lookup seldom comes back: it is only searched
        (:func:`~slatedb.format.block.seek_key_v2`, after its CRC), cached as a
        :class:`RawBlock`, and the answer is ``(raw, spans, ended)``."""
        offsets = self.index.offsets
        if self._readahead:
            data = self._range_now(offsets[i], offsets[i + 1])
            return None if data is None else self._decode(data, i)
        start = offsets[i]
        framed = self._range_now(start, offsets[i + 1])
        if framed is None:
            return None
        if self.format_version != FORMAT_VERSION_V2:
            return self._decode(framed, i)
        raw = unframe_block(self.info.compression_format, framed, self.object_name, start)
        spans, ended = seek_key_v2(raw, key, self.object_name, start)
        self.block_cache[(self.cache_id, i)] = RawBlock(raw, key, spans, ended)  # type: ignore[index]
        return raw, spans, ended

    def read_blocks_now(self, first: int, last_exclusive: int) -> list[Block] | None:
        """:meth:`read_blocks` on the calling thread; None when that must go through the event
        loop (a store without synchronous reads, a failed read)."""
        if self._read_now is None:
            return None
        blocks: list[Block | None] = [self.cached_block(i) for i in range(first, last_exclusive)]
        missing = [i for i, b in zip(range(first, last_exclusive), blocks) if b is None]
        if missing:
            lo, hi = missing[0], missing[-1]
            base = self.index.offsets[lo]
            data = self._range_now(base, self.index.offsets[hi + 1])
            if data is None:
                return None
            for i in missing:
                start, end = self.index.block_range(i)
                blocks[i - first] = self._decode(data[start - base : end - base], i)
        return blocks  # type: ignore[return-value]

    async def _fetch_framed(self, i: int) -> bytes:
        start, end = self.index.block_range(i)
        return await read_range(self.store, self.object_name, start, end)

    def _decode(self, framed: bytes, i: int) -> Block:
        block = decode_data_block(framed, self.info, self.format_version, self.index.offsets[i], self.object_name)
        if self.block_cache is not None:
            self.block_cache[(self.cache_id, i)] = block
        return block

    def _decode_raw(self, raw_block: RawBlock, i: int) -> Block:
        block = raw_block.decode(self.object_name, self.index.offsets[i])
        self.block_cache[(self.cache_id, i)] = block  # type: ignore[index]
        return block

    async def read_block(self, i: int) -> Block:
        """Decoded block ``i``, from the cache when it is there."""
        block = self.cached_block(i)
        if block is None:
            block = self._decode(await self._fetch_framed(i), i)
        return block

    async def read_blocks(self, first: int, last_exclusive: int) -> list[Block]:
        """Blocks ``[first, last_exclusive)``; the uncached ones are fetched in one read."""
        blocks: list[Block | None] = [self.cached_block(i) for i in range(first, last_exclusive)]
        missing = [i for i, b in zip(range(first, last_exclusive), blocks) if b is None]
        if missing:
            lo, hi = missing[0], missing[-1]
            base = self.index.offsets[lo]
            data = await read_range(self.store, self.object_name, base, self.index.offsets[hi + 1])
            for i in missing:
                start, end = self.index.block_range(i)
                blocks[i - first] = self._decode(data[start - base : end - base], i)
        return blocks  # type: ignore[return-value]

    # -- point lookups ---------------------------------------------------------------------

    def might_contain(self, key: bytes) -> bool:
        """False when the key range or the bloom filter proves ``key`` absent."""
        key_range = self._key_range
        if key_range is not None and (key < key_range[0] or key > key_range[1]):
            return False
        bloom = self.filter
        return bloom is None or bloom.might_contain(key)

    def get_cached(self, key: bytes, max_seq: int | None = None) -> Row | None | object:
        """:meth:`get` answered from the block cache alone, without I/O: the row, None, or
        :data:`NEED_IO` when a block it needs is not cached (then call :meth:`get`)."""
        return self.lookup_cached(key, max_seq, False)

    def get_cached_value(self, key: bytes, max_seq: int | None = None) -> bytes | Row | None | object:
        """:meth:`get_cached` for the read path's hot loop: a hit in a block of values without
        expiry is answered by the value itself (``bytes``: what a reader sees; no :class:`Row`
        is built), any other hit by its row."""
        return self.lookup_cached(key, max_seq, True)

    def lookup_cached(self, key: bytes, max_seq: int | None, value_ok: bool,
                      read_now: bool = False) -> bytes | Row | None | object:
        """The newest version of ``key`` with ``seq <= max_seq``, from the block cache alone: its
        row (with ``value_ok``, a row that is a value without expiry: the value itself); None
        when this SST holds none; :data:`NEED_IO` when a block it needs is not cached. With
        ``read_now``, a block that is not cached is read on the calling thread where the store
        can (a local directory; :meth:`_read_for_lookup`), and :data:`NEED_IO` means the read
        must go through the event loop.

        A decoded block in the cache answers by itself (one ``bisect``), and so do framed bytes
        read ahead, decoded first (CPU work the block's later lookups share: asking the bloom
        filter first costs more than the decode it saves, measured on random hit gets). The
        filter is asked before a read through the loop and before a search of a block not
        decoded whole, not before a read on this thread of a block decoded whole and kept (it
        would only save a miss a decode later lookups make anyway); damaged bytes read either
        way ask it then (a key it rules out is absent, as if it had been asked first)."""
        cache_get = self._cache_lookup
        if cache_get is None:
            return NEED_IO if self.might_contain(key) else None
        first_keys = self.index.first_keys
        n = len(first_keys)
        i = bisect_right(first_keys, key) - 1  # SstIndex.find_block, inlined
        if i <= 0:
            i = 0
        elif first_keys[i] == key:
            while i > 0 and first_keys[i] == key:
                i -= 1
        touch, cache_id, probed = self._cache_touch, self.cache_id, False
        while i < n:
            cache_key = (cache_id, i)
            block = cache_get(cache_key)
            if type(block) is not Block:
                if block is None:
                    direct = read_now and self._read_now is not None
                    if not probed and not (direct and self._readahead):
                        if not self.might_contain(key):
                            return None
                        probed = True
                    if not direct:
                        return NEED_IO
                    try:
                        found = self._read_for_lookup(key, i)
                    except CorruptionError:  # read without the filter: a key it rules out is absent
                        if not probed and not self.might_contain(key):
                            return None
                        raise
                    if found is None:
                        return NEED_IO
                elif type(block) is RawBlock:
                    # Searched before, not decoded: the last search's key has its answer; another
                    # key searches it again, or decodes it whole once lookups come back (not a key
                    # the filter rules out: random misses would decode what random hits left).
                    if touch is not None:
                        try:
                            touch(cache_key)
                        except KeyError:
                            pass
                    last = block.last
                    if key == last[0]:
                        found = (block.raw, last[2:], last[1])
                    else:
                        if not probed and not self.might_contain(key):
                            return None
                        probed = True
                        block.lookups += 1
                        found = (self._decode_raw(block, i) if block.lookups >= WHOLE_DECODE_LOOKUPS
                                 else block.search(key, self.object_name, self.index.offsets[i]))
                else:
                    try:
                        found = self._decode(block, i)  # framed bytes read ahead
                    except CorruptionError:
                        # Damaged bytes read ahead: a key the bloom filter rules out is absent
                        # without them (as if the filter had been asked first); any other key
                        # meets the error.
                        if not self.might_contain(key):
                            return None
                        raise
                if type(found) is tuple:  # a block searched, not decoded (see _read_for_lookup)
                    got = answer_of(key, max_seq, value_ok, *found)
                    if got is not NEXT_BLOCK:
                        return got
                    i += 1
                    continue
                block = found
            elif touch is not None:
                try:
                    touch(cache_key)
                except KeyError:  # evicted meanwhile: nothing to move (see BlockCache.get)
                    pass
            keys = block.keys
            j = bisect_left(keys, key)
            end = len(keys)
            while j < end:
                if keys[j] != key:
                    return None
                if max_seq is None or block.seq(j) <= max_seq:
                    if value_ok and block.values_final:
                        return block.values[j]
                    return block.row(j)
                j += 1
            i += 1
        return None

    async def get(self, key: bytes, max_seq: int | None = None) -> Row | None:
        """The newest row of ``key`` with ``seq <= max_seq`` (any seq when None), or None.

        The row may be a tombstone or a merge operand: interpreting it is the caller's job.
        """
        assert self._is_compacted, "point lookups need a compacted SST (WAL SSTs are replayed)"
        if not self.might_contain(key):
            return None
        n = len(self.index)
        i = self.index.find_block(key)
        while i < n:
            block = self.cached_block(i)
            if block is None:
                if self._readahead:
                    framed = await self._fetch_with_readahead(i)
                else:
                    framed = await self._fetch_framed(i)
                if self.block_cache is None and self.format_version == FORMAT_VERSION_V2:
                    start = self.index.offsets[i]
                    raw = unframe_block(self.info.compression_format, framed, self.object_name, start)
                    got = answer_of(key, max_seq, False, raw, *seek_key_v2(raw, key, self.object_name, start))
                    if got is not NEXT_BLOCK:
                        return got  # type: ignore[return-value]
                    i += 1
                    continue
                block = self._decode(framed, i)
            keys = block.keys
            j = bisect_left(keys, key)
            end = len(keys)
            while j < end:
                if keys[j] != key:
                    return None
                if max_seq is None or block.seq(j) <= max_seq:
                    return block.row(j)
                j += 1
            i += 1  # the block ended before a row past the key: versions may continue
        return None

    async def get_versions(self, key: bytes) -> list[Row]:
        """Every row of ``key`` in this SST, newest first (for merge-operand resolution)."""
        out = []
        async for row in self.scan(key, key, end_inclusive=True):
            out.append(row)
        return out

    # -- scans -----------------------------------------------------------------------------

    async def scan_blocks(
        self,
        start: bytes | None = None,
        end: bytes | None = None,
        *,
        end_inclusive: bool = False,
        read_bytes: int = DEFAULT_SCAN_READ_BYTES,
    ) -> AsyncIterator[list[Row]]:
        """Rows with ``start <= key < end`` (``<= end`` if ``end_inclusive``), a block at a time.

        ``None`` bounds are open. Uncached blocks are fetched ``read_bytes`` at a time.
        """
        index = self.index
        n = len(index)
        i = 0 if start is None or not self._is_compacted else index.find_block(start)
        while i < n:
            # Group consecutive blocks up to ``read_bytes`` into one fetch.
            j = i + 1
            base = index.offsets[i]
            while j < n and index.offsets[j + 1] - base <= read_bytes:
                j += 1
            for block in await self.read_blocks(i, j):
                rows = block.rows
                lo = 0 if start is None else block.seek(start)
                if end is None:
                    hi = len(rows)
                else:
                    hi = _bisect_end(block, end, end_inclusive)
                if lo < hi:
                    yield rows[lo:hi] if (lo or hi != len(rows)) else rows
                if hi < len(rows):
                    return
            i = j

    async def scan(
        self, start: bytes | None = None, end: bytes | None = None, *, end_inclusive: bool = False
    ) -> AsyncIterator[Row]:
        """Rows with ``start <= key < end`` in stored order (see :meth:`scan_blocks`)."""
        async for rows in self.scan_blocks(start, end, end_inclusive=end_inclusive):
            for row in rows:
                yield row


def object_name_or(cache_id: Any, object_name: str) -> Any:
    return object_name if cache_id is None else cache_id


def _bisect_end(block: Block, end: bytes, inclusive: bool) -> int:
    return bisect_right(block.keys, end) if inclusive else bisect_left(block.keys, end)


# ---------------------------------------------------------------------------------------------
# Layout loading
# ---------------------------------------------------------------------------------------------


class _IndexOnFirstUse:
    """What :attr:`SstReader.index` holds until a read first needs the index: ``SstReader.open``
    reads the index block and checks its CRC, and leaves the decoding (a few ms for an SST of
    thousands of blocks) to the first read, so a database's open decodes no index. The first
    use decodes it, puts the :class:`SstIndex` on the reader (later reads find it there, with no
    stand-in in the way) and answers from it. A structurally bad index is a
    :class:`CorruptionError` naming the object, raised by that read.

    Not ``__getattr__`` on the reader itself: a class with its own ``__getattr__`` loses
    CPython's specialised attribute loads on every attribute, and the read path reads the
    reader's attributes on each lookup (measured: warm gets of a reopened database ~15% slower)."""

    __slots__ = ("_reader", "_raw")

    def __init__(self, reader: "SstReader", raw: bytes | None) -> None:
        self._reader = reader
        self._raw = raw

    def _decoded(self) -> SstIndex:
        reader = self._reader
        index = reader.index
        if index is self:  # not decoded yet (another thread may have done it meanwhile)
            index = decode_index_raw(self._raw, reader.info, reader.object_name)
            reader.index = index
        return index

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # the index's own names are public; copy/pickle probe dunders
            raise AttributeError(name)
        return getattr(self._decoded(), name)

    def __len__(self) -> int:
        return len(self._decoded())


async def read_layout(
    store: RangeReadable,
    object_name: str,
    *,
    size_bytes: int | None = None,
    tail_read_bytes: int = DEFAULT_TAIL_READ_BYTES,
    lazy_index: bool = False,
) -> SstLayout:
    """Trailer, metadata, index and filter of an SST, in as few ranged reads as possible.
    ``lazy_index``: the index block's CRC is checked, its decoding left to the reader (the
    layout's ``index`` is None, ``index_raw`` the unframed block)."""
    if size_bytes is None:
        size_bytes = (await store.head(object_name)).size_bytes
    if size_bytes < TRAILER_SIZE_BYTES:
        raise CorruptionError(object_name, 0, f"object of {size_bytes} bytes is too short for an SST")
    tail_start = max(0, size_bytes - max(tail_read_bytes, TRAILER_SIZE_BYTES))
    tail = await read_range(store, object_name, tail_start, size_bytes)

    async def fetch(start: int, end: int) -> bytes:
        if start >= tail_start:
            return tail[start - tail_start : end - tail_start]
        return await read_range(store, object_name, start, end)

    metadata_offset, version = decode_trailer(tail[-TRAILER_SIZE_BYTES:], size_bytes, object_name)
    metadata = await fetch(metadata_offset, size_bytes - TRAILER_SIZE_BYTES)
    info = decode_info_with_crc(metadata, object_name, metadata_offset)
    check_info(info, metadata_offset, object_name)
    # Filter and index are adjacent (filter first): one read for both.
    lo = info.filter_offset if info.filter_len else info.index_offset
    hi = info.index_offset + info.index_len
    region = await fetch(lo, hi)
    index_raw = None
    if lazy_index:
        index = None
        index_raw = unframe_block(info.compression_format, region[info.index_offset - lo :], object_name,
                                  info.index_offset)
    else:
        index = decode_index(region[info.index_offset - lo :], info, object_name)
    bloom = None
    if info.filter_len:
        bloom = decode_filter(
            region[info.filter_offset - lo : info.filter_offset - lo + info.filter_len], info, object_name
        )
    return SstLayout(object_name, version, info, index, bloom, metadata_offset, index_raw)
