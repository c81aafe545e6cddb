"""A linearizability checker for client histories of a key-value store.

Why
---
The trace checks of :mod:`sim.checks.writer` read the protocol events the engine reports about itself
(fences, acknowledgements, manifest commits). This oracle reads only what *clients* saw: which
operation each process called, when, and what it returned. It therefore also catches bugs that
report no protocol event at all -- a read served from the wrong memtable, a replay that skips a
row, a merge that prefers the older version -- as long as some client observes them.

What is checked
---------------
A history is a list of :class:`Op`: a process, a kind (``put``, ``delete``, ``get``), a key, a
value (the value written by a put; the value a get returned, ``None`` meaning absent) and two
stamps, ``call`` and ``ret``, on one clock. Operation A *precedes* B in real time iff
``A.ret < B.call``; equal stamps count as concurrent (the permissive choice, for hand-written
histories; the simulator stamps every call and return with a distinct counter, in the order they
happened). The history is *linearizable* when its operations can be put in one total order that
respects real-time precedence and is a legal run of the sequential model: one register per key,
initially absent, where a put sets the value, a delete clears it, and a get returns it.

How: Wing & Gong's search with Lowe's memoization
-------------------------------------------------
The search (Wing & Gong 1993, as refined by Lowe 2017 and used by Knossos and Porcupine) builds
the total order from the front. At each step the candidates are the operations not yet placed
that no other unplaced operation precedes (their call is no later than the earliest return among
the unplaced ones); a candidate is placed if the model accepts it from the current register
value (puts and deletes always, a get only if it returned the current value), and the search
backtracks when no candidate fits. Lowe's refinement memoizes the configurations already
explored: two ways of placing the same *set* of operations that leave the register with the same
value have the same future, so each (bitmask of placed operations, register value) pair is
expanded once. The search is a depth-first walk over that graph of configurations.

Why per key
-----------
Linearizability is compositional (Herlihy & Wing's locality, "P-compositionality" in the
Porcupine paper): a history is linearizable iff every object's sub-history is, and here every key
is an independent register (the workload writes no multi-key batches). The search is exponential
in the number of mutually concurrent operations of *one* sub-history, so splitting a thousand
operations over two hundred keys keeps every search to a handful of operations.

Pending operations
------------------
An operation that never returned -- its process crashed, its writer was fenced, its durability
wait failed, its outcome was ambiguous -- may have taken effect at any moment after its call, or
never. The standard treatment gives it ``ret = +inf`` (:data:`PENDING`): it never precedes
anything, so it may be placed anywhere after its call, and the search succeeds once every
*completed* operation is placed; the pending writes left over are the ones that never took
effect (or, equivalently, took effect after the end of the history). A pending get carries no
observation and is dropped. A pending write whose value no get returned is dropped before the
search too: such a write can always be placed last, so dropping it changes nothing.

The witness
-----------
On failure the result names the key and the smallest *window* of its operations that cannot be
linearized on its own, found in two steps:

1. the earliest cut-off: the first return stamp ``c`` such that the history truncated at ``c``
   (operations called later dropped, operations still running made pending) is not
   linearizable. Truncation preserves linearizability, so ``c`` is where the violation happens;
2. the latest start: the operations that returned before every remaining operation was called
   are dropped, and the register is assumed to hold, at the start, any one of the values they
   wrote (or nothing). That over-approximates what they could have left behind, so a window that
   still fails is a self-contained proof that the whole history is not linearizable.

The window is shown as recorded; operations that returned only after the cut-off are marked
(they were still running when the history stopped being linearizable).

Pure Python (and ``attrs``); deterministic (no hashing of unordered data decides anything).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Sequence

import attrs

#: The return stamp of an operation that never returned.
PENDING = math.inf

#: Default cap on configurations explored for one key (far above anything the workload needs).
DEFAULT_BUDGET = 1_000_000

_KINDS = ("put", "delete", "get")
_UNKNOWN = object()  # register value at the start of a window: one of a set of candidates


@attrs.frozen
class Op:
    """One client operation. ``value``: written (put), observed (get, ``None`` = absent), or
    ``None`` (delete). ``call``/``ret``: stamps on one clock; ``ret`` is :data:`PENDING` for an
    operation that never returned. ``note`` is free text shown in witnesses."""

    process: str
    kind: str
    key: bytes
    value: bytes | None
    call: float
    ret: float = PENDING
    note: str = ""

    def __attrs_post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown operation kind {self.kind!r}")
        if not self.ret >= self.call:
            raise ValueError(f"operation returns before it is called: {self!r}")
        if self.kind == "delete" and self.value is not None:
            raise ValueError("a delete carries no value")

    @property
    def pending(self) -> bool:
        return self.ret == PENDING

    def render(self) -> str:
        if self.kind == "get":
            what = f"get    -> {render_value(self.value)}"
        elif self.kind == "put":
            what = f"put    {render_value(self.value)}"
        else:
            what = "delete"
        span = f"[{_stamp(self.call)}, {'pending' if self.pending else _stamp(self.ret)}]"
        note = f"  ({self.note})" if self.note else ""
        return f"{self.process:<6} {what:<24} {span}{note}"


@attrs.frozen
class Witness:
    """A window of one key's operations that has no linearization on its own.

    ``initial`` is ``None`` when the window starts at the beginning of the key's history (the
    register starts absent); otherwise the values the register may hold at the window's start
    (``None`` in it meaning absent)."""

    key: bytes
    ops: tuple[Op, ...]
    initial: tuple[bytes | None, ...] | None
    history_ops: int
    #: Set when some operations of the window returned after the cut-off (marked ``*``): the
    #: history stops being linearizable at this stamp, while they were still running.
    cutoff: float | None = None

    def render(self) -> str:
        if self.initial is None:
            start = "from the start (absent)"
        else:
            start = "starting from " + " or ".join(render_value(v) for v in self.initial)
        lines = [f"no linearization of these {len(self.ops)} of its {self.history_ops} operations, {start}:"]
        for op in self.ops:
            late = self.cutoff is not None and op.ret > self.cutoff
            lines.append(("  * " if late else "    ") + op.render())
        if self.cutoff is not None:
            lines.append(f"    (* still running at {_stamp(self.cutoff)}, where the history stops being linearizable)")
        return "\n".join(lines)


@attrs.frozen
class LinResult:
    """The verdict over a whole history. ``failed_keys``: every key whose sub-history is not
    linearizable (sorted); ``witness``: the minimal window of the first of them; ``undecided``:
    keys whose search exceeded the budget (counted as failures)."""

    ok: bool
    keys: int
    ops: int
    explored: int
    failed_keys: tuple[bytes, ...] = ()
    undecided: tuple[bytes, ...] = ()
    witness: Witness | None = None

    def describe(self) -> str:
        """One line (then the witness) for a report; ``""`` when linearizable."""
        if self.ok:
            return ""
        if self.witness is None:
            keys = ", ".join(render_key(k) for k in self.undecided)
            return f"key {keys} undecided: search budget exceeded"
        more = len(self.failed_keys) - 1
        also = f" (and {more} more key{'s' if more > 1 else ''})" if more > 0 else ""
        return f"key {render_key(self.witness.key)} not linearizable{also}: {self.witness.render()}"


def render_key(key: bytes) -> str:
    try:
        text = key.decode("ascii")
    except UnicodeDecodeError:
        return repr(key)
    return text if text.isprintable() and text else repr(key)


def render_value(value: bytes | None) -> str:
    return "absent" if value is None else repr(value)


def _stamp(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# ---------------------------------------------------------------------------------------------
# The public entry points
# ---------------------------------------------------------------------------------------------


def check_history(history: Iterable[Op], *, budget: int = DEFAULT_BUDGET) -> LinResult:
    """Check a whole history, key by key; on failure, find the minimal window of the first
    failing key (in key order)."""
    by_key: dict[bytes, list[Op]] = defaultdict(list)
    n = 0
    for op in history:
        by_key[op.key].append(op)
        n += 1
    explored = 0
    failed: list[bytes] = []
    undecided: list[bytes] = []
    for key in sorted(by_key):
        verdict, states = _check(_prepare(by_key[key]), None, budget)
        explored += states
        if verdict is None:
            undecided.append(key)
        elif not verdict:
            failed.append(key)
    witness = minimal_window(by_key[failed[0]], budget=budget) if failed else None
    return LinResult(not failed and not undecided, len(by_key), n, explored, tuple(failed), tuple(undecided), witness)


def is_linearizable(history: Iterable[Op], *, budget: int = DEFAULT_BUDGET) -> bool:
    return check_history(history, budget=budget).ok


def minimal_window(ops: Sequence[Op], *, budget: int = DEFAULT_BUDGET) -> Witness | None:
    """The minimal failing window of one key's operations (see the module docstring), or
    ``None`` if they are linearizable."""
    if not ops:
        return None
    key = ops[0].key
    assert all(op.key == key for op in ops), "minimal_window takes one key's operations"
    full = _prepare(ops)
    if _check(full, None, budget)[0] is not False:
        return None
    # 1. The earliest failing cut-off (the full history is the last cut-off).
    original: dict[int, Op] = {}  # id of a truncated operation -> the operation as recorded
    failing, cutoff = full, None
    for c in sorted({op.ret for op in full if not op.pending}):
        truncated = []
        for op in full:
            if op.call <= c:
                cut = op if op.ret <= c else attrs.evolve(op, ret=PENDING)
                original[id(cut)] = op
                truncated.append(cut)
        truncated = _prepare(truncated)
        if _check(truncated, None, budget)[0] is False:
            failing, cutoff = truncated, c
            break
        original.clear()
    # 2. The latest start that still fails on its own.
    for s in sorted({op.call for op in failing}, reverse=True):
        window, initial = _window(failing, s)
        if _check(window, initial, budget)[0] is False:
            shown = None if initial is None else tuple(sorted(initial, key=lambda v: (v is not None, v or b"")))
            recorded = tuple(original.get(id(op), op) for op in window)
            late = cutoff is not None and any(op.ret > cutoff for op in recorded)
            return Witness(key, recorded, shown, len(ops), cutoff if late else None)
    raise AssertionError("unreachable: the window starting first is the failing history itself")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# The search
# ---------------------------------------------------------------------------------------------


def _prepare(ops: Iterable[Op]) -> list[Op]:
    """Drop pending gets and pending writes nobody observed; sort by call (then return)."""
    ops = list(ops)
    observed = {op.value for op in ops if op.kind == "get" and not op.pending}
    kept = [
        op for op in ops
        if not op.pending or (op.kind == "put" and op.value in observed) or (op.kind == "delete" and None in observed)
    ]
    kept.sort(key=lambda op: (op.call, op.ret))
    return kept


def _window(ops: list[Op], s: float) -> tuple[list[Op], frozenset | None]:
    """The operations still to return at ``s``, widened until every dropped operation precedes
    every kept one; with the candidate register values at the window's start."""
    bound = s
    while True:
        kept = [op for op in ops if op.ret >= bound]
        low = min(op.call for op in kept)
        if low >= bound:
            break
        bound = low
    dropped = [op for op in ops if op.ret < bound]
    if not dropped:
        return kept, None
    return kept, frozenset([None, *(op.value for op in dropped if op.kind == "put")])


def _check(ops: list[Op], initial: frozenset | None, budget: int) -> tuple[bool | None, int]:
    """(linearizable?, configurations explored) for one key's prepared operations; ``None``
    instead of a verdict when the budget ran out. ``initial``: ``None`` for a register that
    starts absent, else the set of values it may start with."""
    n = len(ops)
    if n == 0:
        return True, 0
    calls = [op.call for op in ops]
    rets = [op.ret for op in ops]
    is_get = [op.kind == "get" for op in ops]
    values = [op.value for op in ops]  # None for a delete: the register becomes absent
    complete = 0
    for i, op in enumerate(ops):
        if not op.pending:
            complete |= 1 << i
    # Try candidates in order of return (Lowe's heuristic: the op that must come soonest first).
    by_ret = sorted(range(n), key=lambda i: (rets[i], calls[i]))
    start: object = None if initial is None else _UNKNOWN
    seen = {(0, start)}
    stack = [(0, start)]
    explored = 0
    while stack:
        mask, state = stack.pop()
        explored += 1
        if mask & complete == complete:
            return True, explored
        if explored > budget:
            return None, explored
        horizon = min(rets[i] for i in range(n) if not (mask >> i) & 1)
        children = []
        for i in by_ret:
            bit = 1 << i
            if mask & bit or calls[i] > horizon:
                continue
            if is_get[i]:
                if state is _UNKNOWN:
                    if values[i] not in initial:  # type: ignore[operator]
                        continue
                elif values[i] != state:
                    continue
            child = (mask | bit, values[i])
            if child not in seen:
                seen.add(child)
                children.append(child)
        stack.extend(reversed(children))  # the first candidate is explored first
    return False, explored
