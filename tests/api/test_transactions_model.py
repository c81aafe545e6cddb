"""Issue 22 item 3: a hypothesis stateful test of transactions against a model of SI and SSI.

The model keeps, per key, its committed value and the logical time of its last write. A
transaction remembers its start time, its reads (SSI, plus ``mark_read``), the ranges it scanned
(SSI) and its writes; its commit must conflict exactly when a checked key, or any key in a
scanned range (a phantom), was written after it began, and the database
must then hold exactly the model's values (a conflict writes nothing)."""

from __future__ import annotations

import tempfile

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import slatedb
from slatedb import IsolationLevel, TransactionConflictError

KEYS = st.sampled_from([b"a", b"b", b"c"])
VALUES = st.binary(min_size=0, max_size=3)


class TxnModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.db = slatedb.Db.open(f"file://{self._dir.name}", {"flush_interval": "1h", "compactor_options": None,
                                                              "garbage_collector_options": None})
        self.values: dict[bytes, bytes] = {}
        self.written_at: dict[bytes, int] = {}
        self.clock = 0
        self.txns: list[dict] = []

    def teardown(self) -> None:
        self.db.close()
        self._dir.cleanup()

    def _commit_model(self, writes: dict[bytes, bytes | None]) -> None:
        self.clock += 1
        for k, v in writes.items():
            if v is None:
                self.values.pop(k, None)
            else:
                self.values[k] = v
            self.written_at[k] = self.clock

    @rule(key=KEYS, value=VALUES)
    def plain_put(self, key, value) -> None:
        self.db.put(key, value)
        self._commit_model({key: value})

    @rule(key=KEYS)
    def plain_delete(self, key) -> None:
        self.db.delete(key)
        self._commit_model({key: None})

    @precondition(lambda self: len(self.txns) < 3)
    @rule(ssi=st.booleans())
    def begin(self, ssi) -> None:
        level = IsolationLevel.SERIALIZABLE_SNAPSHOT if ssi else IsolationLevel.SNAPSHOT
        self.txns.append({"t": self.db.begin(level), "ssi": ssi, "start": self.clock, "reads": set(),
                          "writes": {}, "unmarked": set(), "view": dict(self.values), "ranges": []})

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2), key=KEYS)
    def txn_get(self, i, key) -> None:
        m = self.txns[i % len(self.txns)]
        want = m["writes"][key] if key in m["writes"] else m["view"].get(key)
        assert m["t"].get(key) == want
        if m["ssi"]:
            m["reads"].add(key)

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2), lo=st.sampled_from([None, b"a", b"b", b"c"]), hi=st.sampled_from([None, b"b", b"c", b"d"]))
    def txn_scan(self, i, lo, hi) -> None:
        if lo is not None and hi is not None and lo >= hi:
            return  # refused at the call (tests/api/test_transactions.py)
        m = self.txns[i % len(self.txns)]
        seen = dict(m["view"])
        for k, v in m["writes"].items():
            seen.pop(k, None) if v is None else seen.__setitem__(k, v)
        want = sorted((k, v) for k, v in seen.items() if (lo is None or k >= lo) and (hi is None or k < hi))
        assert m["t"].scan(lo, hi) == want
        if m["ssi"]:
            m["reads"].update(k for k, _ in want)
            m["ranges"].append((lo, hi))

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2), key=KEYS)
    def txn_mark_read(self, i, key) -> None:
        m = self.txns[i % len(self.txns)]
        m["t"].mark_read([key])
        m["reads"].add(key)

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2), key=KEYS, value=st.one_of(st.none(), VALUES), unmark=st.booleans())
    def txn_write(self, i, key, value, unmark) -> None:
        m = self.txns[i % len(self.txns)]
        if value is None:
            m["t"].delete(key)
        else:
            m["t"].put(key, value)
        m["writes"][key] = value
        m["unmarked"].discard(key)
        if unmark:
            m["t"].unmark_write([key])
            m["unmarked"].add(key)

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2))
    def txn_commit(self, i) -> None:
        m = self.txns.pop(i % len(self.txns))
        checked = (set(m["writes"]) - m["unmarked"]) | m["reads"]
        # a transaction that wrote nothing is checked too, as the official one is (it writes nothing either way)
        conflict = any(self.written_at.get(k, -1) > m["start"] for k in checked) or any(
            at > m["start"] and (lo is None or k >= lo) and (hi is None or k < hi)
            for k, at in self.written_at.items() for lo, hi in m["ranges"])
        try:
            handle = m["t"].commit()
        except TransactionConflictError:
            assert conflict, "a conflict the model does not see"
            return
        assert not conflict, f"committed despite a conflict on {sorted(checked)}"
        assert (handle is None) == (not m["writes"])
        if m["writes"]:
            self._commit_model(m["writes"])

    @precondition(lambda self: self.txns)
    @rule(i=st.integers(0, 2))
    def txn_rollback(self, i) -> None:
        self.txns.pop(i % len(self.txns))["t"].rollback()

    @rule()
    def flush_to_l0(self) -> None:
        self.db.flush(wal=False)

    @invariant()
    def database_matches_model(self) -> None:
        assert dict(self.db.scan()) == self.values


TestTxnModel = TxnModel.TestCase
TestTxnModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
