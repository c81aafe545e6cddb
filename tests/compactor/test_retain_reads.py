"""Retention against the read rule (merge.md MERGE-5, compaction.md step 6): for one key's
versions -- values, tombstones and merge operands, with and without TTLs -- and older versions
in a run below the compaction (when it is not the bottom), the versions ``retain`` keeps answer
every read a compaction must preserve exactly as the inputs did: at every snapshot at or above
the retention floor ``M`` and every read time at or after the compaction's expiry clock, the
same value, seq and expiry (``resolve_versions``, what ``get``/``get_key_value`` return)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slatedb.compactor.executor import retain
from slatedb.merge import resolve_versions
from slatedb.row import Row, RowKind

V, T, OP = RowKind.VALUE, RowKind.TOMBSTONE, RowKind.MERGE_OPERAND
KINDS = st.sampled_from([V, T, OP, OP])
EXPIRES = st.sampled_from([None, None, 5, 10, 15])


def concat(key: bytes, existing: bytes | None, operand: bytes) -> bytes:
    return (existing or b"") + operand  # associative, as partial merges assume (MERGE-5)


@st.composite
def histories(draw) -> tuple[list[Row], list[Row], int]:
    """(the compaction's versions, the older versions below it, the next seq), newest first."""
    seq = 1
    below: list[Row] = []
    rows: list[Row] = []
    for out, n in ((below, draw(st.integers(0, 3))), (rows, draw(st.integers(1, 7)))):
        for _ in range(n):
            kind = draw(KINDS)
            out.insert(0, Row(b"k", seq, kind, b"" if kind is T else b"%d." % seq, None if kind is T else draw(EXPIRES)))
            seq += 1
    return rows, below, seq


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(0, 12), st.booleans(), st.sampled_from([0, 5, 10, 12]), st.booleans())
def test_retained_versions_answer_every_read_at_or_above_the_floor_as_the_inputs_did(
        history, M: int, bottom: bool, now: int, with_operator: bool) -> None:
    rows, below, top = history
    if bottom:
        below = []  # nothing older than the bottom run
    kept = retain(rows, M, bottom, now, concat if with_operator else None)
    assert [r.seq for r in kept] == sorted({r.seq for r in kept}, reverse=True)
    for snapshot in range(M, top + 1):
        for t in sorted({now, now + 3, 10, 14, 20}):
            if t < now:
                continue
            want = resolve_versions(rows + below, concat, t, snapshot)
            got = resolve_versions(kept + below, concat, t, snapshot)
            assert (got and (got.value, got.seq, got.expire_ts_ms)) == (want and (want.value, want.seq, want.expire_ts_ms)), \
                (snapshot, t, kept)
