"""TTLs and merge operands against a model, on a clock the test moves (spec/protocols/merge.md
MERGE-1, MERGE-2, MERGE-4, MERGE-5; compaction.md COMPACT-12).

Puts and merge operands with and without a TTL, deletes, the database's clock moved forward,
memtable flushes, full and L0-only compactions (with the operator, or without one), reopens and
a snapshot. After every step each key's ``get`` and ``get_key_value`` (value, seq, expiry), and
both scan orders, must equal the model: the key's versions newest first down to the first base,
expired operands skipped, an expired value a base of ``None``, operands folded oldest first onto
the base; the result carries the newest row's seq and the earliest expiry of the rows folded.
The snapshot reads its own versions at the current time.

The other model tests keep the real clock, so no row ever expires between two reads there: this
one is where expiry meets folding, compaction's expiry clock and the read layers.
"""

from __future__ import annotations

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import slatedb
from slatedb.runtime.production import ProductionRuntime

from .helpers import compact_all_l0, memory_store

KEYS = [b"k0", b"k1"]
TTLS_S = st.sampled_from([None, None, 1, 3])
SETTINGS = {"compactor_options": None, "garbage_collector_options": None, "l0_sst_size_bytes": 4096,
            "flush_interval": "1h", "manifest_poll_interval": "1h", "min_filter_keys": 1,
            "l0_max_ssts": 1000}
BASE_MS = 1_700_000_000_000


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand


class Clock:
    """The database's wall clock: ``BASE_MS`` plus what the test advanced."""

    def __init__(self) -> None:
        self.ms = BASE_MS


class ClockRuntime(ProductionRuntime):
    """Production in everything but ``now_ms`` (row timestamps, expiry, the L0 clock tick)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__("ttl-model")
        self.clock = clock

    def now_ms(self) -> int:
        return self.clock.ms


@attrs.frozen
class Version:
    seq: int
    kind: str  # "value", "tombstone", "merge"
    value: bytes
    expire_ts: int | None


def visible(versions: list[Version], max_seq: int, now_ms: int) -> tuple[bytes, int, int | None] | None:
    """(value, seq, expire_ts) a reader at ``max_seq`` sees at ``now_ms``, or None (MERGE-1, 4)."""
    live = [v for v in versions if v.seq <= max_seq]
    operands: list[Version] = []
    base: Version | None = None
    for v in sorted(live, key=lambda v: v.seq, reverse=True):
        expired = v.expire_ts is not None and v.expire_ts <= now_ms
        if v.kind == "merge":
            if not expired:
                operands.append(v)
            continue
        base = None if v.kind == "tombstone" or expired else v
        break
    if base is None and not operands:
        return None
    acc = base.value if base is not None else None
    folded = ([base] if base is not None else []) + operands[::-1]
    for op in operands[::-1]:
        acc = concat(b"", acc, op.value)
    expiries = [v.expire_ts for v in folded if v.expire_ts is not None]
    newest = max(folded, key=lambda v: v.seq)
    return acc, newest.seq, (min(expiries) if expiries else None)  # type: ignore[return-value]


class TtlMergeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.store = memory_store()
        self.clock = Clock()
        self.db = self._open()
        self.versions: dict[bytes, list[Version]] = {k: [] for k in KEYS}
        self.last_seq = 0
        self.snap = None
        self.snap_seq = 0

    def _open(self) -> slatedb.Db:
        return slatedb.Db.open("memory://ttl-model", SETTINGS, store=self.store, merge_operator=concat,
                               runtime=ClockRuntime(self.clock))

    def _expire(self, ttl_s: int | None) -> int | None:
        return None if ttl_s is None else self.clock.ms + ttl_s * 1000

    def _record(self, key: bytes, handle, kind: str, value: bytes, ttl_s: int | None) -> None:
        assert handle.seq > self.last_seq
        self.last_seq = handle.seq
        self.versions[key].append(Version(handle.seq, kind, value, self._expire(ttl_s)))

    @rule(key=st.sampled_from(KEYS), value=st.binary(min_size=0, max_size=3), ttl=TTLS_S)
    def put(self, key: bytes, value: bytes, ttl) -> None:
        self._record(key, self.db.put(key, value, ttl=ttl), "value", value, ttl)

    @rule(key=st.sampled_from(KEYS), operand=st.binary(min_size=1, max_size=2), ttl=TTLS_S)
    def merge(self, key: bytes, operand: bytes, ttl) -> None:
        self._record(key, self.db.merge(key, operand, ttl=ttl), "merge", operand, ttl)

    @rule(key=st.sampled_from(KEYS), value=st.binary(min_size=0, max_size=2), base_ttl=TTLS_S,
          operands=st.lists(st.tuples(st.binary(min_size=1, max_size=2), TTLS_S), min_size=1, max_size=3))
    def value_then_operands(self, key: bytes, value: bytes, base_ttl, operands) -> None:
        """The shape where expiry meets folding: a base and operands of one key, each with its own TTL."""
        self.put(key, value, base_ttl)
        for operand, ttl in operands:
            self.merge(key, operand, ttl)

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key: bytes) -> None:
        self._record(key, self.db.delete(key), "tombstone", b"", None)

    @rule(ms=st.sampled_from([400, 1000, 2500]))
    def advance(self, ms: int) -> None:
        self.clock.ms += ms

    @rule()
    def flush_memtable(self) -> None:
        self.db.flush(wal=False)

    @rule(mode=st.sampled_from(["operator", "no-operator", "l0-only"]))
    def compact(self, mode: str) -> None:
        self.db.flush(wal=False)  # the memtable's rows too, and the L0 clock tick (COMPACT-12)
        compact_all_l0(self.store, None if mode == "no-operator" else concat, l0_only=mode == "l0-only")
        self.db.refresh_manifest()

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = self._open()
        self.snap = None

    @rule()
    def take_snapshot(self) -> None:
        if self.snap is not None:
            self.snap.close()
        self.snap = self.db.snapshot()
        self.snap_seq = self.last_seq

    @precondition(lambda self: self.snap is not None)
    @rule()
    def check_snapshot(self) -> None:
        want = self._expected(self.snap_seq)
        assert {k: v[0] for k, v in want.items()} == dict(self.snap.scan()), self.clock.ms
        for key in KEYS:
            assert self.snap.get(key) == (want[key][0] if key in want else None), key

    @rule()
    def check_a_fresh_reader(self) -> None:
        """MERGE-2 on a ``DbReader``: after a WAL flush, a reader opened now (its checkpoint, the
        WAL replayed into its own memtable) reads what the writer reads, at the same time."""
        self.db.flush()
        want = self._expected(self.last_seq)
        with slatedb.DbReader.open("memory://ttl-model", store=self.store, merge_operator=concat,
                                   runtime=ClockRuntime(self.clock)) as reader:
            assert list(reader.scan()) == sorted((k, v[0]) for k, v in want.items()), self.clock.ms
            for key in KEYS:
                kv = reader.get_key_value(key)
                got = None if kv is None else (kv.value, kv.seq, kv.expire_ts)
                assert got == want.get(key), (key, kv, self.versions[key])

    def _expected(self, max_seq: int) -> dict[bytes, tuple[bytes, int, int | None]]:
        out = {}
        for key in KEYS:
            got = visible(self.versions[key], max_seq, self.clock.ms)
            if got is not None:
                out[key] = got
        return out

    @invariant()
    def reads_match_the_model(self) -> None:
        want = self._expected(self.last_seq)
        pairs = sorted((k, v[0]) for k, v in want.items())
        assert list(self.db.scan()) == pairs, (self.clock.ms, self.versions)
        assert list(self.db.scan(reverse=True)) == pairs[::-1]
        for key in KEYS:
            kv = self.db.get_key_value(key)
            if key not in want:
                assert kv is None and self.db.get(key) is None, (key, kv, self.versions[key])
                continue
            value, seq, expire_ts = want[key]
            assert self.db.get(key) == value, (key, self.versions[key])
            assert (kv.value, kv.seq, kv.expire_ts) == (value, seq, expire_ts), (key, kv, self.versions[key])

    def teardown(self) -> None:
        if self.snap is not None:
            self.snap.close()
        self.db.close()


TestTtlMergeModel = TtlMergeMachine.TestCase
TestTtlMergeModel.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
