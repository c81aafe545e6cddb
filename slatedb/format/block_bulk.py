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
    """Rows as columns: what :func:`encode_blocks` reads. ``seqs`` (uint64), ``kinds`` (uint8:
    :class:`~slatedb.row.RowKind` values) and ``vlen`` are arrays; ``cpl[j]`` is the prefix key
    ``j`` shares with key ``j - 1``; ``has_exp``/``expires`` and ``has_create``/``creates``
    (bool, int64; 0 where absent) the timestamps."""

    keys: list[bytes]
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
        if len(self.keys) < 2:
            return True
        order = self.km.ascending(self.cpl)
        if (order < 0).any():
            return False
        same = np.flatnonzero(order == 0)
        return not len(same) or not (self.seqs[same + 1] >= self.seqs[same]).any()


def varint_lengths(x: np.ndarray) -> np.ndarray:
    """LEB128 sizes of ``x`` (values below 2**35)."""
    return 1 + (x >= 1 << 7) + (x >= 1 << 14) + (x >= 1 << 21) + (x >= 1 << 28)


def _varint_matrix(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(``rows x w`` LEB128 bytes of ``x``, each value's length): ``w`` is the longest length."""
    lens = varint_lengths(x)
    w = int(lens.max()) if len(x) else 1
    if w == 1:
        return x.astype(np.uint8)[:, None], lens
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
    keys, km, cpl, seqs, kinds = cols.keys, cols.km, cols.cpl, cols.seqs, cols.kinds
    values, vlen = cols.values, cols.vlen
    has_exp, expires, has_create, creates = cols.has_exp, cols.expires, cols.has_create, cols.creates
    n = len(keys)
    klen = km.lengths
    tail_len = 9 + 8 * has_exp.astype(np.int64) + 8 * has_create.astype(np.int64)
    vl_v = varint_lengths(vlen)
    # Entry sizes as a restart (shared = 0) and prefix-compressed (shared = cpl).
    e_restart = 1 + varint_lengths(klen) + vl_v + klen + vlen + tail_len
    e_shared = varint_lengths(cpl) + varint_lengths(klen - cpl) + vl_v + (klen - cpl) + vlen + tail_len

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

    # Each row's "glue": the previous row's tail (unless the row opens a block), the header and
    # the key suffix; the value follows it. A block ends with its last row's tail and restarts.
    # The glue of every row is one row of a matrix of fixed-width fields, each with its used
    # length; one boolean mask over it extracts every row's glue, concatenated in row order.
    tails, tail_width = _tails(seqs, kinds, has_exp, has_create, expires, creates, m)
    prev_tail = np.zeros(m, dtype=np.int64)
    prev_tail[1:] = tail_len[:-1]
    prev_tail[is_start] = 0
    prev_tails = np.empty_like(tails)
    prev_tails[1:] = tails[:-1]
    fields = [prev_tails]
    # The masks compare in the narrowest integer type that holds the widths (uint8 for every
    # field but a key of 256 bytes or more): numpy's broadcast compare of int64 costs ~2x.
    masks = [_U8_RANGE[:tail_width] < prev_tail.astype(np.uint8)[:, None]]
    hdr_total = np.zeros(m, dtype=np.int64)
    for x in (shared, unshared, vlen):
        mat, lens = _varint_matrix(x)
        fields.append(mat)
        masks.append(_U8_RANGE[: mat.shape[1]] < lens.astype(np.uint8)[:, None])
        hdr_total += lens
    width = km.padded.shape[1]
    key_dtype = np.uint8 if width < 256 else np.int64
    cols = np.arange(width, dtype=key_dtype)
    fields.append(km.padded[:m])
    masks.append((cols >= shared.astype(key_dtype)[:, None]) & (cols < klen.astype(key_dtype)[:, None]))
    glue = np.concatenate(fields, axis=1)[np.concatenate(masks, axis=1)]
    glue_len = prev_tail + hdr_total + unshared

    # Restart offsets, in u16 BE, block after block.
    entry_pos = _excl_cumsum(entry)
    restart_rows = np.flatnonzero(restart)
    offsets = entry_pos[restart_rows] - entry_pos[start_arr[block_of[restart_rows]]]
    assert not len(offsets) or int(offsets.max()) <= 0xFFFF, "restart offset must fit in u16"
    offsets = offsets.astype(">u2").tobytes()
    restarts_per_block = np.bincount(block_of[restart_rows], minlength=used_blocks)
    restart_first = _excl_cumsum(restarts_per_block).tolist()
    restarts_per_block = restarts_per_block.tolist()

    pieces: list = [None] * (2 * m)
    pieces[0::2] = _split(glue, glue_len)
    pieces[1::2] = values[:m]
    tail_lens = tail_len.tolist()
    tail_bytes = tails.tobytes()

    is_put = (kinds == 0).astype(np.int64)
    is_del = (kinds == 1).astype(np.int64)
    puts = np.add.reduceat(is_put, start_arr)
    dels = np.add.reduceat(is_del, start_arr)
    merges = (np.asarray(block_ends, dtype=np.int64) - start_arr - puts - dels).tolist()
    # Each block's trailer (its last row's tail, the restart offsets, their count) goes in front
    # of the next block's first glue, the last one at the end: then one join makes every block,
    # back to back, and each block is a slice of it (no per-block join of its rows' pieces).
    trailers = []
    for b, (r0, count, last) in enumerate(zip(restart_first, restarts_per_block, block_ends)):
        last -= 1
        trailers.append(tail_bytes[last * tail_width : last * tail_width + tail_lens[last]]
                        + offsets[2 * r0 : 2 * (r0 + count)] + count.to_bytes(2, "big"))
    for s, trailer in zip(block_starts[1:], trailers):
        pieces[2 * s] = trailer + pieces[2 * s]
    pieces.append(trailers[-1])
    blocks = b"".join(pieces)
    block_bytes = (np.add.reduceat(entry, start_arr) + 2 * np.asarray(restarts_per_block, dtype=np.int64) + 2)
    ends = np.cumsum(block_bytes).tolist()
    assert ends[-1] == len(blocks), "block sizes disagree with the bytes"
    framed, framed_sizes = frame_slices(codec, blocks, ends)
    return EncodedBlocks(framed, framed_sizes, list(block_starts), list(block_ends), puts.tolist(), dels.tolist(),
                         merges, m)


#: ``b"%ds" % n`` for the usual glue lengths: a row's glue is a struct field of its length.
_FIELD_FORMATS = [b"%ds" % n for n in range(256)]
_U8_RANGE = np.arange(256, dtype=np.uint8)


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


def _tails(seqs, kinds, has_exp, has_create, expires, creates, m: int) -> tuple[np.ndarray, int]:
    """(``rows x w`` row tails: seq u64 BE, flags, [expire i64 BE], [create i64 BE]; ``w``)."""
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
