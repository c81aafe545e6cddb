"""The manifest's sequence tracker (RFC 0012; slatedb/format/seq_tracker.py): the codec, the
lookups' rounding, and our writer recording one entry per L0 flush at most once a minute
(interop with the official wheel: tests/interop/test_seq_tracker_interop.py)."""

from __future__ import annotations

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import CorruptionError
from slatedb.format import seq_tracker as st
from slatedb.objstore.local import LocalStore
from slatedb.runtime.production import ProductionRuntime

S = {"compactor_options": None, "garbage_collector_options": None, "flush_interval": "1h"}


def test_codec_round_trips_every_delta_of_delta_width() -> None:
    t = st.SequenceTracker((1, 1, 5, 9, 100, 400, 3000, 5_000_000), (60, 60, 120, 181, 3000, 3100, 9000, 90_000))
    assert st.decode(t.encode(), "m") == t
    assert st.decode(None, "m") == st.SequenceTracker() == st.decode(b"", "m")
    # one entry: version 1, count 1, then each stream: 32-bit count and a 64-bit first value
    one = st.SequenceTracker((7,), (1_700_000_000,)).encode()
    assert one == bytes([1]) + (1).to_bytes(4, "little") + (1).to_bytes(4, "big") + (7).to_bytes(8, "big") \
        + (1).to_bytes(4, "big") + (1_700_000_000).to_bytes(8, "big")


def test_lookups_round_up_and_down() -> None:
    t = st.SequenceTracker((10, 20, 30), (100, 200, 300))
    assert [t.find_seq(x, False) for x in (99, 100, 150, 300, 301)] == [None, 10, 10, 30, 30]
    assert [t.find_seq(x, True) for x in (99, 100, 150, 300, 301)] == [10, 10, 20, 30, None]
    assert [t.find_ts(x, False) for x in (9, 10, 25, 31)] == [None, 100, 200, 300]
    assert [t.find_ts(x, True) for x in (9, 10, 25, 31)] == [100, 100, 300, None]
    assert st.SequenceTracker().find_seq(5, True) is None


def test_insert_keeps_one_entry_a_minute_and_halves_past_capacity() -> None:
    t = st.SequenceTracker()
    t = t.insert(1, 1000, None)
    assert t.insert(2, 1059, 1000) is t and len(t.insert(2, 1060, 1000)) == 2
    full = st.SequenceTracker(tuple(range(4)), tuple(range(0, 240, 60)))
    assert full.insert(9, 1000, 180, capacity=4) == st.SequenceTracker((0, 2, 9), (0, 120, 1000))


@pytest.mark.parametrize("bad", [b"\x02\x00\x00\x00\x00", b"\x01\x00", b"\x01\x02\x00\x00\x00\xff"])
def test_corrupt_bytes_raise_naming_the_object(bad) -> None:
    with pytest.raises(CorruptionError, match="sequence_tracker") as e:
        st.decode(bad, "manifest/00000000000000000007.manifest")
    assert e.value.object_name == "manifest/00000000000000000007.manifest"


class Shifted(ProductionRuntime):
    def __init__(self) -> None:
        super().__init__("shifted")
        self.offset_ms = 0

    def now_ms(self) -> int:
        return super().now_ms() + self.offset_ms


def test_our_writer_records_the_first_write_of_each_flushed_table(tmp_path) -> None:
    rt = Shifted()
    store = LocalStore(str(tmp_path))

    def tracker():
        return trio.run(admin.sequence_tracker, store)

    with slatedb.Db.open(f"file://{tmp_path}", S, runtime=lambda: rt) as db:
        t0 = rt.now_ms() // 1000
        first = db.put(b"a", b"1").seq
        db.put(b"b", b"2")
        db.flush(wal=False)
        assert tracker().seqs == (first,) and tracker().timestamps_s[0] in (t0, t0 + 1)
        second = db.put(b"c", b"3").seq  # within the minute: not recorded
        db.flush(wal=False)
        assert len(tracker()) == 1
        rt.offset_ms = 120_000
        third = db.put(b"d", b"4").seq
        db.flush(wal=False)
        t = tracker()
        assert t.seqs == (first, third) and t.timestamps_s[1] - t.timestamps_s[0] >= 120
        assert trio.run(admin.get_sequence_for_timestamp, store, t.timestamps_s[1] - 1, False) == first
        assert trio.run(admin.get_sequence_for_timestamp, store, t.timestamps_s[1] - 1, True) == third
        assert trio.run(admin.get_timestamp_for_sequence, store, second, True) == t.timestamps_s[1]


def test_order_and_successor_problems_name_what_is_wrong() -> None:
    """TRACK-1/TRACK-2's pure rules (slatedb check and the simulator's manifest check use them),
    fed good and bad trackers."""
    from slatedb.format.seq_tracker import SequenceTracker, order_problem, successor_problem

    t = SequenceTracker((1, 5, 9), (100, 160, 220))
    assert order_problem(t, 9) is None and order_problem(SequenceTracker(), 0) is None
    assert "above last_l0_seq" in order_problem(t, 8)
    assert "below pair 1" in order_problem(SequenceTracker((1, 5, 4), (100, 160, 220)), 9)
    assert "below pair 0" in order_problem(SequenceTracker((1, 5), (160, 100)), 9)
    assert successor_problem(SequenceTracker(), t) is None
    assert successor_problem(t, t) is None
    assert successor_problem(t, SequenceTracker((1, 5, 9, 12), (100, 160, 220, 280))) is None
    assert "pairs are gone" in successor_problem(t, SequenceTracker((12,), (280,)))
    assert "pairs are gone" in successor_problem(t, SequenceTracker((1, 9), (100, 220)))  # a middle pair lost
    # halving past the capacity keeps every other pair, the oldest first
    big = SequenceTracker(tuple(range(8)), tuple(100 + 60 * i for i in range(8)))
    halved = big.insert(8, 100 + 60 * 8, 100 + 60 * 7, capacity=8)
    assert len(halved) < len(big) and successor_problem(big, halved, capacity=8) is None
    assert "pairs are gone" in successor_problem(big, halved)  # far below the default capacity: a loss
    assert "pairs are gone" in successor_problem(big, SequenceTracker(big.seqs[1::2], big.timestamps_s[1::2]), capacity=8)
