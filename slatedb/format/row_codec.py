"""Row codecs of SST data blocks: V2 (written by format version 2) and V0 (format version 1).

Row codec V2, one entry::

    shared (LEB128 u32) | unshared (LEB128 u32) | value_len (LEB128 u32, 0 for tombstones)
    | key suffix | value | seq (u64 BE) | flags (u8) | [expire_ts i64 BE] | [create_ts i64 BE]

The key is ``previous_key[:shared] + suffix`` (``shared == 0`` at restart points).

Row codec V0 (legacy, read only)::

    key_prefix_len u16 | key_suffix_len u16 | suffix | seq u64 | flags u8 | [expire_ts i64]
    | [create_ts i64] | [value_len u32 | value]   (value part absent for tombstones)

with the prefix taken from the block's *first* key.

The decoders are the hot path of every read, so they are written as plain loops over ``bytes``
with local-variable caching; they raise :class:`CorruptionError` (never IndexError/struct.error)
naming the object and the absolute offset of the entry that failed.
"""

from __future__ import annotations

import struct
from array import array as _array
from collections.abc import Sequence

from slatedb.errors import CorruptionError, InvalidArgumentError
from slatedb.row import Row, RowKind

# Row flags (a bitset in one byte).
FLAG_TOMBSTONE = 0x01
FLAG_HAS_EXPIRE_TS = 0x02
FLAG_HAS_CREATE_TS = 0x04
FLAG_MERGE_OPERAND = 0x08
KNOWN_FLAGS = FLAG_TOMBSTONE | FLAG_HAS_EXPIRE_TS | FLAG_HAS_CREATE_TS | FLAG_MERGE_OPERAND

MAX_U32 = 0xFFFFFFFF
MAX_U64 = 0xFFFFFFFFFFFFFFFF

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_I64 = struct.Struct(">q")
_SEQ_FLAGS = struct.Struct(">QB")
_TS2 = struct.Struct(">qq")

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE
_MERGE = RowKind.MERGE_OPERAND


def _build_flag_table() -> tuple[tuple[RowKind, bool, bool] | None, ...]:
    """flags byte -> (kind, has_expire, has_create), or None when the byte is invalid.

    A table lookup replaces four bit tests per row in the decoders.
    """
    table: list[tuple[RowKind, bool, bool] | None] = []
    for flags in range(256):
        if flags & ~KNOWN_FLAGS or (flags & FLAG_TOMBSTONE and flags & FLAG_MERGE_OPERAND):
            table.append(None)
            continue
        if flags & FLAG_TOMBSTONE:
            kind = _TOMBSTONE
        elif flags & FLAG_MERGE_OPERAND:
            kind = _MERGE
        else:
            kind = _VALUE
        table.append((kind, bool(flags & FLAG_HAS_EXPIRE_TS), bool(flags & FLAG_HAS_CREATE_TS)))
    return tuple(table)


FLAG_TABLE = _build_flag_table()


def flags_of(row: Row) -> int:
    """The flags byte the writer stores for ``row``."""
    kind = row.kind
    flags = FLAG_TOMBSTONE if kind is _TOMBSTONE else FLAG_MERGE_OPERAND if kind is _MERGE else 0
    if row.expire_ts_ms is not None:
        flags |= FLAG_HAS_EXPIRE_TS
    if row.create_ts_ms is not None:
        flags |= FLAG_HAS_CREATE_TS
    return flags


def describe_bad_flags(flags: int) -> str:
    if flags & ~KNOWN_FLAGS:
        return f"row flags 0x{flags:02x} have unknown bits 0x{flags & ~KNOWN_FLAGS & 0xFF:02x}"
    return f"row flags 0x{flags:02x}: tombstone and merge operand are mutually exclusive"


# ---------------------------------------------------------------------------------------------
# LEB128
# ---------------------------------------------------------------------------------------------


def varint_len(value: int) -> int:
    """Encoded size in bytes of ``value`` as LEB128."""
    n = 1
    while value >= 0x80:
        value >>= 7
        n += 1
    return n


def write_varint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_varint_u32(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a LEB128 u32 at ``pos``; returns (value, next position).

    Raises ValueError (turned into CorruptionError by the callers) when the varint runs past
    ``end``, is longer than 5 bytes or overflows 32 bits.
    """
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise ValueError("varint runs past the end of the entries")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise ValueError("varint longer than 5 bytes")
    if result > MAX_U32:
        raise ValueError("varint overflows u32")
    return result, pos


# ---------------------------------------------------------------------------------------------
# V2 encode
# ---------------------------------------------------------------------------------------------


def check_row_encodable(row: Row) -> None:
    """Reject rows the format cannot represent, before any byte is written."""
    if not row.key:
        raise InvalidArgumentError("row key must not be empty")
    if len(row.key) > MAX_U32 or len(row.value) > MAX_U32:
        raise InvalidArgumentError("row key and value must each be shorter than 4 GiB")
    if not 0 <= row.seq <= MAX_U64:
        raise InvalidArgumentError(f"row seq {row.seq} is not a u64")
    if row.kind is _TOMBSTONE and row.value:
        raise InvalidArgumentError("a tombstone carries no value")


def encoded_size_v2(shared: int, row: Row) -> int:
    """Size in bytes of ``row`` encoded with ``shared`` key bytes elided."""
    unshared = len(row.key) - shared
    value_len = 0 if row.kind is _TOMBSTONE else len(row.value)
    size = varint_len(shared) + varint_len(unshared) + varint_len(value_len) + unshared + value_len + 9
    if row.expire_ts_ms is not None:
        size += 8
    if row.create_ts_ms is not None:
        size += 8
    return size


def encode_row_v2(out: bytearray, shared: int, row: Row) -> None:
    """Append ``row`` to ``out`` in row codec V2, eliding the first ``shared`` key bytes."""
    key = row.key
    assert 0 <= shared <= len(key)
    value = b"" if row.kind is _TOMBSTONE else row.value
    write_varint(out, shared)
    write_varint(out, len(key) - shared)
    write_varint(out, len(value))
    out += key[shared:]
    out += value
    flags = flags_of(row)
    out += _SEQ_FLAGS.pack(row.seq, flags)
    if row.expire_ts_ms is not None:
        out += _I64.pack(row.expire_ts_ms)
    if row.create_ts_ms is not None:
        out += _I64.pack(row.create_ts_ms)


def common_prefix_len(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    # Binary search on prefix equality: slices compare in C, so this beats a byte loop.
    lo, hi = 0, n  # invariant: a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------------------------
# V2 decode
# ---------------------------------------------------------------------------------------------


def decode_entries_v2(
    data: bytes,
    entries_end: int,
    restarts: Sequence[int],
    object_name: str,
    base_offset: int,
) -> tuple[list[bytes], list[Row]]:
    """Decode every entry of a V2 block's entry region ``data[:entries_end]``.

    Checks that the entries tile the region exactly, that every restart offset is the start of
    an entry with ``shared == 0``, and that every flags byte is valid. ``base_offset`` is the
    block's offset in the object, used only in error messages.
    """
    keys: list[bytes] = []
    rows: list[Row] = []
    append_key = keys.append
    append_row = rows.append
    flag_table = FLAG_TABLE
    unpack_seq_flags = _SEQ_FLAGS.unpack_from
    unpack_i64 = _I64.unpack_from
    unpack_ts2 = _TS2.unpack_from
    row_new = Row
    n_restarts = len(restarts)
    restart_i = 0
    next_restart = restarts[0] if n_restarts else -1
    prev = b""
    pos = 0
    entry_start = 0
    try:
        while pos < entries_end:
            entry_start = pos
            b = data[pos]
            if b < 0x80:
                shared = b
                pos += 1
            else:
                shared, pos = read_varint_u32(data, pos, entries_end)
            b = data[pos]
            if b < 0x80:
                unshared = b
                pos += 1
            else:
                unshared, pos = read_varint_u32(data, pos, entries_end)
            b = data[pos]
            if b < 0x80:
                value_len = b
                pos += 1
            else:
                value_len, pos = read_varint_u32(data, pos, entries_end)
            if entry_start == next_restart:
                if shared:
                    raise ValueError("restart entry shares a key prefix")
                restart_i += 1
                next_restart = restarts[restart_i] if restart_i < n_restarts else -1
            key_end = pos + unshared
            value_end = key_end + value_len
            if value_end + 9 > entries_end:
                raise ValueError("entry runs past the end of the entries")
            if shared:
                if shared > len(prev):
                    raise ValueError("shared prefix longer than the previous key")
                key = prev[:shared] + data[pos:key_end]
            else:
                key = data[pos:key_end]
            seq, flags = unpack_seq_flags(data, value_end)
            pos = value_end + 9
            info = flag_table[flags]
            if info is None:
                raise ValueError(describe_bad_flags(flags))
            kind, has_expire, has_create = info
            if has_expire:
                if has_create:
                    expire_ts, create_ts = unpack_ts2(data, pos)
                    pos += 16
                else:
                    (expire_ts,) = unpack_i64(data, pos)
                    create_ts = None
                    pos += 8
            elif has_create:
                (create_ts,) = unpack_i64(data, pos)
                expire_ts = None
                pos += 8
            else:
                expire_ts = create_ts = None
            if pos > entries_end:
                raise ValueError("entry runs past the end of the entries")
            if not key:
                raise ValueError("empty key")
            value = data[key_end:value_end] if kind is not _TOMBSTONE else b""
            append_key(key)
            append_row(row_new(key, seq, kind, value, expire_ts, create_ts))
            prev = key
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptionError(object_name, base_offset + entry_start, f"bad V2 row: {exc}") from None
    if restart_i != n_restarts:
        raise CorruptionError(object_name, base_offset, "restart offsets do not match the entries")
    return keys, rows


#: flags byte -> bytes of timestamps after seq and flags (None: an invalid flags byte).
FLAG_TS_BYTES = tuple(None if t is None else 8 * (t[1] + t[2]) for t in FLAG_TABLE)


def decode_columns_v2(
    data: bytes,
    entries_end: int,
    restarts: Sequence[int],
    object_name: str,
    base_offset: int,
) -> tuple[list[bytes], list[bytes], Sequence[int], int]:
    """Decode a V2 block's entry region into columns, building no :class:`Row`:
    ``(keys, values, metas, flags_or)`` where ``metas[i]`` is the position of row ``i``'s
    ``seq`` (its flags and timestamps follow) and ``flags_or`` the OR of every flags byte.

    The same checks as :func:`decode_entries_v2` (entries tile the region, restart offsets are
    entries with ``shared == 0``, valid flags, no empty key): what this accepts, the row
    accessors of :class:`~slatedb.format.block.Block` decode without further checks.

    This loop (a read's first touch of a block) checks without bookkeeping: a bad flags byte
    fails the size lookup (None), an overrun leaves the walk off the region's end, restart
    offsets must be the starts of the ``shared == 0`` entries they name, in order. What fails is
    decoded again by :func:`_decode_columns_v2_checked`, whose error names the entry. An entry
    sharing as many bytes as the one before reuses its prefix (the same key's first bytes).
    """
    keys: list[bytes] = []
    values: list[bytes] = []
    metas = _array("L")  # untracked by the cyclic GC, 4 bytes an entry
    append_key, append_value, append_meta = keys.append, values.append, metas.append
    zero: list[int] = []  # starts of the entries with shared == 0 (the restart points, mostly)
    ts_bytes = FLAG_TS_BYTES
    prev = prefix = b""
    last_shared = -1
    pos = flags_or = 0
    try:
        while pos < entries_end:
            shared = data[pos]
            unshared = data[pos + 1]
            value_len = data[pos + 2]
            if (shared | unshared | value_len) < 0x80:
                p = pos + 3
            else:
                shared, p = read_varint_u32(data, pos, entries_end)
                unshared, p = read_varint_u32(data, p, entries_end)
                value_len, p = read_varint_u32(data, p, entries_end)
            key_end = p + unshared
            if shared:
                if shared != last_shared:
                    if shared > len(prev):
                        raise ValueError
                    prefix = prev[:shared]
                    last_shared = shared
                prev = prefix + data[p:key_end]
            elif unshared:
                zero.append(pos)
                last_shared = -1
                prev = data[p:key_end]
            else:
                raise ValueError
            value_end = key_end + value_len
            flags = data[value_end + 8]
            pos = value_end + 9 + ts_bytes[flags]  # TypeError: an invalid flags byte
            flags_or |= flags
            append_key(prev)
            append_value(data[key_end:value_end])
            append_meta(value_end)
    except (ValueError, IndexError, TypeError):
        return _decode_columns_v2_checked(data, entries_end, restarts, object_name, base_offset)
    if pos != entries_end or (zero != restarts and _restarts_apart(zero, restarts)):
        return _decode_columns_v2_checked(data, entries_end, restarts, object_name, base_offset)
    if flags_or & FLAG_TOMBSTONE:  # a tombstone reads as b"" whatever value bytes it carries
        for i, meta in enumerate(metas):
            if data[meta + 8] & FLAG_TOMBSTONE:
                values[i] = b""
    return keys, values, metas, flags_or


def _restarts_apart(zero: list[int], restarts: Sequence[int]) -> bool:
    """Whether ``restarts`` is not the in-order list of the ``shared == 0`` entry starts it names."""
    named = set(restarts)
    return [z for z in zero if z in named] != list(restarts)


def _decode_columns_v2_checked(
    data: bytes,
    entries_end: int,
    restarts: Sequence[int],
    object_name: str,
    base_offset: int,
) -> tuple[list[bytes], list[bytes], Sequence[int], int]:
    """:func:`decode_columns_v2` entry by entry, tracking where each starts: a failed check is
    a :class:`CorruptionError` naming the object and the entry's absolute offset."""
    keys: list[bytes] = []
    values: list[bytes] = []
    metas = _array("L")
    append_key = keys.append
    append_value = values.append
    append_meta = metas.append
    ts_bytes = FLAG_TS_BYTES
    n_restarts = len(restarts)
    restart_i = 0
    next_restart = restarts[0] if n_restarts else -1
    prev = b""
    pos = 0
    entry_start = 0
    flags_or = 0
    try:
        while pos < entries_end:
            entry_start = pos
            shared = data[pos]
            unshared = data[pos + 1]
            value_len = data[pos + 2]
            if shared < 0x80 and unshared < 0x80 and value_len < 0x80:
                pos += 3
            else:
                shared, pos = read_varint_u32(data, pos, entries_end)
                unshared, pos = read_varint_u32(data, pos, entries_end)
                value_len, pos = read_varint_u32(data, pos, entries_end)
            if entry_start == next_restart:
                if shared:
                    raise ValueError("restart entry shares a key prefix")
                restart_i += 1
                next_restart = restarts[restart_i] if restart_i < n_restarts else -1
            key_end = pos + unshared
            value_end = key_end + value_len
            if shared:
                if shared > len(prev):
                    raise ValueError("shared prefix longer than the previous key")
                key = prev[:shared] + data[pos:key_end]
            elif unshared:
                key = data[pos:key_end]
            else:
                raise ValueError("empty key")
            flags = data[value_end + 8]
            skip = ts_bytes[flags]
            if skip is None:
                raise ValueError(describe_bad_flags(flags))
            pos = value_end + 9 + skip
            if pos > entries_end:  # (the flags byte may have been read past the entries)
                raise ValueError("entry runs past the end of the entries")
            flags_or |= flags
            append_key(key)
            append_value(data[key_end:value_end])
            append_meta(value_end)
            prev = key
    except (ValueError, IndexError) as exc:
        raise CorruptionError(object_name, base_offset + entry_start, f"bad V2 row: {exc}") from None
    if restart_i != n_restarts:
        raise CorruptionError(object_name, base_offset, "restart offsets do not match the entries")
    if flags_or & FLAG_TOMBSTONE:  # a tombstone reads as b"" whatever value bytes it carries
        for i, meta in enumerate(metas):
            if data[meta + 8] & FLAG_TOMBSTONE:
                values[i] = b""
    return keys, values, metas, flags_or


def row_at_v2(data: bytes, key: bytes, value: bytes, meta: int) -> Row:
    """The row whose seq is at ``meta`` in a block :func:`decode_columns_v2` accepted."""
    seq, flags = _SEQ_FLAGS.unpack_from(data, meta)
    kind, has_expire, has_create = FLAG_TABLE[flags]  # type: ignore[misc]
    if has_expire:
        if has_create:
            expire_ts, create_ts = _TS2.unpack_from(data, meta + 9)
            return Row(key, seq, kind, value, expire_ts, create_ts)
        return Row(key, seq, kind, value, _I64.unpack_from(data, meta + 9)[0], None)
    if has_create:
        return Row(key, seq, kind, value, None, _I64.unpack_from(data, meta + 9)[0])
    return Row(key, seq, kind, value, None, None)


def rows_of_columns_v2(data: bytes, keys: list[bytes], values: list[bytes], metas: list[int]) -> list[Row]:
    """Every row of a block :func:`decode_columns_v2` accepted (:func:`row_at_v2` for each,
    inlined: compaction and merges build whole blocks of rows)."""
    rows: list[Row] = []
    append = rows.append
    new = tuple.__new__
    unpack_seq_flags = _SEQ_FLAGS.unpack_from
    unpack_i64 = _I64.unpack_from
    flag_table = FLAG_TABLE
    for key, value, meta in zip(keys, values, metas):
        seq, flags = unpack_seq_flags(data, meta)
        kind, has_expire, has_create = flag_table[flags]  # type: ignore[misc]
        if has_create:
            if has_expire:
                expire_ts, create_ts = _TS2.unpack_from(data, meta + 9)
                append(new(Row, (key, seq, kind, value, expire_ts, create_ts)))
            else:
                append(new(Row, (key, seq, kind, value, None, unpack_i64(data, meta + 9)[0])))
        elif has_expire:
            append(new(Row, (key, seq, kind, value, unpack_i64(data, meta + 9)[0], None)))
        else:
            append(new(Row, (key, seq, kind, value, None, None)))
    return rows


def seq_at_v2(data: bytes, meta: int) -> int:
    return _U64.unpack_from(data, meta)[0]


def decode_restart_key_v2(
    data: bytes, pos: int, entries_end: int, object_name: str, base_offset: int
) -> bytes:
    """The full key stored at a restart point (``shared`` must be 0 there)."""
    try:
        shared, p = read_varint_u32(data, pos, entries_end)
        unshared, p = read_varint_u32(data, p, entries_end)
        _, p = read_varint_u32(data, p, entries_end)
        if shared:
            raise ValueError("restart entry shares a key prefix")
        if p + unshared > entries_end or unshared == 0:
            raise ValueError("restart key runs past the end of the entries or is empty")
    except ValueError as exc:
        raise CorruptionError(object_name, base_offset + pos, f"bad V2 restart entry: {exc}") from None
    return data[p : p + unshared]


# ---------------------------------------------------------------------------------------------
# V0 decode (format version 1)
# ---------------------------------------------------------------------------------------------


def decode_entry_v0(
    data: bytes, pos: int, end: int, first_key: bytes | None, object_name: str, base_offset: int
) -> tuple[bytes, Row, int]:
    """Decode one row codec V0 entry spanning ``data[pos:end]``.

    ``first_key`` is the block's first key (``None`` while decoding that first entry).
    Returns (key, row, position after the entry).
    """
    entry_start = pos
    try:
        if pos + 4 > end:
            raise ValueError("entry header runs past its end")
        prefix_len, suffix_len = struct.unpack_from(">HH", data, pos)
        pos += 4
        if first_key is None:
            if prefix_len:
                raise ValueError("first entry of a block shares a key prefix")
            prefix = b""
        else:
            if prefix_len > len(first_key):
                raise ValueError("key prefix longer than the block's first key")
            prefix = first_key[:prefix_len]
        if pos + suffix_len + 9 > end:
            raise ValueError("entry runs past its end")
        key = prefix + data[pos : pos + suffix_len]
        pos += suffix_len
        seq, flags = _SEQ_FLAGS.unpack_from(data, pos)
        pos += 9
        info = FLAG_TABLE[flags]
        if info is None:
            raise ValueError(describe_bad_flags(flags))
        kind, has_expire, has_create = info
        expire_ts = create_ts = None
        if has_expire:
            if pos + 8 > end:
                raise ValueError("entry runs past its end")
            (expire_ts,) = _I64.unpack_from(data, pos)
            pos += 8
        if has_create:
            if pos + 8 > end:
                raise ValueError("entry runs past its end")
            (create_ts,) = _I64.unpack_from(data, pos)
            pos += 8
        value = b""
        if kind is not _TOMBSTONE:
            if pos + 4 > end:
                raise ValueError("entry runs past its end")
            (value_len,) = _U32.unpack_from(data, pos)
            pos += 4
            if pos + value_len > end:
                raise ValueError("value runs past its end")
            value = data[pos : pos + value_len]
            pos += value_len
        if not key:
            raise ValueError("empty key")
    except (ValueError, IndexError, struct.error) as exc:
        raise CorruptionError(object_name, base_offset + entry_start, f"bad V0 row: {exc}") from None
    return key, Row(key, seq, kind, value, expire_ts, create_ts), pos


def encode_entry_v0(out: bytearray, first_key: bytes | None, row: Row) -> None:
    """Append ``row`` in row codec V0 (only for tests of the legacy reader: we write V2)."""
    key = row.key
    prefix_len = 0 if first_key is None else common_prefix_len(first_key, key)
    suffix = key[prefix_len:]
    out += struct.pack(">HH", prefix_len, len(suffix))
    out += suffix
    out += _SEQ_FLAGS.pack(row.seq, flags_of(row))
    if row.expire_ts_ms is not None:
        out += _I64.pack(row.expire_ts_ms)
    if row.create_ts_ms is not None:
        out += _I64.pack(row.create_ts_ms)
    if row.kind is not _TOMBSTONE:
        out += _U32.pack(len(row.value))
        out += row.value
