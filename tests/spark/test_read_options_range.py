"""The Spark reader's key bounds agree with ``Db.scan``: ``start == end`` (an empty range, the
end being exclusive) is an ``InvalidArgumentError`` naming the options, as ``start > end`` is;
found: the reader returned 0 rows where ``Db.scan`` refuses the range. No Spark session: the
options are parsed by the driver before any task (test_spark_source.py shows it through Spark)."""

from __future__ import annotations

import pytest

import slatedb
from slatedb.errors import InvalidArgumentError
from slatedb.spark.options import parse_options


@pytest.mark.parametrize("bounds", [{"start": "k1", "end": "k1"}, {"start_hex": "6b31", "end": "k1"},
                                    {"start": "k1", "end_hex": "6b31"}, {"start": "", "end": ""}])
def test_an_empty_key_range_is_refused_as_db_scan_refuses_it(bounds) -> None:
    with pytest.raises(InvalidArgumentError, match="range is empty: option 'start' equals 'end'"):
        parse_options({"url": "memory://x", **bounds})
    with slatedb.Db.open("memory://spark-empty-range") as db:
        lo = bytes.fromhex(bounds["start_hex"]) if "start_hex" in bounds else bounds["start"].encode()
        with pytest.raises(InvalidArgumentError, match="empty"):
            db.scan(lo, lo)


def test_a_range_of_one_key_and_an_open_side_still_read() -> None:
    assert parse_options({"url": "memory://x", "start": "k1", "end": "k1\x00"}).bounds.lo == b"k1"
    assert parse_options({"url": "memory://x", "start": "k1"}).bounds.hi is None
