"""Columns kept from the WAL encodes of a memtable's rows for its L0 encode.

A bulk load puts keys ascending, one version each: the frozen memtable's sorted rows are then
its rows in seq order, the order the WAL flushes encoded them in, and the columns the WAL SSTs'
bulk encodes extracted (:func:`slatedb.format.wal_sst.encode_wal_sst_fast` with ``keep``) are
those the L0 encode needs (:meth:`slatedb.format.sst_writer.SstWriter.add_sorted` with
``kept``): extracted once, not twice. Same bytes either way (``tests/format/test_kept_columns.py``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from operator import itemgetter

import attrs
import numpy as np

from slatedb.format.block_bulk import MAX_KEY_MATRIX_BYTES, Columns, KeyMatrix
from slatedb.row import Row

_VALUE = itemgetter(3)  # Row's field


@attrs.frozen
class ColumnsPart:
    """The numeric columns of rows ``first_seq ..`` (consecutive seqs, in seq order) that a WAL
    SST's encode extracted, kept for the L0 encode of the same rows (:class:`KeptColumns`):
    keys as a matrix and lengths, value lengths, seqs, and the kinds and timestamps unless
    every row has the same (None: every kind a value, no expiry, a create time on each row).
    About 21 bytes a row plus the longest key (no lists: the L0 encode takes the keys and
    values from its rows)."""

    first_seq: int
    padded: np.ndarray
    klen: np.ndarray  # uint32
    vlen: np.ndarray  # uint32
    seqs: np.ndarray
    kinds: np.ndarray | None
    expires: tuple[np.ndarray, np.ndarray] | None  # (has_exp, expires)
    creates: np.ndarray
    has_create: np.ndarray | None

    @classmethod
    def of(cls, cols: Columns, n: int) -> ColumnsPart:
        """The first ``n`` rows of ``cols`` (views: the chunk's arrays stay alive)."""
        kinds = cols.kinds[:n]
        has_exp, has_create = cols.has_exp[:n], cols.has_create[:n]
        return cls(int(cols.seqs[0]), cols.km.padded[:n], cols.km.lengths[:n].astype(np.uint32),
                   cols.vlen[:n].astype(np.uint32), cols.seqs[:n], kinds if kinds.any() else None,
                   (has_exp, cols.expires[:n]) if has_exp.any() else None, cols.creates[:n],
                   None if has_create.all() else has_create)

    def __len__(self) -> int:
        return len(self.seqs)


class KeptColumns:
    """Columns for the L0 encode of a frozen memtable, from the :class:`ColumnsPart` its WAL
    SSTs' encodes kept (``parts``, in seq order), when the memtable's sorted rows are its rows
    in seq order (keys arrived ascending, one version each: a bulk load) and the seqs
    consecutive: row ``i`` of ``rows`` is then the row of seq ``rows[0][1] + i``.
    :meth:`columns` gives the columns of a range of ``rows`` when the parts cover it (else
    None: the caller extracts them, :meth:`Columns.of`); the prefixes with the previous key are
    computed here (a WAL SST has none)."""

    def __init__(self, rows: Sequence[Row], parts: Sequence[ColumnsPart]) -> None:
        self._rows = rows
        self._base = rows[0][1] if rows else 0
        self._parts = list(parts)
        self._starts = [p.first_seq for p in self._parts]

    def columns(self, lo: int, hi: int, part_rows: Sequence[Row]) -> Columns | None:
        """The columns of ``part_rows``, which are ``rows[lo:hi]``, or None when no run of parts
        covers them."""
        rows = self._rows
        first, last = self._base + lo, self._base + hi - 1
        if (hi <= lo or lo < 0 or hi > len(rows) or len(part_rows) != hi - lo or part_rows[0] is not rows[lo]
                or part_rows[-1] is not rows[hi - 1] or rows[lo][1] != first or rows[hi - 1][1] != last):
            return None
        i = bisect.bisect_right(self._starts, first) - 1
        pieces: list[tuple[ColumnsPart, int, int]] = []
        seq = first
        while seq <= last:
            if i < 0 or i >= len(self._parts):
                return None
            part = self._parts[i]
            a = seq - part.first_seq
            if a < 0 or a >= len(part):
                return None
            b = min(len(part), last + 1 - part.first_seq)
            pieces.append((part, a, b))
            seq = part.first_seq + b
            i += 1
        n = hi - lo
        width = max(p.padded.shape[1] for p, _, _ in pieces)
        if n * width > MAX_KEY_MATRIX_BYTES and n > 1:
            return None
        if len(pieces) == 1 and pieces[0][0].padded.shape[1] == width:
            (p, a, b), = pieces
            padded = p.padded[a:b]
        else:
            padded = np.zeros((n, width), dtype=np.uint8)
            at = 0
            for p, a, b in pieces:
                padded[at : at + b - a, : p.padded.shape[1]] = p.padded[a:b]
                at += b - a

        def cat(get, absent=None) -> np.ndarray:
            """A column over the pieces; ``absent(k)``: its k values in a part that left it out."""
            arrays = [get(p)[a:b] if get(p) is not None else absent(b - a) for p, a, b in pieces]
            return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)

        seqs = cat(lambda p: p.seqs)
        if int(seqs[0]) != first or int(seqs[-1]) != last or int(seqs[n // 2]) != rows[lo + n // 2][1]:
            return None  # not the rows the parts were taken from
        klen = cat(lambda p: p.klen).astype(np.int64)
        vlen = cat(lambda p: p.vlen).astype(np.int64)
        kinds = cat(lambda p: p.kinds, lambda k: np.zeros(k, dtype=np.uint8))
        has_exp = cat(lambda p: p.expires and p.expires[0], lambda k: np.zeros(k, dtype=bool))
        expires = cat(lambda p: p.expires and p.expires[1], lambda k: np.zeros(k, dtype=np.int64))
        creates = cat(lambda p: p.creates)
        has_create = cat(lambda p: p.has_create, lambda k: np.ones(k, dtype=bool))
        km = KeyMatrix(klen, padded)
        return Columns(None, km, km.prefix_with_previous(), seqs, kinds,
                       list(map(_VALUE, part_rows)), vlen, has_exp, expires, has_create, creates)
