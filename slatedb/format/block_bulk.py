"""Data blocks of a compacted SST built for many rows at once, with numpy.

:class:`~slatedb.format.block.BlockBuilderV2` encodes one row at a time: a shared-prefix search,
three varints, a struct pack and a size check per row, about 10 µs a row in Python (the L0
flush of a 100k-row memtable spent 1.2 s there). :func:`encode_blocks` computes the same
bytes with array operations over all the rows it is given:

* the shared prefix of each key with the previous one, from a zero-padded key matrix;
* every row's encoded size twice (as a restart entry and as a prefix-compressed one), and from
  them where the builder's size rule cuts blocks: a block starting at row ``s`` holds rows
  ``s..j`` while ``entries + 2 * (restarts + 1) <= block_size`` (an empty block takes any row),
  with a restart every 16 entries counted from ``s``; the cut after every possible ``s`` is
  found by one vectorised binary search, then followed from row 0;
* the headers (three LEB128 varints), key suffixes and tails (seq, flags, timestamps) written
  into one buffer, sliced once per row and joined with the values per block.

Same bytes as the row-at-a-time builder, block for block (``tests/format/test_bulk_encode.py``
holds it with hypothesis). The caller (:meth:`slatedb.format.sst_writer.SstWriter.add_sorted`)
validates the rows first, and carries the rows of the last, still open block into its next
call, so that slices of a memtable encode exactly as the whole would.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from operator import countOf, itemgetter

import attrs
import numpy as np

from slatedb.format.block import RESTART_INTERVAL
from slatedb.format.compression import frame_slices
from slatedb.format.row_codec import (
    FLAG_HAS_CREATE_TS,
    FLAG_HAS_EXPIRE_TS,
    FLAG_MERGE_OPERAND,
    FLAG_TOMBSTONE,
    MAX_U32,
)
from slatedb.row import Row, RowKind

#: Largest key matrix built at once (rows x longest key, bytes); larger inputs are split.
MAX_KEY_MATRIX_BYTES = 1 << 23
#: Smallest encoded entry: three one-byte varints, no suffix, no value, seq and flags.
_MIN_ENTRY_BYTES = 12

_KEY, _SEQ, _KIND, _VALUE, _EXPIRE, _CREATE = map(itemgetter, range(6))  # Row's fields
_KIND_FLAGS = np.array([0, FLAG_TOMBSTONE, FLAG_MERGE_OPERAND], dtype=np.uint8)


class KeysTooWide(Exception):
    """Internal: rows x longest key is above :data:`MAX_KEY_MATRIX_BYTES` (split the rows)."""


@attrs.frozen
class KeyMatrix:
    """Keys as arrays: ``lengths``, and ``padded`` (rows x longest key, zero-padded)."""

    lengths: np.ndarray
    padded: np.ndarray

    @classmethod
    def of(cls, keys: Sequence[bytes], max_bytes: int | None = None) -> KeyMatrix:
        """Raises :class:`KeysTooWide` when the matrix would exceed ``max_bytes``."""
        n = len(keys)
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=n)
        width = int(lengths.max()) if n else 0
        if max_bytes is not None and n * width > max_bytes:
            raise KeysTooWide(n * width)
        flat = np.frombuffer(b"".join(keys), dtype=np.uint8)
        if n and int(lengths.min()) == width:
            padded = flat.reshape(n, width)
        else:
            padded = np.zeros((n, width), dtype=np.uint8)
            padded[np.arange(width) < lengths[:, None]] = flat
        return cls(lengths, padded)

    def prefix_with_previous(self) -> np.ndarray:
        """``cpl[j]``: the common prefix length of key ``j - 1`` and key ``j`` (``cpl[0] = 0``)."""
        lengths, m = self.lengths, self.padded
        n = len(lengths)
        cpl = np.zeros(n, dtype=np.int64)
        if n < 2:
            return cpl
        shorter = np.minimum(lengths[1:], lengths[:-1])
        eq = m[1:] == m[:-1]
        eq &= np.arange(m.shape[1]) < shorter[:, None]
        first_diff = np.argmax(~eq, axis=1)
        same = eq[np.arange(n - 1), first_diff] if m.shape[1] else np.ones(n - 1, dtype=bool)
        cpl[1:] = np.where(same, shorter, first_diff)
        return cpl

    def ascending(self, cpl: np.ndarray) -> np.ndarray:
        """Per row ``j >= 1``: -1 when key ``j`` sorts before key ``j - 1``, 0 when equal, 1 after."""
        lengths, m = self.lengths, self.padded
        n = len(lengths)
        if n < 2:
            return np.ones(0, dtype=np.int64)
        c = cpl[1:]
        prev_len, cur_len = lengths[:-1], lengths[1:]
        at = np.minimum(c, max(m.shape[1] - 1, 0))
        rows = np.arange(1, n)
        prev_b = m[rows - 1, at].astype(np.int64)
        cur_b = m[rows, at].astype(np.int64)
        exhausted = c == np.minimum(prev_len, cur_len)  # one key is a prefix of the other
        by_len = np.sign(cur_len - prev_len)
        return np.where(exhausted, by_len, np.sign(cur_b - prev_b))


@attrs.frozen
class Columns:
    """Rows as columns: what :func:`encode_blocks` reads. ``keys`` (None where the caller has the
    rows: :class:`~slatedb.format.kept_columns.KeptColumns`), ``seqs`` (uint64), ``kinds`` (uint8:
    :class:`~slatedb.row.RowKind` values) and ``vlen`` are arrays; ``cpl[j]`` is the prefix key
    ``j`` shares with key ``j - 1``; ``has_exp``/``expires`` and ``has_create``/``creates``
    (bool, int64; 0 where absent) the timestamps."""

    keys: list[bytes] | None
    km: KeyMatrix
    cpl: np.ndarray
    seqs: np.ndarray
    kinds: np.ndarray
    values: list[bytes]
    vlen: np.ndarray
    has_exp: np.ndarray
    expires: np.ndarray
    has_create: np.ndarray
    creates: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[Row], *, shared_prefixes: bool = True) -> Columns | None:
        """The columns of ``rows``, or None when the format cannot hold one of them (an empty
        key, a key or value of 4 GiB, a seq that is not a u64, a tombstone with a value):
        :func:`~slatedb.format.row_codec.check_row_encodable` then names it. Raises
        :class:`KeysTooWide` for more than one row whose key matrix would be too large.
        Without ``shared_prefixes`` ``cpl`` is all zeros (every entry written as a restart's, as
        WAL SSTs are): the key matrix comparison that finds the prefixes is skipped."""
        # One pass over the rows per column, straight into arrays where the column is numeric
        # (no intermediate list), and none at all for a timestamp no row has.
        n = len(rows)
        keys = list(map(_KEY, rows))
        km = KeyMatrix.of(keys, MAX_KEY_MATRIX_BYTES if n > 1 else None)
        values = list(map(_VALUE, rows))
        vlen = np.fromiter(map(len, values), dtype=np.int64, count=n)
        if not n or int(km.lengths.min()) == 0 or int(km.lengths.max()) > MAX_U32 or int(vlen.max()) > MAX_U32:
            return None
        try:
            seq_arr = np.fromiter(map(_SEQ, rows), dtype=np.uint64, count=n)
            if countOf(map(_KIND, rows), RowKind.VALUE) == n:  # only values: the usual case
                kind_arr = np.zeros(n, dtype=np.uint8)
            else:
                kind_arr = np.frombuffer(bytes(list(map(_KIND, rows))), dtype=np.uint8)
            has_exp, expires = _timestamps(rows, _EXPIRE, n)
            has_create, creates = _timestamps(rows, _CREATE, n)
        except (OverflowError, TypeError, ValueError):
            return None
        if int(kind_arr.max()) > 2 or ((kind_arr == 1) & (vlen > 0)).any():
            return None
        cpl = km.prefix_with_previous() if shared_prefixes else np.zeros(n, dtype=np.int64)
        return cls(keys, km, cpl, seq_arr, kind_arr, values, vlen, has_exp, expires, has_create, creates)

    def in_order(self) -> bool:
        """Key ascending, then seq descending (compacted SSTs)."""
        if len(self.seqs) < 2:
            return True
        order = self.km.ascending(self.cpl)
        if (order < 0).any():
            return False
        same = np.flatnonzero(order == 0)
        return not len(same) or not (self.seqs[same + 1] >= self.seqs[same]).any()


def varint_lengths(x: np.ndarray) -> np.ndarray:
    """LEB128 sizes of ``x`` (values below 2**35)."""
    return 1 + (x >= 1 << 7) + (x >= 1 << 14) + (x >= 1 << 21) + (x >= 1 << 28)


def _varint_sizes(x: np.ndarray) -> np.ndarray | int:
    """:func:`varint_lengths`, or 1 when every value of ``x`` takes one byte (the usual case:
    one pass instead of nine)."""
    return 1 if not len(x) or int(x.max()) < 1 << 7 else varint_lengths(x)


def _varint_matrix(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``rows x w`` LEB128 bytes of ``x``, each value's length): ``w`` is the longest length."""
    if not len(x) or int(x.max()) < 1 << 7:  # one byte each: the usual case
        return x.astype(np.uint8)[:, None], np.ones(len(x), dtype=np.int64)
    lens = varint_lengths(x)
    w = int(lens.max())
    cols = np.arange(w)
    out = ((x[:, None] >> (7 * cols)) & 0x7F).astype(np.uint8)
    out |= np.where(cols < (lens - 1)[:, None], 0x80, 0).astype(np.uint8)
    return out, lens


def _excl_cumsum(x: np.ndarray) -> np.ndarray:
    out = np.zeros(len(x), dtype=np.int64)
    if len(x) > 1:
        np.cumsum(x[:-1], out=out[1:])
    return out


@attrs.frozen
class EncodedBlocks:
    """What :func:`encode_blocks` produced: framed blocks for rows ``[0, rows_used)``, back to
    back in ``framed``, and the framed size of each.

    ``starts[b]`` and ``ends[b]`` (exclusive) are block ``b``'s rows; ``puts[b]``,
    ``deletes[b]`` and ``merges[b]`` its row counts.
    """

    framed: bytes
    framed_sizes: list[int]
    starts: list[int]
    ends: list[int]
    puts: list[int]
    deletes: list[int]
    merges: list[int]
    rows_used: int


def encode_blocks(cols: Columns, block_size: int, codec, final: bool) -> EncodedBlocks:
    """Encode validated rows (compacted order) into blocks, the first starting at row 0.
    Without ``final`` the last block, which later rows could still join, is left out
    (``rows_used`` tells where it starts).
    """
    km, cpl, seqs, kinds = cols.km, cols.cpl, cols.seqs, cols.kinds
    values, vlen = cols.values, cols.vlen
    has_exp, expires, has_create, creates = cols.has_exp, cols.expires, cols.has_create, cols.creates
    n = len(seqs)
    klen = km.lengths
    tail_len = _tail_lengths(has_exp, has_create)
    # Entry sizes as a restart (shared = 0) and prefix-compressed (shared = cpl).
    fixed = vlen + tail_len + _varint_sizes(vlen)
    e_restart = fixed + klen + (_varint_sizes(klen) + 1)
    unshared_all = klen - cpl
    e_shared = fixed + unshared_all + _varint_sizes(cpl) + _varint_sizes(unshared_all)

    block_starts = _block_starts(e_shared, e_restart, block_size, n)
    block_ends = block_starts[1:] + [n]
    if not final and block_starts:  # the last block may still take later rows
        block_starts, block_ends = block_starts[:-1], block_ends[:-1]
    if not block_starts:
        return EncodedBlocks(b"", [], [], [], [], [], [], 0)
    used_blocks = len(block_starts)
    m = block_ends[-1]
    if m < n:
        klen, vlen, cpl, tail_len = klen[:m], vlen[:m], cpl[:m], tail_len[:m]
        has_exp, has_create, kinds = has_exp[:m], has_create[:m], kinds[:m]

    # Which rows are restarts (every 16th entry of its block, counted from the block's start).
    is_start = np.zeros(m, dtype=bool)
    is_start[block_starts] = True
    block_of = np.cumsum(is_start) - 1
    start_arr = np.asarray(block_starts, dtype=np.int64)
    in_block = np.arange(m, dtype=np.int64) - start_arr[block_of]
    restart = in_block % RESTART_INTERVAL == 0
    shared = np.where(restart, 0, cpl)
    unshared = klen - shared
    entry = np.where(restart, e_restart[:m], e_shared[:m])

    # Restart offsets, block after block, and each block's trailer after its last row's tail:
    # the offsets (u16 BE) and their count (u16 BE), as the rows of a (blocks x longest) matrix.
    entry_pos = _excl_cumsum(entry)
    restart_rows = np.flatnonzero(restart)
    restart_block = block_of[restart_rows]
    offsets = entry_pos[restart_rows] - entry_pos[start_arr[restart_block]]
    assert not len(offsets) or int(offsets.max()) <= 0xFFFF, "restart offset must fit in u16"
    restarts_per_block = np.bincount(restart_block, minlength=used_blocks)
    trailer_len = 2 * restarts_per_block + 2
    per_block = np.zeros((used_blocks, int(restarts_per_block.max()) + 1), dtype=">u2")
    per_block[restart_block, np.arange(len(restart_rows)) - _excl_cumsum(restarts_per_block)[restart_block]] = offsets
    per_block[np.arange(used_blocks), restarts_per_block] = restarts_per_block
    trailers = per_block.view(np.uint8)

    # Each row's "glue": the previous row's tail, then (when the row opens a block) the previous
    # block's restart offsets and count, then the header and the key suffix; the value follows
    # it, and the last block's tail and trailer end the chunk. So one join makes every block,
    # back to back, and each block is a slice of it. The glue of every row is one row of a
    # matrix of fixed-width fields, each with its used length; one boolean mask over it
    # extracts every row's glue, concatenated in row order.
    tails, tail_width = _tails(seqs, kinds, has_exp, has_create, expires, creates, m)
    prev_tail = np.zeros(m, dtype=np.int64)
    prev_tail[1:] = tail_len[:-1]
    opens = start_arr[1:]  # the rows that open a block after the first
    prev_trailer = np.zeros(m, dtype=np.int64)
    prev_trailer[opens] = trailer_len[:-1]
    varints = [_varint_matrix(x) for x in (shared, unshared, vlen)]
    key_width = km.padded.shape[1]
    t_width = trailers.shape[1]
    widths = [tail_width, t_width, *(v[0].shape[1] for v in varints), key_width]
    at = np.cumsum([0, *widths]).tolist()
    matrix = np.empty((m, at[-1]), dtype=np.uint8)
    mask = np.empty((m, at[-1]), dtype=bool)
    matrix[1:, : at[1]] = tails[:-1]
    if int(tail_len.min()) == tail_width:  # every tail as wide as the field (uniform timestamps)
        mask[:, : at[1]] = True
        mask[0, : at[1]] = False
    else:
        _prefix_mask(mask[:, : at[1]], prev_tail)
    matrix[opens, at[1] : at[2]] = trailers[:-1]
    mask[:, at[1] : at[2]] = False  # a trailer only where a block opens
    if len(opens):
        mask[opens, at[1] : at[2]] = _prefix_rows(trailer_len[:-1], t_width)
    hdr_total = np.zeros(m, dtype=np.int64)
    for i, (mat, lens) in enumerate(varints):
        lo, hi = at[2 + i], at[3 + i]
        matrix[:, lo:hi] = mat
        if hi - lo == 1:  # one byte each (every value below 128)
            mask[:, lo] = True
            hdr_total += 1
        else:
            _prefix_mask(mask[:, lo:hi], lens)
            hdr_total += lens
    lo = at[-2]
    matrix[:, lo:] = km.padded[:m]
    key_dtype = np.uint8 if key_width < 256 else np.int64
    cols = np.arange(key_width, dtype=key_dtype)
    full = int(klen.min()) == key_width  # every key as wide as the matrix
    if not shared.any():  # no shared prefix (WAL SSTs, restarts only)
        if full:
            mask[:, lo:] = True
        else:
            np.less(cols, klen.astype(key_dtype)[:, None], out=mask[:, lo:])
    else:
        np.greater_equal(cols, shared.astype(key_dtype)[:, None], out=mask[:, lo:])
        if not full:
            mask[:, lo:] &= cols < klen.astype(key_dtype)[:, None]
    glue = matrix[mask]
    glue_len = prev_tail + prev_trailer + hdr_total + unshared

    pieces: list = [None] * (2 * m)
    pieces[0::2] = _split(glue, glue_len)
    pieces[1::2] = values[:m]
    last = m - 1
    pieces.append(tails[last, : int(tail_len[last])].tobytes() + trailers[-1, : int(trailer_len[-1])].tobytes())

    is_put = (kinds == 0).astype(np.int64)
    is_del = (kinds == 1).astype(np.int64)
    puts = np.add.reduceat(is_put, start_arr)
    dels = np.add.reduceat(is_del, start_arr)
    merges = (np.asarray(block_ends, dtype=np.int64) - start_arr - puts - dels).tolist()
    blocks = b"".join(pieces)
    block_bytes = np.add.reduceat(entry, start_arr) + trailer_len
    ends = np.cumsum(block_bytes).tolist()
    assert ends[-1] == len(blocks), "block sizes disagree with the bytes"
    framed, framed_sizes = frame_slices(codec, blocks, ends)
    return EncodedBlocks(framed, framed_sizes, list(block_starts), list(block_ends), puts.tolist(), dels.tolist(),
                         merges, m)


#: ``b"%ds" % n`` for the usual glue lengths: a row's glue is a struct field of its length.
_FIELD_FORMATS = [b"%ds" % n for n in range(256)]
_U8_RANGE = np.arange(256, dtype=np.uint8)


def _prefix_rows(lengths: np.ndarray, width: int) -> np.ndarray:
    """``rows x width`` bool: ``[r, c] = c < lengths[r]`` (uint8 compares when the width allows)."""
    if width < 256:
        return _U8_RANGE[:width] < lengths.astype(np.uint8)[:, None]
    return np.arange(width) < lengths[:, None]


def _prefix_mask(out: np.ndarray, lengths: np.ndarray) -> None:
    """``out[r, c] = c < lengths[r]`` (``out``: rows x width, bool). The compare runs in uint8
    when the width allows (numpy's broadcast compare of int64 costs ~2x)."""
    width = out.shape[1]
    if width < 256:
        np.less(_U8_RANGE[:width], lengths.astype(np.uint8)[:, None], out=out)
    else:
        np.less(np.arange(width), lengths[:, None], out=out)


def _split(data: np.ndarray, lengths: np.ndarray) -> tuple[bytes, ...]:
    """``data`` (uint8) cut into consecutive pieces of ``lengths``, as bytes objects: one
    ``struct.unpack`` whose format is the pieces' lengths (``"5s13s..."``), so that no Python
    step runs per piece (a slice a row in a list comprehension cost ~1.5x as much)."""
    lens = lengths.tolist()
    if int(lengths.max()) < len(_FIELD_FORMATS):
        fmt = b"".join(map(_FIELD_FORMATS.__getitem__, lens))
    else:
        fmt = b"".join([b"%ds" % n for n in lens])
    return struct.Struct(fmt).unpack(data)  # not struct.unpack: its cache would keep the format


def _presence(has: np.ndarray) -> bool | None:
    """True when every row has the timestamp, False when none has, None when some have."""
    if not len(has) or not has[0]:
        return None if has.any() else False
    return True if has.all() else None


def _tail_lengths(has_exp: np.ndarray, has_create: np.ndarray) -> np.ndarray:
    """Each row's tail size: seq and flags (9 bytes), and 8 a timestamp."""
    exp, create = _presence(has_exp), _presence(has_create)
    if exp is not None and create is not None:  # the same for every row
        return np.full(len(has_exp), 9 + 8 * exp + 8 * create, dtype=np.int64)
    return 9 + 8 * has_exp.astype(np.int64) + 8 * has_create.astype(np.int64)


#: Row tails of rows that all have the same timestamps: (expiry?, create time?) -> record dtype.
_TAIL_RECORDS = {
    (e, c): np.dtype([("seq", ">u8"), ("flags", "u1")] + [("exp", ">i8")] * e + [("create", ">i8")] * c)
    for e in (False, True) for c in (False, True)
}


def _tails(seqs, kinds, has_exp, has_create, expires, creates, m: int) -> tuple[np.ndarray, int]:
    """(``rows x w`` row tails: seq u64 BE, flags, [expire i64 BE], [create i64 BE]; ``w``)."""
    exp, create = _presence(has_exp[:m]), _presence(has_create[:m])
    if exp is not None and create is not None:  # every row alike: one record array, no scatter
        rec = np.empty(m, dtype=_TAIL_RECORDS[exp, create])
        rec["seq"] = seqs[:m]
        flags = _KIND_FLAGS[kinds[:m]]
        if exp:
            flags |= FLAG_HAS_EXPIRE_TS
            rec["exp"] = expires[:m]
        if create:
            flags |= FLAG_HAS_CREATE_TS
            rec["create"] = creates[:m]
        rec["flags"] = flags
        return rec.view(np.uint8).reshape(m, rec.dtype.itemsize), rec.dtype.itemsize
    any_exp, any_create = bool(has_exp.any()), bool(has_create.any())
    width = 9 + 8 * any_exp + 8 * any_create
    tails = np.zeros((m, width), dtype=np.uint8)
    tails[:, :8] = seqs[:m].astype(">u8").view(np.uint8).reshape(m, 8)
    flags = _KIND_FLAGS[kinds]
    if any_exp:
        flags = flags | (has_exp * FLAG_HAS_EXPIRE_TS).astype(np.uint8)
        rows = np.flatnonzero(has_exp)
        tails[rows, 9:17] = _i64_be(expires, rows)
    if any_create:
        flags = flags | (has_create * FLAG_HAS_CREATE_TS).astype(np.uint8)
        rows = np.flatnonzero(has_create)
        be = _i64_be(creates, rows)
        if not any_exp:
            tails[rows, 9:17] = be
        else:  # after the expiry where there is one
            with_exp = has_exp[rows]
            tails[rows[~with_exp], 9:17] = be[~with_exp]
            tails[rows[with_exp], 17:25] = be[with_exp]
    tails[:, 8] = flags
    return tails, width


def _timestamps(rows: Sequence[Row], field: itemgetter, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(which rows have the timestamp ``field``, its values as int64, 0 where absent). Raises
    OverflowError for a value outside i64 (:func:`Columns.of` then leaves the rows to ``add``)."""
    if n and field(rows[0]) is not None:  # likely every row (the engine stamps create times)
        try:
            return np.ones(n, dtype=bool), np.fromiter(map(field, rows), dtype=np.int64, count=n)
        except TypeError:  # a None further on
            pass
    elif countOf(map(field, rows), None) == n:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64)
    column = list(map(field, rows))
    present = np.fromiter((v is not None for v in column), dtype=bool, count=n)
    return present, np.fromiter((0 if v is None else v for v in column), dtype=np.int64, count=n)


def _i64_be(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows x 8`` big-endian bytes of ``values`` at ``rows``."""
    return values[rows].astype(">i8").view(np.uint8).reshape(len(rows), 8)


def _block_starts(e_shared: np.ndarray, e_restart: np.ndarray, block_size: int, n: int) -> list[int]:
    """The rows that open a block, greedily from row 0, under the builder's size rule."""
    if n == 0:
        return []
    # T(s, j): the size of a block holding rows s..j =
    #   P[j+1] - P[s] (entries as prefix-compressed) + the restart extras at s, s+16, ... <= j
    #   (restart size - compressed size + 2 bytes of restart offset) + 2 (the restart count).
    p = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(e_shared, out=p[1:])
    extra = e_restart - e_shared + 2
    width = -(-n // RESTART_INTERVAL) * RESTART_INTERVAL
    padded = np.zeros(width, dtype=np.int64)
    padded[:n] = extra
    q = np.zeros(width + RESTART_INTERVAL, dtype=np.int64)  # q[t + 16]: extra[t] + extra[t-16] + ...
    q[RESTART_INTERVAL:] = np.cumsum(padded.reshape(-1, RESTART_INTERVAL), axis=0).reshape(-1)
    s = np.arange(n, dtype=np.int64)
    qs = q[s]
    ps = p[s]

    def size(j: np.ndarray, starts: np.ndarray, p_s: np.ndarray, q_s: np.ndarray) -> np.ndarray:
        last_restart = starts + ((j - starts) // RESTART_INTERVAL) * RESTART_INTERVAL
        return p[j + 1] - p_s + q[last_restart + RESTART_INTERVAL] - q_s + 2

    # Without the restart extras (all >= 0) the block would end at the last row whose
    # compressed entries fit: an upper bound, found for every start with one searchsorted;
    # walk down from it while the block with its restarts is too big.
    lo = np.maximum(np.searchsorted(p, ps + (block_size - 2), side="right") - 2, s)
    for _ in range(4):
        over = (size(lo, s, ps, qs) > block_size) & (lo > s)
        if not over.any():
            break
        lo -= over
    else:
        # Long shared prefixes make restarts costly: binary search between the start and the bound.
        rest = np.flatnonzero((size(lo, s, ps, qs) > block_size) & (lo > s))
        rs, rps, rqs = s[rest], ps[rest], qs[rest]
        rlo, rhi = rs.copy(), lo[rest]  # rlo fits (an empty block takes any row), rhi does not
        while True:
            active = rhi - rlo > 1
            if not active.any():
                break
            mid = (rlo + rhi) // 2
            fits = (size(mid, rs, rps, rqs) <= block_size) & active
            rlo = np.where(fits, mid, rlo)
            rhi = np.where(fits | ~active, rhi, mid)
        lo[rest] = rlo
    nxt = (lo + 1).tolist()
    starts = []
    i = 0
    while i < n:
        starts.append(i)
        i = nxt[i]
    return starts
