"""The L0 encode of a memtable reuses the columns its WAL SSTs' encodes extracted
(:class:`~slatedb.format.kept_columns.KeptColumns`), and writes the same bytes as without them:

* for rows in seq order and key order (a bulk load), split into WAL flushes of any sizes, with
  tombstones, merges, expiries, create times or none, keys of mixed widths, and L0 chunks of
  any size (the carried open block included);
* with gaps (a WAL flush the row loop encoded keeps nothing), with parts of other rows, and with
  chunks out of step, it gives no columns and the writer extracts them itself;
* in a database, the close's L0 flush of a loaded memtable takes them (``Columns.of`` is not
  called for its rows) and the SST is the one the writer makes without them.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.format import block_bulk
from slatedb.format.kept_columns import ColumnsPart, KeptColumns
from slatedb.format.sst import SstOptions
from slatedb.format.sst_writer import SstWriter
from slatedb.format.wal_sst import BULK_MIN_ROWS, encode_wal_sst_fast


def _load(n: int, kinds, widths, expire: bool, create: bool, first_seq: int = 100) -> list[tuple]:
    """Plain rows in key order and seq order: key widths cycle through ``widths``."""
    rows = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        key = b"k%06d" % i + b"-" * widths[i % len(widths)]
        value = b"" if kind == 1 else b"v%d" % (i * 7919 % 1000) * (1 + i % 3)
        rows.append((key, first_seq + i, kind, value, 10**12 + i if expire and i % 2 else None,
                     1_700_000_000_000 + i // 5 if create else None))
    return rows


def _l0(rows, options, chunk, kept=None) -> bytes:
    writer = SstWriter(options)
    for i in range(0, len(rows), chunk):
        writer.add_sorted(rows[i : i + chunk], kept, i)
    return writer.finish().data


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 1500),
    flushes=st.lists(st.integers(1, 900), max_size=5),
    chunk=st.sampled_from([1, 7, 100, 256, 8192]),
    kinds=st.sampled_from([(0,), (0, 1), (0, 2, 0), (1,)]),
    widths=st.sampled_from([(10,), (10, 12), (3, 40)]),
    expire=st.booleans(),
    create=st.booleans(),
    block=st.sampled_from([128, 4096]),
)
def test_l0_with_kept_columns_writes_the_same_bytes(n, flushes, chunk, kinds, widths, expire, create, block) -> None:
    rows = _load(n, kinds, widths, expire, create)
    options = SstOptions(block_size_bytes=block, min_filter_keys=0)
    parts: list[ColumnsPart] = []
    at = 0
    for size in [*flushes, n]:
        if at >= n:
            break
        encode_wal_sst_fast(rows[at : at + size], options, parts)
        at += size
    kept = KeptColumns(rows, parts)
    assert _l0(rows, options, chunk, kept) == _l0(rows, options, chunk)


def test_kept_columns_cover_only_what_the_wal_encodes_kept() -> None:
    rows = _load(3000, (0,), (10,), False, True)
    parts: list[ColumnsPart] = []
    encode_wal_sst_fast(rows[:1000], keep=parts)
    encode_wal_sst_fast(rows[1000:1000 + BULK_MIN_ROWS - 1], keep=parts)  # the row loop: keeps nothing
    encode_wal_sst_fast(rows[1000 + BULK_MIN_ROWS - 1 :], keep=parts)
    assert sum(map(len, parts)) == 3000 - (BULK_MIN_ROWS - 1)
    kept = KeptColumns(rows, parts)
    assert kept.columns(0, 1000, rows[:1000]) is not None
    assert kept.columns(900, 1100, rows[900:1100]) is None  # the gap
    assert kept.columns(2000, 3000, rows[2000:3000]) is not None
    assert kept.columns(10, 20, rows[11:21]) is None  # not the rows it names
    other = [(k, s + 1, *rest) for k, s, *rest in rows]  # the same keys, other seqs
    assert KeptColumns(other, parts).columns(0, 1000, other[:1000]) is None


def test_the_writer_checks_the_carried_rows_belong_to_the_kept_columns(monkeypatch) -> None:
    rows = _load(2000, (0,), (10,), False, True)
    parts: list[ColumnsPart] = []
    encode_wal_sst_fast(rows, keep=parts)
    kept = KeptColumns(rows, parts)
    options = SstOptions(min_filter_keys=0)
    asked = []
    real = KeptColumns.columns
    monkeypatch.setattr(KeptColumns, "columns", lambda self, lo, hi, r: asked.append((lo, hi)) or real(self, lo, hi, r))
    writer = SstWriter(options)
    writer.add_sorted(rows[:700], kept, 0)
    writer.add_sorted(rows[700:1000])  # no kept columns: the next call's carried rows are these
    writer.add_sorted(rows[1000:], kept, 1000)
    assert writer.finish().data == _l0(rows, options, 2000)
    # The third call extracted its own columns (its carried rows are not the kept ones); the
    # rows it left open for finish are, and finish takes their columns from them.
    assert asked[0] == (0, 700) and len(asked) == 2 and 1000 < asked[1][0] < asked[1][1] == 2000, asked


def test_a_database_close_reuses_the_wal_columns(tmp_path, monkeypatch) -> None:
    import slatedb

    extracted = []
    real = block_bulk.Columns.of.__func__
    monkeypatch.setattr(block_bulk.Columns, "of", classmethod(
        lambda cls, rows, **kw: extracted.append((len(rows), kw.get("shared_prefixes", True))) or real(cls, rows, **kw)))
    made = []
    real_finish = SstWriter.finish
    monkeypatch.setattr(SstWriter, "finish", lambda self: made.append(real_finish(self)) or made[-1])
    # No timer flush: on a loaded machine the 100 ms default cut the puts into a third WAL SST,
    # which may hold fewer rows than the bulk encoder takes (its rows' columns then not kept).
    db = slatedb.Db.open(f"file://{tmp_path}/db", settings={"flush_interval": "1h"})
    rows = [(b"key%06d" % i, b"value %d" % i) for i in range(5000)]
    for key, value in rows[:3000]:
        db.put(key, value)
    db.flush()  # a WAL SST of the first 3,000 rows
    for key, value in rows[3000:]:
        db.put(key, value)
    db.close()  # the WAL SST of the rest, then the L0 SST of all 5,000
    assert [shared for _, shared in extracted].count(True) == 0, extracted  # the L0 encode extracted nothing
    assert sum(n for n, shared in extracted if not shared) >= 5000
    (sst,) = made
    assert sst.num_rows == 5000
    db = slatedb.Db.open(f"file://{tmp_path}/db")
    try:
        assert [db.get(k) for k, _ in rows[::97]] == [v for _, v in rows[::97]]
    finally:
        db.close()
