"""SST data blocks: the V2 builder, and decoders for block V2 and the legacy block V1.

Block V2 (format version 2)::

    entries | restart_offsets (u16 BE each) | num_restarts (u16 BE)

with a restart point (an entry storing its full key) every 16 entries. Block V1 (format
version 1, read only)::

    entries | offsets (u16 BE, one per entry) | count (u16 BE)

A decoded block (:class:`Block`) holds parallel columns of keys and values, the rest of each row
left in the block's bytes until asked for: it is the unit the Db's block cache keeps, and a point
lookup in it is one ``bisect`` over ``keys``. A lookup in a block read once (a cold get in an
SST much larger than the cache) searches it without decoding it whole (:func:`seek_key_v2`:
the restart points' keys, then one restart interval), and the cache keeps it as a
:class:`RawBlock` (with its last answer, for the same key asked again) until lookups of other
keys come back.
"""

from __future__ import annotations

import struct
from bisect import bisect_left
from collections.abc import Iterator


from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.format import row_codec
from slatedb.format.row_codec import (
    check_row_encodable,
    common_prefix_len,
    FLAG_HAS_CREATE_TS,
    FLAG_TOMBSTONE,
    FLAG_TS_BYTES,
    decode_columns_v2,
    describe_bad_flags,
    decode_entry_v0,
    decode_restart_key_v2,
    encode_row_v2,
    read_varint_u32,
    row_at_v2,
    rows_of_columns_v2,
    seq_at_v2,
)
from slatedb.row import Row, RowKind

RESTART_INTERVAL = 16
DEFAULT_BLOCK_SIZE_BYTES = 4096
U16_SIZE_BYTES = 2
MAX_U16 = 0xFFFF

_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")


# ---------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------


class BlockBuilderV2:
    """Accumulates rows into one V2 block of at most ``block_size_bytes`` (soft limit).

    Mirrors the official sizing rule so that blocks split where the official engine's do:
    a row is accepted when ``entries + restarts + 2 + row (+2 if it opens a restart)`` fits,
    and an empty block accepts any row (an oversized row gets a block of its own).
    """

    __slots__ = ("block_size_bytes", "_data", "_restarts", "_count", "_last_key", "_first_key",
                 "num_puts", "num_deletes", "num_merges")

    def __init__(self, block_size_bytes: int = DEFAULT_BLOCK_SIZE_BYTES) -> None:
        if not 0 < block_size_bytes <= MAX_U16 + 1:
            # Restart offsets are u16: entries past 64 KiB could not be addressed.
            raise InvalidArgumentError(f"block size {block_size_bytes} must be in 1..65536 bytes")
        self.block_size_bytes = block_size_bytes
        self._data = bytearray()
        self._restarts: list[int] = []
        self._count = 0
        self._last_key = b""
        self._first_key = b""
        self.num_puts = 0
        self.num_deletes = 0
        self.num_merges = 0

    def is_empty(self) -> bool:
        return self._count == 0

    def __len__(self) -> int:
        return self._count

    @property
    def first_key(self) -> bytes:
        return self._first_key

    @property
    def last_key(self) -> bytes:
        return self._last_key

    def current_size_bytes(self) -> int:
        return len(self._data) + U16_SIZE_BYTES * len(self._restarts) + U16_SIZE_BYTES

    def add(self, row: Row) -> bool:
        """Append ``row`` if it fits; returns False (and changes nothing) when it does not."""
        data = self._data
        count = self._count
        is_restart = count % RESTART_INTERVAL == 0
        shared = 0 if is_restart else common_prefix_len(self._last_key, row.key)
        start = len(data)
        # Encode first, then roll back if the block overflows: cheaper than sizing twice.
        encode_row_v2(data, shared, row)
        if count:
            restarts_bytes = U16_SIZE_BYTES * (len(self._restarts) + (2 if is_restart else 1))
            if len(data) + restarts_bytes > self.block_size_bytes:
                del data[start:]
                return False
        else:
            self._first_key = row.key
        if is_restart:
            assert start <= MAX_U16, "restart offset must fit in u16"
            self._restarts.append(start)
        self._last_key = row.key
        self._count = count + 1
        kind = row.kind
        if kind is RowKind.VALUE:
            self.num_puts += 1
        elif kind is RowKind.TOMBSTONE:
            self.num_deletes += 1
        else:
            self.num_merges += 1
        return True

    def build(self) -> bytes:
        """The raw (uncompressed, unframed) block."""
        assert self._count > 0, "an empty block is never written"
        out = self._data
        for offset in self._restarts:
            out += _U16.pack(offset)
        out += _U16.pack(len(self._restarts))
        return bytes(out)


def encode_block_v2(rows: list[Row], check: bool = True) -> bytes:
    """All ``rows`` as one V2 block, regardless of size (a test and tooling helper)."""
    builder = BlockBuilderV2(MAX_U16 + 1)
    builder.block_size_bytes = 1 << 62  # accept everything
    for row in rows:
        if check:
            check_row_encodable(row)
        builder.add(row)
    return builder.build()


def encode_block_v1(rows: list[Row]) -> bytes:
    """Legacy block V1 with row codec V0 (only to test the format-version-1 reader)."""
    assert rows
    out = bytearray()
    offsets: list[int] = []
    first_key: bytes | None = None
    for row in rows:
        offsets.append(len(out))
        row_codec.encode_entry_v0(out, first_key, row)
        if first_key is None:
            first_key = row.key
    for offset in offsets:
        out += _U16.pack(offset)
    out += _U16.pack(len(offsets))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# Decoded block
# ---------------------------------------------------------------------------------------------


class Block:
    """A decoded data block, the unit the Db's block cache keeps, held as columns:
    ``keys[i]`` and ``values[i]`` (``b""`` for a tombstone) of row ``i``, the rest of the row
    (seq, kind, timestamps) left in the block's bytes until a reader asks for it
    (:meth:`row`, :meth:`seq`, :attr:`rows`). A point lookup is one ``bisect`` over ``keys``
    and builds one :class:`Row`; a scan of a *plain* block (:attr:`plain`) pairs
    ``keys`` with ``values`` without building any.

    Immutable by convention once built (it is shared through the block cache). A V2 block's
    columns are tuples and its seq positions an ``array``: the cyclic GC stops tracking the
    tuples of bytes after one pass and never tracks the array (a cache of thousands of blocks
    otherwise costs every older-generation collection a walk over each of their rows).
    ``size_bytes`` is the decoded block's raw size, a weight for the cache.
    """

    __slots__ = ("keys", "values", "size_bytes", "values_final", "_raw", "_metas", "_flags_or", "_rows", "_plain", "_unique")

    def __init__(self, keys: list[bytes], values: list[bytes], size_bytes: int, raw: bytes | None = None,
                 metas: list[int] | None = None, flags_or: int = -1, rows: list[Row] | None = None) -> None:
        self.keys = keys
        self.values = values
        self.size_bytes = size_bytes
        self._raw = raw
        self._metas = metas
        self._flags_or = flags_or
        self._rows = rows
        self._plain: int | None | bool = False  # False: not computed yet
        self._unique: bool | None = None  # :attr:`plain`, None: not computed yet
        #: Every row is a value without expiry: ``values[i]`` is what a reader of row ``i`` sees.
        self.values_final = (not flags_or & ~FLAG_HAS_CREATE_TS) if rows is None else all(
            r.kind is RowKind.VALUE and r.expire_ts_ms is None for r in rows)

    @classmethod
    def of_rows(cls, keys: list[bytes], rows: list[Row], size_bytes: int) -> "Block":
        """A block whose rows are already built (the legacy V1 decoder)."""
        return cls(keys, [r.value for r in rows], size_bytes, rows=rows)

    @property
    def rows(self) -> list[Row]:
        """Every row, built on first use (compaction, WAL replay, merge-operand folds)."""
        rows = self._rows
        if rows is None:
            raw = self._raw
            assert raw is not None and self._metas is not None
            rows = rows_of_columns_v2(raw, self.keys, self.values, self._metas)
            self._rows = rows
        return rows

    def row(self, i: int) -> Row:
        """Row ``i``."""
        rows = self._rows
        if rows is not None:
            return rows[i]
        return row_at_v2(self._raw, self.keys[i], self.values[i], self._metas[i])  # type: ignore[arg-type,index]

    def seq(self, i: int) -> int:
        rows = self._rows
        if rows is not None:
            return rows[i].seq
        return seq_at_v2(self._raw, self._metas[i])  # type: ignore[arg-type,index]

    @property
    def plain(self) -> bool:
        """Every row is a value without expiry and every key appears once: a reader at any seq
        at or above the block's highest sees exactly ``zip(keys, values)``."""
        unique = self._unique
        if unique is None:
            keys = self.keys
            unique = self._unique = self.values_final and len(set(keys)) == len(keys)
        return unique

    @property
    def plain_max_seq(self) -> int | None:
        """The block's highest seq when it is :attr:`plain`; None otherwise."""
        plain = self._plain
        if plain is False:
            plain = None
            if self.plain:
                if self._rows is None:
                    # Each row's seq is a big-endian u64 at its meta offset: the greatest of
                    # the 8-byte strings is the greatest seq (one unpack, not one a row).
                    raw = self._raw
                    plain = _U64.unpack(max([raw[m:m + 8] for m in self._metas]))[0]  # type: ignore[index,union-attr]
                else:
                    plain = max(r.seq for r in self._rows)
            self._plain = plain
        return plain  # type: ignore[return-value]

    def seek(self, key: bytes) -> int:
        """Index of the first row whose key is >= ``key`` (``len(rows)`` if none)."""
        return bisect_left(self.keys, key)

    def rows_from(self, key: bytes) -> Iterator[Row]:
        """Rows from the first one whose key is >= ``key``."""
        for i in range(bisect_left(self.keys, key), len(self.keys)):
            yield self.row(i)

    def __len__(self) -> int:
        return len(self.keys)


class RawBlock:
    """A V2 block's bytes, its CRC checked, not decoded: what the block cache keeps of a block
    that point lookups have searched (:func:`seek_key_v2`) without decoding it whole. A block
    read once by a random lookup in an SST far larger than the cache is seldom asked again;
    ``lookups`` counts the searches it has served (of different keys), and the one that reaches
    :data:`WHOLE_DECODE_LOOKUPS` decodes it whole (:meth:`decode`) for the lookups to come.

    It also keeps the last search's answer, ``last``: ``(key, ended, *spans)``, what
    :func:`seek_key_v2` gave for ``key`` (one flat tuple of bytes, a bool and ints, replaced
    whole: a lookup on another thread reads a key and its answer together, and the cyclic GC
    stops tracking the tuple after one pass, however its parts were made). A lookup of that key
    again (a hot key in a cold block) answers from it at any seq (``spans`` names every row of
    the key in the block), with no search and no decode.

    ``size_bytes`` is the raw size, the cache's weight as for a :class:`Block`.
    """

    __slots__ = ("raw", "size_bytes", "lookups", "last")

    def __init__(self, raw: bytes, key: bytes, spans: tuple[int, ...], ended: bool) -> None:
        self.raw = raw
        self.size_bytes = len(raw)
        self.lookups = 1
        self.last = (key, ended) + spans

    def decode(self, object_name: str, offset: int) -> Block:
        return decode_block_v2(self.raw, object_name, offset)

    def search(self, key: bytes, object_name: str, offset: int) -> tuple[bytes, tuple[int, ...], bool]:
        """:func:`seek_key_v2` of ``key`` in the block, kept as its last answer; ``(raw, spans,
        ended)``, what :func:`answer_of` takes after the key."""
        raw = self.raw
        spans, ended = seek_key_v2(raw, key, object_name, offset)
        self.last = (key, ended) + spans
        return raw, spans, ended


#: The search of a :class:`RawBlock` for a new key that decodes it whole instead (the first is
#: the lookup that read it). The third, not the second: at 1M random keys a quarter of the gets
#: land in a block a get searched before, and a second search (about 5 us) costs less than a
#: whole decode (about 14 us) that later gets seldom use; a key asked again is answered by the
#: block's last answer (:class:`RawBlock`), so hot keys do not need the decode.
WHOLE_DECODE_LOOKUPS = 3


def parse_block_v2_trailer(raw: bytes, object_name: str, offset: int) -> tuple[int, list[int]]:
    """Split a V2 block into (end of the entry region, restart offsets), checking both."""
    size = len(raw)
    if size < U16_SIZE_BYTES:
        raise CorruptionError(object_name, offset, "block shorter than its restart count")
    (n_restarts,) = _U16.unpack_from(raw, size - U16_SIZE_BYTES)
    entries_end = size - U16_SIZE_BYTES * (n_restarts + 1)
    if n_restarts == 0 or entries_end <= 0:
        raise CorruptionError(object_name, offset, f"block cannot hold {n_restarts} restart points")
    restarts = list(struct.unpack_from(f">{n_restarts}H", raw, entries_end))
    if restarts[0] != 0:
        raise CorruptionError(object_name, offset, "first restart point is not at offset 0")
    prev = -1
    for r in restarts:
        if r <= prev or r >= entries_end:
            raise CorruptionError(object_name, offset, f"restart offset {r} out of order or out of range")
        prev = r
    return entries_end, restarts


def decode_block_v2(raw: bytes, object_name: str, offset: int) -> Block:
    """Decode every row of a V2 block. ``offset`` is the block's offset in the object."""
    entries_end, restarts = parse_block_v2_trailer(raw, object_name, offset)
    keys, values, metas, flags_or = decode_columns_v2(raw, entries_end, restarts, object_name, offset)
    return Block(tuple(keys), tuple(values), len(raw), raw, metas, flags_or)


def decode_block_v1(raw: bytes, object_name: str, offset: int) -> Block:
    """Decode every row of a legacy V1 block (row codec V0)."""
    size = len(raw)
    if size < U16_SIZE_BYTES:
        raise CorruptionError(object_name, offset, "block shorter than its entry count")
    (count,) = _U16.unpack_from(raw, size - U16_SIZE_BYTES)
    entries_end = size - U16_SIZE_BYTES * (count + 1)
    if count == 0 or entries_end <= 0:
        raise CorruptionError(object_name, offset, f"block cannot hold {count} entries")
    offsets = struct.unpack_from(f">{count}H", raw, entries_end)
    keys: list[bytes] = []
    rows: list[Row] = []
    first_key: bytes | None = None
    for i, start in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < count else entries_end
        expected_start = 0 if i == 0 else offsets[i - 1]
        if start < expected_start or (i == 0 and start != 0) or end > entries_end or end <= start:
            raise CorruptionError(object_name, offset, f"entry offset {start} out of order or out of range")
        key, row, pos = decode_entry_v0(raw, start, end, first_key, object_name, offset)
        if pos != end:
            raise CorruptionError(object_name, offset + start, "V0 entry does not fill its slot")
        if first_key is None:
            first_key = key
        keys.append(key)
        rows.append(row)
    return Block.of_rows(keys, rows, size)


def decode_block(raw: bytes, format_version: int, object_name: str, offset: int) -> Block:
    """Decode a data block of an SST of ``format_version`` (1 or 2)."""
    if format_version == 2:
        return decode_block_v2(raw, object_name, offset)
    if format_version == 1:
        return decode_block_v1(raw, object_name, offset)
    raise CorruptionError(object_name, offset, f"unknown SST format version {format_version}")


# ---------------------------------------------------------------------------------------------
# Point lookup in an undecoded V2 block
# ---------------------------------------------------------------------------------------------


#: ``unpack_from`` of ``n`` restart offsets (u16 BE), by ``n`` (:func:`seek_key_v2`).
_RESTART_UNPACKS: dict[int, object] = {}
#: The bytes of an entry from its seq on (seq, flags, timestamps), by flags byte; None for flags
#: no writer sets.
_TAIL_BYTES = tuple(None if t is None else 9 + t for t in FLAG_TS_BYTES)


def _restart_unpack(n: int):  # type: ignore[no-untyped-def]
    unpack = _RESTART_UNPACKS[n] = struct.Struct(f">{n}H").unpack_from
    return unpack


def seek_key_v2(raw: bytes, key: bytes, object_name: str, offset: int) -> tuple[tuple[int, ...], bool]:
    """Where the rows of ``key`` lie in the V2 block ``raw``, decoding only the entries the
    answer depends on (a point lookup in a block read once: a cold get).

    Returns ``(spans, ended)``: ``spans`` is the flat tuple ``(value_start, meta, value_start,
    meta, ...)``, a pair for each row of ``key``, newest first (``raw[value_start:meta]`` is the
    stored value, ``meta`` the position of its seq, as in
    :func:`~slatedb.format.row_codec.decode_columns_v2`; flat, so that a :class:`RawBlock`
    keeping it holds no object the cyclic GC must track); ``ended`` is True when the block ended
    before a key past ``key`` (its versions may continue in the next block).

    A binary search over the restart points (whose keys are stored whole) picks the last one
    whose key is below ``key``; the entries are decoded from there up to the first key past
    ``key``, with the checks of the whole-block decoder. The answer then rests on that restart
    offset being the start of an entry, which a walk over the lengths of the entries before it
    (the chain from offset 0, as the whole-block decoder walks it) checks, together with every
    restart offset on the way: an offset inside an entry, out of order or out of range is a
    :class:`CorruptionError` naming the object, never a lookup misled. Restart offsets past the
    entries decoded are not looked at (nothing read depends on them).
    """
    size = len(raw)
    pos = 0  # the entry (or restart point) being read: where an error is reported
    try:
        if size < U16_SIZE_BYTES:
            raise ValueError("block shorter than its restart count")
        n = (raw[size - 2] << 8) | raw[size - 1]
        entries_end = size - U16_SIZE_BYTES * (n + 1)
        if n == 0 or entries_end <= 0:
            raise ValueError(f"block cannot hold {n} restart points")
        restarts = (_RESTART_UNPACKS.get(n) or _restart_unpack(n))(raw, entries_end)  # type: ignore[operator]
        if restarts[0]:
            raise ValueError("first restart point is not at offset 0")
        # The last restart point whose key is < key (the first one when none is).
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            pos = r = restarts[mid]
            if r >= entries_end:
                raise ValueError(f"restart offset {r} out of range")
            u = raw[r + 1]
            if raw[r] == 0 and u < 0x80 and raw[r + 2] < 0x80:
                restart_key = raw[r + 3 : r + 3 + u]
            else:
                restart_key = decode_restart_key_v2(raw, r, entries_end, object_name, offset)
            if restart_key < key:
                lo = mid
            else:
                hi = mid
        start = restarts[lo]
        pos = 0
        if start >= entries_end:
            raise ValueError(f"restart offset {start} out of range")
        tail_bytes = _TAIL_BYTES
        # The chain of entries from offset 0 must reach ``start``, meeting every restart offset
        # before it at the start of an entry (a restart offset at or before the entry reached is
        # out of order; one the walk steps over is inside an entry).
        for ri in range(1, lo + 1):
            nxt = restarts[ri]
            if nxt <= pos or nxt > start:
                raise ValueError(f"restart offset {nxt} out of order")
            while pos < nxt:
                u = raw[pos + 1]
                v = raw[pos + 2]
                if raw[pos] < 0x80 and u < 0x80 and v < 0x80:
                    p = pos + 3 + u + v
                else:
                    _, p = read_varint_u32(raw, pos, entries_end)
                    u, p = read_varint_u32(raw, p, entries_end)
                    v, p = read_varint_u32(raw, p, entries_end)
                    p += u + v
                tail = tail_bytes[raw[p + 8]]
                if tail is None:
                    raise ValueError(describe_bad_flags(raw[p + 8]))
                pos = p + tail
            if pos != nxt:
                raise ValueError(f"restart offset {nxt} is inside an entry")
            if raw[pos]:
                raise ValueError("restart entry shares a key prefix")
        # Decode from ``start`` (its first entry is checked as a restart point) to the first key
        # past ``key``.
        spans: tuple[int, ...] = ()
        ri = lo
        nxt = start
        prev = b""
        while pos < entries_end:
            s = raw[pos]
            u = raw[pos + 1]
            v = raw[pos + 2]
            if s < 0x80 and u < 0x80 and v < 0x80:
                p = pos + 3
            else:
                s, p = read_varint_u32(raw, pos, entries_end)
                u, p = read_varint_u32(raw, p, entries_end)
                v, p = read_varint_u32(raw, p, entries_end)
            if pos >= nxt:
                if pos > nxt:
                    raise ValueError(f"restart offset {nxt} is inside an entry")
                if s:
                    raise ValueError("restart entry shares a key prefix")
                ri += 1
                nxt = restarts[ri] if ri < n else entries_end
            key_end = p + u
            meta = key_end + v
            if s:
                if s > len(prev):
                    raise ValueError("shared prefix longer than the previous key")
                k = prev[:s] + raw[p:key_end]
            elif u:
                k = raw[p:key_end]
            else:
                raise ValueError("empty key")
            tail = tail_bytes[raw[meta + 8]]
            if tail is None:
                raise ValueError(describe_bad_flags(raw[meta + 8]))
            if meta + tail > entries_end:
                raise ValueError("entry runs past the end of the entries")
            if k >= key:
                if k != key:
                    return spans, False
                spans += (key_end, meta)
            prev = k
            pos = meta + tail
        if nxt != entries_end:  # a restart offset the entries passed, or past them
            raise ValueError(f"restart offset {nxt} is inside an entry or out of range")
        return spans, True
    except (ValueError, IndexError) as exc:
        raise CorruptionError(object_name, offset + pos, f"bad V2 block: {exc}") from None


#: :func:`answer_of`: the block ended on or before the key; its versions may go on in the next.
NEXT_BLOCK = object()


def answer_of(key: bytes, max_seq: int | None, value_ok: bool, raw: bytes, spans: tuple[int, ...],
              ended: bool) -> bytes | Row | None | object:
    """What a point lookup answers from a block :func:`seek_key_v2` searched (``spans`` and
    ``ended`` of ``key`` in ``raw``): the newest row of ``key`` with ``seq <= max_seq`` (with
    ``value_ok``, a value without expiry as the value itself), None when the block proves there
    is none, or :data:`NEXT_BLOCK`."""
    for j in range(1, len(spans), 2):
        meta = spans[j]
        if max_seq is None or seq_at_v2(raw, meta) <= max_seq:
            value_start = spans[j - 1]
            flags = raw[meta + 8]
            if value_ok and not flags & ~FLAG_HAS_CREATE_TS:
                return raw[value_start:meta]
            return row_at_v2(raw, key, b"" if flags & FLAG_TOMBSTONE else raw[value_start:meta], meta)
    return NEXT_BLOCK if ended else None


def block_first_key(raw: bytes, format_version: int, object_name: str, offset: int) -> bytes:
    """The first key of a block without decoding the rest (V2: the restart-0 key)."""
    if format_version == 2:
        entries_end, restarts = parse_block_v2_trailer(raw, object_name, offset)
        return decode_restart_key_v2(raw, 0, entries_end, object_name, offset)
    return decode_block_v1(raw, object_name, offset).keys[0]
