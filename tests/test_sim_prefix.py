"""READ-3's prefix oracle (:class:`sim.checks.prefix.History`): a state read again is judged by
the range found for it before, but every observation is still held to its own window and to
its reader's last scan (``History.check`` keeps the ranges of the last states it judged)."""

from __future__ import annotations

from sim.checks.prefix import History


def _history() -> History:
    h = History()
    inc = h.new_incarnation()
    inc += [(1, b"k1", b"a"), (2, b"k1", b"b"), (3, b"k2", b"c")]
    return h


def test_a_state_read_again_is_held_to_each_observations_window_and_order() -> None:
    h = _history()
    h.observations += [
        ("r1", "scan 1", {b"k1": b"a"}, (0, 10)),  # seq 1 exactly: fine
        ("r1", "scan 2", {b"k1": b"a"}, (5, 10)),  # the same state, another window: outside it
        ("r2", "scan 1", {b"k1": b"b", b"k2": b"c"}, (0, 2**62)),  # seq 3 on
        ("r2", "scan 2", {b"k1": b"a"}, (0, 2**62)),  # the state judged first, read after seq 3: back
        ("r3", "scan 1", {b"k1": b"zz"}, (0, 2**62)),  # no durable write
        ("r3", "scan 2", {b"k1": b"zz"}, (0, 2**62)),  # the same, again
    ]
    problems = h.check()
    assert len(problems) == 4, problems
    assert problems[0].startswith("READ-3: r1 (scan 2) read the history up to seq 1..1, expected within 5..10")
    assert problems[1].startswith("READ-3: r2 went back: scan 2 reads up to seq 1..1 after scan 1 read at least 3")
    assert [p[:18] for p in problems[2:]] == ["READ-3: r3 (scan 1", "READ-3: r3 (scan 2"]
    assert all("no prefix of the durable history" in p for p in problems[2:])


def test_equal_states_give_the_ranges_a_fresh_check_gives() -> None:
    """More distinct states than the oracle keeps, each read twice and then again in another
    order: the answers are those of a history checking each observation alone."""
    h = History()
    inc = h.new_incarnation()
    inc += [(s, b"k%d" % (s % 3), b"v%d" % s) for s in range(1, 30)]
    states = [dict(h.state_at(s)) for s in range(1, 30, 3)]
    windows = [(0, 2**62), (0, 5), (20, 2**62)]
    h.observations += [(f"r{i % 4}", f"get {i}", dict(s), windows[i % 3])
                       for i, s in enumerate(states + states[::-1] + states)]
    alone = []
    for o in h.observations:
        one = History()
        one.incarnations = h.incarnations
        one.observations = [o]
        alone += one.check()
    assert h.check() == alone and alone  # gets: no order check, so each judged alone is the same
