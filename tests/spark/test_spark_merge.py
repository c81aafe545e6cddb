"""Merge operands in distributed compaction (spec/protocols/merge.md MERGE-5, MERGE-6): the
operator reaches every Spark task (in the task's closure: a lambda works), which folds a key's
operands with its base as the in-process compactor does; without one, the operands are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

import slatedb
import slatedb.merge_operator
from slatedb.row import RowKind
from slatedb.spark.compaction import run_spark_compactor

from .test_spark_compaction import _run_rows, _settings, _submit_full

pytestmark = pytest.mark.xdist_group("spark")

WRITER = {"l0_sst_size_bytes": 4096, "compactor_options": None, "l0_max_ssts": 1000, "min_filter_keys": 1}


def _fill(url: str) -> dict[bytes, bytes]:
    expected: dict[bytes, bytes] = {}
    with slatedb.Db.open(url, settings=WRITER, merge_operator=lambda k, e, o: (e or b"") + o) as db:
        for i in range(300):
            db.put(b"k%04d" % i, b"base%d." % i + b"." * 20)
        db.flush(wal=False)
        for r in range(3):
            for i in range(0, 300, 3):
                db.merge(b"k%04d" % i, b"+%d" % r)
            db.flush(wal=False)
        for i in range(0, 300, 3):
            expected_value = db.get(b"k%04d" % i)
            assert expected_value is not None
        expected = dict(db.scan())
    return expected


@pytest.mark.parametrize("with_operator", [True, False])
def test_spark_tasks_fold_merge_operands_with_the_operator_and_keep_them_without_MERGE_5_MERGE_6(
        spark, tmp_path: Path, with_operator: bool) -> None:
    url = f"file://{tmp_path}"
    expected = _fill(url)
    assert expected[b"k0003"] == b"base3." + b"." * 20 + b"+0+1+2"
    trio.run(_submit_full, url)
    op = (lambda k, e, o: (e or b"") + o) if with_operator else None
    compactor = trio.run(lambda: run_spark_compactor(spark, url, _settings(subs=3), merge_operator=op))
    assert compactor.stats["completed"] >= 1, compactor.stats
    m, rows = _run_rows(url)
    assert not m.l0
    kinds = {int(RowKind.VALUE) if with_operator else int(RowKind.MERGE_OPERAND)}
    assert {kind for _run, key, _seq, kind, _v in rows if key == b"k0003"} >= kinds
    if with_operator:
        assert [(k, v) for _r, k, _s, _kind, v in rows if k == b"k0003"] == [(b"k0003", expected[b"k0003"])]
    with slatedb.Db.open(url, settings=WRITER, merge_operator=lambda k, e, o: (e or b"") + o) as db:
        assert dict(db.scan()) == expected


def test_a_dataframe_read_folds_operands_with_the_named_operator_MERGE_2_MERGE_8(spark, tmp_path: Path) -> None:
    """``option("merge_operator", "module:name")``: every task's reader folds (operands in L0 and
    in the WAL); without it an operand is an error naming the key; a name that does not load is
    refused where the DataFrame is defined."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, settings=WRITER, merge_operator=slatedb.merge_operator.concat) as db:
        db.put(b"a", b"A")
        db.merge(b"a", b"1")
        db.flush(wal=False)
        db.merge(b"a", b"2")
        db.merge(b"b", b"x", durable=True)
        db.put(b"c", b"C")
        want = dict(db.scan())
    assert want == {b"a": b"A12", b"b": b"x", b"c": b"C"}

    def read(**options):
        return spark.read.format("slatedb").options(url=url, **options).load()

    got = {bytes(r["key"]): bytes(r["value"]) for r in read(merge_operator="slatedb.merge_operator:concat").collect()}
    assert got == want
    with pytest.raises(Exception, match="merge operator"):
        read().collect()
    with pytest.raises(Exception, match="cannot be loaded"):
        read(merge_operator="slatedb.merge_operator:nope")
