"""The scan's read-ahead (slatedb/lsm/scan.py ``SstSource.io_request``): each fetch takes as
many consecutive blocks as fit in ``SCAN_READ_BYTES``, forward from the current block or
backward to it, never past the planned range. A read-ahead one block short or long costs a
request per block or reads past the buffer; one off the end of the index raises."""

from __future__ import annotations

import pytest

from slatedb.lsm import scan
from slatedb.lsm.scan import SstSource
from slatedb.lsm.view import KeyBounds, SstHandle
from slatedb.format.sst import SstOptions, decode_layout
from slatedb.format.sst_reader import SstReader
from slatedb.format.sst_writer import write_sst
from slatedb.row import Row, RowKind
from slatedb.runtime import ulid_from_parts


def handle() -> SstHandle:
    rows = [Row(b"k%03d" % i, i + 1, RowKind.VALUE, b"v" * 100) for i in range(60)]
    encoded = write_sst(rows, SstOptions(block_size_bytes=512, min_filter_keys=0))
    layout = decode_layout(encoded.data, "compacted/x.sst")
    assert len(layout.index) >= 8  # several blocks to read ahead over
    sid = ulid_from_parts(1, 1)
    return SstHandle(sid, sid, SstReader(None, layout), KeyBounds())


def span(reader: SstReader, lo: int, hi: int) -> int:
    return reader.index.offsets[hi] - reader.index.offsets[lo]


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("blocks_per_read", [1, 3, 5])
def test_each_fetch_takes_as_many_blocks_as_fit_and_no_more(monkeypatch, reverse: bool, blocks_per_read: int):
    h = handle()
    offsets = h.reader.index.offsets
    n = len(h.reader.index)
    widest = max(offsets[k + blocks_per_read] - offsets[k] for k in range(n - blocks_per_read + 1))
    monkeypatch.setattr(scan, "SCAN_READ_BYTES", widest)
    src = SstSource([h], KeyBounds(), reverse)
    reader, lo, hi = src.io_request()
    assert reader is h.reader
    if reverse:
        assert hi == n  # the last block first
    else:
        assert lo == 0
    assert 1 <= hi - lo and span(reader, lo, hi) <= widest  # fits
    grown = (lo - 1, hi) if reverse else (lo, hi + 1)
    if 0 <= grown[0] and grown[1] <= n:
        assert span(reader, *grown) > widest  # and one more block would not


def test_a_reverse_fetch_reads_back_from_the_last_block_of_a_bounded_scan(monkeypatch):
    h = handle()
    monkeypatch.setattr(scan, "SCAN_READ_BYTES", 10**9)
    src = SstSource([h], KeyBounds(hi=b"k030", hi_inclusive=False), True)
    reader, lo, hi = src.io_request()
    last = h.reader.index.find_last_block(b"k030")
    assert (lo, hi) == (0, last + 1)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_a_range_ending_at_a_blocks_first_key_plans_that_block(monkeypatch, reverse: bool):
    """Finding 6 of the differential campaign (tests/checker/test_findings.py): a projection's
    view narrowed to one key that is its block's first key planned only the block before (the
    lower-bound search steps back on an exact match), so scans missed the key."""
    h = handle()
    monkeypatch.setattr(scan, "SCAN_READ_BYTES", 10**9)
    index = h.reader.index
    for i in range(1, len(index)):
        key = index.first_keys[i]
        for bounds in (KeyBounds(lo=key, hi=key, hi_inclusive=True), KeyBounds(hi=key, hi_inclusive=True)):
            _reader, lo, hi = SstSource([h], bounds, reverse).io_request()
            assert lo <= i < hi, (i, key, bounds, lo, hi)
