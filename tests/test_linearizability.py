"""The linearizability checker (``sim/checks/linearizability.py``) on hand-written histories, against a
brute-force oracle, and on histories generated from sequential executions."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.checks.linearizability import PENDING, Op, check_history, is_linearizable, minimal_window

K = b"k"


def put(p: str, value: bytes, call: float, ret: float = PENDING, key: bytes = K) -> Op:
    return Op(p, "put", key, value, call, ret)


def delete(p: str, call: float, ret: float = PENDING, key: bytes = K) -> Op:
    return Op(p, "delete", key, None, call, ret)


def get(p: str, seen: bytes | None, call: float, ret: float, key: bytes = K) -> Op:
    return Op(p, "get", key, seen, call, ret)


# ---------------------------------------------------------------------------------------------
# Linearizable histories
# ---------------------------------------------------------------------------------------------


def test_sequential_history_is_linearizable() -> None:
    h = [put("a", b"1", 0, 1), get("b", b"1", 2, 3), delete("a", 4, 5), get("b", None, 6, 7),
         put("a", b"2", 8, 9), get("b", b"2", 10, 11)]
    result = check_history(h)
    assert result.ok and result.keys == 1 and result.ops == 6 and result.witness is None
    assert result.describe() == ""


def test_empty_history_and_reads_of_a_never_written_key() -> None:
    assert is_linearizable([])
    assert is_linearizable([get("a", None, 0, 1), get("b", None, 0.5, 2)])


def test_a_read_concurrent_with_a_put_may_see_either_value() -> None:
    for seen in (None, b"1"):
        assert is_linearizable([put("a", b"1", 0, 10), get("b", seen, 2, 3)])


def test_overlapping_puts_may_take_effect_in_either_order() -> None:
    # Both puts overlap; readers after both agree on the winner, whichever it is.
    for last in (b"1", b"2"):
        h = [put("a", b"1", 0, 10), put("b", b"2", 1, 9), get("c", last, 11, 12), get("d", last, 13, 14)]
        assert is_linearizable(h)
    # A reader inside the overlap may see the loser first, then the winner.
    h = [put("a", b"1", 0, 10), put("b", b"2", 1, 10), get("c", b"1", 2, 3), get("c", b"2", 4, 5),
         get("d", b"2", 11, 12)]
    assert is_linearizable(h)


def test_equal_stamps_count_as_concurrent() -> None:
    assert is_linearizable([put("a", b"1", 0, 5), get("b", None, 5, 6)])


def test_pending_writes_may_take_effect_late_or_never() -> None:
    # Never observed: as if it never happened.
    assert is_linearizable([put("a", b"1", 0), get("b", None, 5, 6), get("b", None, 7, 8)])
    # Observed long after its call (it took effect late), and from then on.
    assert is_linearizable([put("a", b"1", 0), get("b", None, 5, 6), get("b", b"1", 7, 8), get("c", b"1", 9, 10)])
    # A pending delete of a durable put, observed by a later read.
    assert is_linearizable([put("a", b"1", 0, 1), delete("a", 2), get("b", b"1", 3, 4), get("b", None, 5, 6)])
    # A pending put overtaken by a completed one: either order.
    assert is_linearizable([put("a", b"1", 0), put("b", b"2", 5, 6), get("c", b"1", 7, 8)])
    # Pending gets carry no observation.
    assert is_linearizable([put("a", b"1", 0, 1), Op("b", "get", K, b"junk", 2, PENDING)])


def test_keys_are_independent_registers() -> None:
    h = [put("a", b"1", 0, 1, key=b"x"), put("a", b"2", 0, 1, key=b"y"),
         get("b", b"1", 2, 3, key=b"x"), get("b", b"2", 2, 3, key=b"y"), get("b", None, 2, 3, key=b"z")]
    result = check_history(h)
    assert result.ok and result.keys == 3


# ---------------------------------------------------------------------------------------------
# Non-linearizable histories, and their witnesses
# ---------------------------------------------------------------------------------------------


def test_stale_read_after_a_completed_put() -> None:
    h = [put("a", b"1", 0, 1), put("a", b"2", 2, 3), get("b", b"1", 4, 5)]
    result = check_history(h)
    assert not result.ok and result.failed_keys == (K,)
    w = result.witness
    assert w is not None and w.key == K
    # The smallest window: the overwrite and the stale read, with the first put folded into the
    # possible start values.
    assert [op.value for op in w.ops] == [b"2", b"1"]
    assert w.initial == (None, b"1")
    text = result.describe()
    assert text.startswith("key k not linearizable: no linearization of these 2 of its 3 operations")
    assert "get    -> b'1'" in text and "put    b'2'" in text


def test_read_of_a_value_never_written() -> None:
    h = [put("a", b"1", 0, 1), get("b", b"1", 2, 3), get("b", b"ghost", 4, 5), put("a", b"2", 6, 7)]
    result = check_history(h)
    assert not result.ok
    w = result.witness
    assert w is not None
    assert [op.value for op in w.ops] == [b"ghost"]
    assert "ghost" in result.describe()


def test_first_read_of_a_value_never_written_is_caught_from_the_start() -> None:
    w = minimal_window([get("b", b"ghost", 0, 1)])
    assert w is not None and w.initial is None and len(w.ops) == 1
    assert "from the start (absent)" in w.render()


def test_two_readers_see_two_writes_in_opposite_orders() -> None:
    h = [put("a", b"1", 0, 20), put("b", b"2", 0, 20),
         get("c", b"1", 1, 2), get("c", b"2", 3, 4),
         get("d", b"2", 1, 2), get("d", b"1", 3, 4)]
    result = check_history(h)
    assert not result.ok
    assert result.witness is not None and len(result.witness.ops) <= 6


def test_a_pending_write_cannot_be_undone_once_observed() -> None:
    h = [put("a", b"0", 0, 1), put("a", b"1", 2), get("b", b"1", 3, 4), get("b", b"0", 5, 6)]
    assert not is_linearizable(h)


def test_a_lost_durable_write() -> None:
    h = [put("a", b"1", 0, 1), get("final", None, 10, 11)]
    result = check_history(h)
    assert not result.ok
    assert result.witness is not None and result.witness.initial is None


def test_only_the_broken_key_is_reported() -> None:
    good = [put("a", b"%d" % i, 3 * i, 3 * i + 1, key=b"g%d" % i) for i in range(20)]
    bad = [put("a", b"1", 0, 1, key=b"bad"), get("b", None, 2, 3, key=b"bad")]
    more = [put("a", b"1", 0, 1, key=b"worse"), get("b", b"2", 2, 3, key=b"worse")]
    result = check_history(good + bad + more)
    assert not result.ok and result.keys == 22
    assert result.failed_keys == (b"bad", b"worse")
    assert result.witness is not None and result.witness.key == b"bad"
    assert "(and 1 more key)" in result.describe()


def test_an_exhausted_budget_is_a_failure_not_a_pass() -> None:
    # 14 mutually concurrent puts and a read of a value none of them wrote: the search must try
    # every subset before it can say no.
    h = [put("p%d" % i, b"%d" % i, 0, 100) for i in range(14)] + [get("r", b"x", 101, 102)]
    result = check_history(h, budget=1000)
    assert not result.ok and result.undecided == (K,) and result.witness is None
    assert "undecided" in result.describe()
    assert not is_linearizable(h)  # with the default budget it decides


def test_bad_operations_are_refused() -> None:
    with pytest.raises(ValueError):
        Op("a", "cas", K, b"1", 0, 1)
    with pytest.raises(ValueError):
        Op("a", "put", K, b"1", 2, 1)
    with pytest.raises(ValueError):
        Op("a", "delete", K, b"1", 0, 1)


# ---------------------------------------------------------------------------------------------
# Against a brute-force oracle
# ---------------------------------------------------------------------------------------------


def brute_force(ops: list[Op]) -> bool:
    """Every subset of the pending operations, every order respecting real time."""
    pending = [op for op in ops if op.pending]
    done = [op for op in ops if not op.pending]
    for r in range(len(pending) + 1):
        for chosen in itertools.combinations(pending, r):
            sub = done + list(chosen)
            for order in itertools.permutations(sub):
                if any(order[j].ret < order[i].call for i in range(len(order)) for j in range(i + 1, len(order))):
                    continue
                state = None
                for op in order:
                    if op.kind == "get":
                        if op.value != state:
                            break
                    else:
                        state = op.value
                else:
                    return True
    return False


@st.composite
def small_histories(draw) -> list[Op]:
    n = draw(st.integers(1, 6))
    ops = []
    for i in range(n):
        kind = draw(st.sampled_from(["put", "put", "get", "get", "delete"]))
        call = draw(st.integers(0, 12))
        ret = PENDING if kind != "get" and draw(st.integers(0, 4)) == 0 else call + draw(st.integers(0, 6))
        choices = [b"1", b"2", b"3"] + ([None] if kind == "get" else [])
        value = None if kind == "delete" else draw(st.sampled_from(choices))
        ops.append(Op("p%d" % i, kind, K, value, call, ret))
    return ops


@settings(max_examples=400, deadline=None)
@given(small_histories())
def test_agrees_with_brute_force(ops: list[Op]) -> None:
    expected = brute_force(ops)
    assert is_linearizable(ops) == expected
    w = minimal_window(ops)
    assert (w is None) == expected
    if w is not None:
        # The witness is a failing history on its own (from the start: brute force agrees).
        assert set(w.ops) <= set(ops)
        if w.initial is None:
            assert not brute_force(list(w.ops))


# ---------------------------------------------------------------------------------------------
# Histories of sequential executions, widened, are always accepted
# ---------------------------------------------------------------------------------------------


@st.composite
def widened_sequential_histories(draw) -> list[Op]:
    """Run random operations on a dict one after another at instants 10, 20, ...; then widen
    each into an interval around its instant (random concurrency); make some writes pending,
    and add pending writes that never took effect (their values are never read)."""
    n = draw(st.integers(1, 40))
    keys = [b"a", b"b", b"c"][: draw(st.integers(1, 3))]
    state: dict[bytes, bytes] = {}
    ops = []
    for i in range(n):
        key = draw(st.sampled_from(keys))
        kind = draw(st.sampled_from(["put", "put", "get", "get", "delete"]))
        at = 10 * (i + 1)
        if kind == "put":
            value: bytes | None = b"v%d" % i
            state[key] = value  # type: ignore[assignment]
        elif kind == "delete":
            value = None
            state.pop(key, None)
        else:
            value = state.get(key)
        call = at - draw(st.integers(0, 35))
        pending = kind != "get" and draw(st.integers(0, 5)) == 0
        ret = PENDING if pending else at + draw(st.integers(0, 35))
        ops.append(Op("p%d" % draw(st.integers(0, 3)), kind, key, value, call, ret))
    for j in range(draw(st.integers(0, 4))):
        ops.append(Op("zombie", "put", draw(st.sampled_from(keys)), b"lost%d" % j, draw(st.integers(0, 10 * n))))
    return draw(st.permutations(ops))


@settings(max_examples=300, deadline=None)
@given(widened_sequential_histories())
def test_widened_sequential_histories_are_linearizable(ops: list[Op]) -> None:
    result = check_history(ops)
    assert result.ok, result.describe()


@settings(max_examples=200, deadline=None)
@given(widened_sequential_histories(), st.data())
def test_a_read_of_a_value_never_written_is_always_caught(ops: list[Op], data) -> None:
    reads = [i for i, op in enumerate(ops) if op.kind == "get"]
    if not reads:
        return
    i = data.draw(st.sampled_from(reads))
    ops = list(ops)
    ops[i] = Op(ops[i].process, "get", ops[i].key, b"never-written", ops[i].call, ops[i].ret)
    result = check_history(ops)
    assert not result.ok
    assert result.witness is not None and any(op.value == b"never-written" for op in result.witness.ops)
