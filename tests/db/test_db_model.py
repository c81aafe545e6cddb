"""Hypothesis stateful test: the Db against a dict, through flushes, crashes and reopens.

The model is two dicts: what the database must show (every write applied), and what it must
keep across a crash (writes acknowledged durable). After a crash, every key must hold either its
durable value or a value written after that (an unacknowledged write may or may not survive,
but in order: never an older value than the durable one).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import slatedb
from slatedb.errors import InvalidArgumentError

from .helpers import compact_all_l0, memory_store

KEYS = st.sampled_from([b"k%02d" % i for i in range(24)])
VALUES = st.binary(min_size=0, max_size=60)
SETTINGS = {
    "l0_sst_size_bytes": 1024,
    "flush_interval": "1h",
    "manifest_poll_interval": "1h",
    "min_filter_keys": 4,
    "block_size_bytes": 256,
    "l0_max_ssts": 64,
}


class DbMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = memory_store()
        self.db = slatedb.Db.open("memory://model", SETTINGS, store=self.store)
        self.model: dict[bytes, bytes] = {}
        self.durable: dict[bytes, bytes] = {}  # the model at the last point everything was durable
        self.history: dict[bytes, list[bytes | None]] = {}  # values written since then, per key
        self.snap = None
        self.snap_model: dict[bytes, bytes] = {}

    def _record(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.model.pop(key, None)
        else:
            self.model[key] = value
        self.history.setdefault(key, [self.durable.get(key)]).append(value)

    def _all_durable(self) -> None:
        self.durable = dict(self.model)
        self.history = {}

    @rule(key=KEYS, value=VALUES)
    def put(self, key: bytes, value: bytes) -> None:
        self.db.put(key, value)
        self._record(key, value)

    @rule(key=KEYS)
    def delete(self, key: bytes) -> None:
        self.db.delete(key)
        self._record(key, None)

    @rule(items=st.lists(st.tuples(KEYS, st.none() | VALUES), min_size=1, max_size=8))
    def write_batch(self, items) -> None:
        batch = slatedb.WriteBatch()
        for key, value in items:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        for key, value in items:
            self._record(key, value)

    @rule()
    def flush_wal(self) -> None:
        self.db.flush()
        self._all_durable()

    @rule()
    def flush_memtable(self) -> None:
        self.db.flush(wal=False)
        self._all_durable()

    @rule()
    def compact(self) -> None:
        compact_all_l0(self.store)
        self.db.refresh_manifest()

    @rule()
    def take_snapshot(self) -> None:
        if self.snap is not None:
            self.snap.release()
        self.snap = self.db.snapshot()
        self.snap_model = dict(self.model)

    @precondition(lambda self: self.snap is not None)
    @rule()
    def check_snapshot(self) -> None:
        assert dict(self.snap.scan()) == self.snap_model

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = slatedb.Db.open("memory://model", SETTINGS, store=self.store)
        self.snap = None
        self._all_durable()

    @rule()
    def crash(self) -> None:
        self.db.abort()
        self.db = slatedb.Db.open("memory://model", SETTINGS, store=self.store)
        self.snap = None
        recovered = dict(self.db.scan())
        for key in {*self.durable, *self.history, *recovered}:
            # The durable value, or one written after it (unacknowledged writes may survive).
            allowed = self.history.get(key, [self.durable.get(key)])
            assert recovered.get(key) in allowed, (key, recovered.get(key), allowed)
        self.model = recovered
        self._all_durable()

    @rule(key=KEYS)
    def get(self, key: bytes) -> None:
        assert self.db.get(key) == self.model.get(key)

    @rule(start=KEYS, end=KEYS, reverse=st.booleans())
    def scan_range(self, start: bytes, end: bytes, reverse: bool) -> None:
        if start >= end:  # no key in [start, end): refused at the call, as the official does
            with pytest.raises(InvalidArgumentError):
                self.db.scan(start, end, reverse=reverse)
            return
        expected = sorted(((k, v) for k, v in self.model.items() if start <= k < end), reverse=reverse)
        assert list(self.db.scan(start, end, reverse=reverse)) == expected

    @invariant()
    def full_scan_matches(self) -> None:
        assert list(self.db.scan()) == sorted(self.model.items())

    def teardown(self) -> None:
        self.db.close()


TestDbModel = DbMachine.TestCase
TestDbModel.settings = settings(
    max_examples=40, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
