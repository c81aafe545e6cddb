"""READ-3, the reader prefix oracle (spec/protocols/reader.md): every state read through a reader,
a checkpoint or a clone is exactly the durable history of one database up to some sequence
number ``S`` -- the writes of every writer incarnation in seq order, each crashed incarnation cut
at the first seq of the next one (what its successor replayed) -- never a mix; and a reader never
goes back."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from typing import Any


class History:
    """Every write of every writer incarnation (values are unique), acknowledgements, and the
    observations to check at the end (:meth:`check`)."""

    def __init__(self) -> None:
        self.incarnations: list[list[tuple[int, bytes, bytes | None]]] = []
        self.acked_seq: dict[bytes, int] = {}
        self.acked_max = 0  # highest seq acknowledged durable
        self.issued_max = 0
        self.observations: list[tuple[str, str, dict, tuple[int, int]]] = []  # (who, what, state, (min S, max S))
        self.acked = 0

    def new_incarnation(self) -> list:
        self.incarnations.append([])
        return self.incarnations[-1]

    def durable(self) -> dict[bytes, list[tuple[int, bytes | None]]]:
        """Per key, (seq, value) of the durable history, seq ascending."""
        out: dict[bytes, list[tuple[int, bytes | None]]] = defaultdict(list)
        incs = [i for i in self.incarnations if i]
        for n, inc in enumerate(incs):
            cut = incs[n + 1][0][0] if n + 1 < len(incs) else None
            for seq, key, value in inc:
                if cut is None or seq < cut:
                    out[key].append((seq, value))
        for versions in out.values():
            versions.sort()
        return out

    def state_at(self, seq: int) -> dict[bytes, bytes]:
        """The model's state at ``seq``: per key, the value of its last durable-history write
        with a seq <= ``seq`` (absent when that write is a delete or there is none)."""
        out = {}
        for key, versions in self.durable().items():
            below = [v for s, v in versions if s <= seq]
            if below and below[-1] is not None:
                out[key] = below[-1]
        return out

    def check(self) -> list[str]:
        """READ-3 for every observation; returns the violations."""
        hist = self.durable()
        by_value = {v: (k, s) for k, versions in hist.items() for s, v in versions if v is not None}
        seqs = {k: [s for s, _ in versions] for k, versions in hist.items()}  # per key, ascending
        problems: list[str] = []
        last_s: dict[str, tuple[int, str]] = {}
        # The range of a state depends on the state alone (the history is fixed here), and most
        # observations read a state read just before (readers scanning a database that did not
        # change): the last few states and their ranges are kept, compared in C (dict ==).
        recent: list[tuple[dict, tuple[int | None, Any]]] = []
        for who, what, state, (want_lo, want_hi) in self.observations:
            for seen, answer in recent:
                if seen == state:
                    lo, hi = answer
                    break
            else:
                lo, hi = answer = _prefix_range(hist, by_value, state, seqs)
                recent.insert(0, (state, answer))
                del recent[_RECENT_STATES:]
            if lo is None:
                problems.append(f"READ-3: {who} ({what}) read a state that is no prefix of the durable history: {hi}")
                continue
            if hi < want_lo or lo > want_hi:
                problems.append(f"READ-3: {who} ({what}) read the history up to seq {lo}..{hi}, expected within "
                                f"{want_lo}..{want_hi}")
                continue
            prev = last_s.get(who)
            if prev is not None and hi < prev[0]:
                problems.append(f"READ-3: {who} went back: {what} reads up to seq {lo}..{hi} after {prev[1]} read "
                                f"at least {prev[0]}")
            if what.startswith("scan"):
                last_s[who] = (max(lo, prev[0] if prev else 0), what)
        return problems


#: How many distinct states :meth:`History.check` keeps with their ranges.
_RECENT_STATES = 4


def _prefix_range(hist, by_value, state: dict, seqs: dict[bytes, list[int]]) -> tuple[int | None, Any]:
    """The seqs S such that ``state`` is exactly the durable history up to S: (lo, hi), or
    (None, why) when there is none (``seqs``: each key's versions' seqs, ascending)."""
    lo, hi = 0, 2**62
    for key, value in state.items():
        hit = by_value.get(value)
        if hit is None or hit[0] != key:
            return None, f"{key!r} = {value[:24]!r}..., which is not a durable write of that key"
        seq = hit[1]
        key_seqs = seqs[key]
        i = bisect_right(key_seqs, seq)  # the first version after this one
        nxt = key_seqs[i] if i < len(key_seqs) else 2**62
        lo, hi = max(lo, seq), min(hi, nxt - 1)
    if lo > hi:
        return None, "keys read at incompatible points of the history"
    # Absent keys: S must fall where the key is absent (before its first write, or in a
    # tombstone's span).
    forbidden: list[tuple[int, int]] = []
    for key, versions in hist.items():
        if key in state:
            continue
        for n, (s, v) in enumerate(versions):
            if v is not None:
                end = versions[n + 1][0] - 1 if n + 1 < len(versions) else 2**62
                forbidden.append((s, end))
    forbidden.sort()
    # The lowest and highest S in [lo, hi] outside every forbidden span.
    allowed: list[tuple[int, int]] = []
    cur = lo
    for a, b in forbidden:
        if b < cur:
            continue
        if a > hi:
            break
        if a > cur:
            allowed.append((cur, a - 1))
        cur = max(cur, b + 1)
        if cur > hi:
            break
    if cur <= hi:
        allowed.append((cur, hi))
    if not allowed:
        absent = [k for k in hist if k not in state][:3]
        return None, f"no seq in {lo}..{hi} where every key read is current and {absent!r}... are absent"
    return allowed[0][0], allowed[-1][1]
