"""The transaction history oracle (spec/protocols/transactions.md, TXN-1..5).

The transaction scenario (:mod:`sim.scenarios.txn`) records every attempt its clients made -- a
transaction (its isolation, snapshot seq, the values its reads returned, its marked and unmarked
keys, its writes) or a plain put or delete -- with the outcome its client saw. Every value
written is unique (``<payload>|<tag>``, the tag naming the attempt), so a row tells whose it is.

What really committed is read from the store at the end: the rows of every WAL object, in seq
order. No GC runs, so the WAL holds every row any writer made durable; a fenced writer's WAL
objects lie below its successor's fence and were replayed (DUR-1), and nothing else is in the
database. A transaction committed iff its values are among those rows. The checks:

* **TXN-1** a committed transaction's rows are all there, at consecutive seqs, the last one the
  seq its commit returned; a commit refused as a conflict wrote nothing; every commit or write
  acknowledged durable is there (a fenced writer's commit is never acknowledged); the final
  writer, after every takeover, reads exactly the history's last value of every key.
* **TXN-2** a committed transaction's reads return the history's state at its snapshot seq.
* **TXN-3** first committer wins: no key a committed transaction wrote (and did not unmark) was
  written by another between its snapshot and its commit: no lost update (and, end to end,
  every counter counts exactly the increments that committed).
* **TXN-4** a committed SERIALIZABLE_SNAPSHOT transaction's reads, and every transaction's marked
  keys, were not written by another between its snapshot and its commit: replayed in commit-seq
  order, every such transaction reads what it read (it is serializable at its commit); end to
  end, no guarded pair (read by SSI transactions or marked) is ever both off, while write skew
  on the SNAPSHOT-only pairs is allowed (counted).
* **TXN-5** no phantom: no key in a range a committed SERIALIZABLE_SNAPSHOT transaction scanned
  (the whole range) was written -- inserted, overwritten or deleted -- by another between its
  snapshot and its commit; end to end, the slots' range, where SSI transactions insert only
  while it holds fewer than its limit of keys, never holds more.
"""

from __future__ import annotations

import bisect
from typing import Iterable

import attrs

#: Transaction isolation labels of an attempt (plain writes are ``put`` / ``delete``).
SI, SSI = "SI", "SSI"
#: At most this many violations are reported per check (the first ones tell the story).
MAX_REPORTED = 4


@attrs.define
class Attempt:
    """One client attempt: a transaction (``kind`` SI / SSI) or a plain ``put`` / ``delete``."""

    tag: str
    kind: str
    role: str = ""  # inc (counter increment), guard (guarded pair), skew (SI-only pair), blind
    snap: int | None = None
    reads: dict = attrs.Factory(dict)  # key -> value read from the snapshot (None: absent)
    marked: set = attrs.Factory(set)
    writes: dict = attrs.Factory(dict)  # key -> value (None: a tombstone)
    unmarked: set = attrs.Factory(set)
    ranges: list = attrs.Factory(list)  # [(lo, hi)] the transaction scanned (SSI: checked)
    outcome: str = "pending"  # acked (durable) | written (returned, not durable) | conflict | failed | pending
    seq: int | None = None  # the seq the commit or write returned


def value_of(payload: bytes, tag: str) -> bytes:
    return payload + b"|" + tag.encode()


def payload_of(value: bytes | None) -> bytes | None:
    return None if value is None else value.rsplit(b"|", 1)[0]


def count_of(value: bytes | None) -> int:
    return 0 if value is None else int(payload_of(value) or b"0")


def is_off(value: bytes | None) -> bool:
    return payload_of(value) == b"off"


@attrs.define
class Verdict:
    violations: list = attrs.Factory(list)
    figures: dict = attrs.Factory(dict)

    def add(self, message: str) -> None:
        ident = message.split(":", 1)[0]
        if sum(1 for v in self.violations if v.startswith(ident + ":")) < MAX_REPORTED:
            self.violations.append(message)


class Versions:
    """Per key, the committed rows in seq order."""

    def __init__(self, rows: Iterable[tuple[int, bytes, bytes | None]]) -> None:
        self.by_key: dict[bytes, tuple[list[int], list[bytes | None]]] = {}
        for seq, key, value in sorted(rows, key=lambda r: r[0]):
            seqs, values = self.by_key.setdefault(key, ([], []))
            seqs.append(seq)
            values.append(value)

    def at(self, key: bytes, seq: float) -> bytes | None:
        seqs, values = self.by_key.get(key, ([], []))
        i = bisect.bisect_right(seqs, seq)
        return values[i - 1] if i else None

    def in_range(self, lo: bytes, hi: bytes, after: int, before: int) -> list[tuple[int, bytes]]:
        """``(seq, key)`` of the rows of keys in ``[lo, hi)`` with seqs in ``(after, before)``."""
        return sorted((seq, key) for key in self.by_key if lo <= key < hi
                      for seq in self.between(key, after, before))

    def between(self, key: bytes, lo: int, hi: int) -> list[int]:
        """Seqs of ``key``'s rows in ``(lo, hi)``."""
        seqs, _ = self.by_key.get(key, ([], []))
        return seqs[bisect.bisect_right(seqs, lo):bisect.bisect_left(seqs, hi)]


def check_history(attempts: Iterable[Attempt], rows: Iterable[tuple[int, bytes, bytes | None]], *,
                  counters: Iterable[bytes] = (), guarded: Iterable[tuple[bytes, bytes]] = (),
                  skew_pairs: Iterable[tuple[bytes, bytes]] = (),
                  slots: tuple[tuple[bytes, bytes], int] | None = None,
                  final: dict[bytes, bytes | None] | None = None) -> Verdict:
    """Judge the attempts against the committed rows ``(seq, key, value)`` (module docstring)."""
    attempts = list(attempts)
    rows = sorted(rows, key=lambda r: r[0])
    verdict = Verdict()
    owner: dict[tuple[bytes, bytes], Attempt] = {}
    deletes: dict[tuple[bytes, int], list[Attempt]] = {}  # two writers may give one seq to deletes of a key
    for a in attempts:
        for key, value in a.writes.items():
            if value is not None:
                owner[(key, value)] = a
            elif a.seq is not None:
                deletes.setdefault((key, a.seq), []).append(a)
    landed: dict[str, list[tuple[int, bytes]]] = {}
    seen_values: set[tuple[bytes, bytes]] = set()
    for seq, key, value in rows:
        if value is None:
            for a in deletes.get((key, seq), ()):
                landed.setdefault(a.tag, []).append((seq, key))
            continue
        if (key, value) in seen_values:
            verdict.add(f"TXN-1: value {value!r} of {key!r} was written twice (again at seq {seq})")
        seen_values.add((key, value))
        hit = owner.get((key, value))
        if hit is None:
            verdict.add(f"TXN-1: row {key!r}={value!r} at seq {seq} was written by no attempt")
            continue
        landed.setdefault(hit.tag, []).append((seq, key))

    committed: dict[str, tuple[int, int]] = {}  # tag -> (first seq, last seq)
    for a in attempts:
        got = landed.get(a.tag)
        if not got:
            if a.outcome == "acked":
                verdict.add(f"TXN-1: {a.kind} {a.tag} was acknowledged durable (seq {a.seq}) but is not in the "
                            f"history: lost, or acknowledged by a fenced writer")
            continue
        seqs = sorted(s for s, _ in got)
        committed[a.tag] = (seqs[0], seqs[-1])
        if a.outcome == "conflict":
            verdict.add(f"TXN-1: {a.tag} was refused as a conflict but its rows landed at seqs {seqs}")
        if {k for _, k in got} != set(a.writes) or len(got) != len(a.writes):
            verdict.add(f"TXN-1: {a.tag} committed partly: {sorted(k for _, k in got)} of {sorted(a.writes)}")
        elif seqs[-1] - seqs[0] + 1 != len(seqs):
            verdict.add(f"TXN-1: {a.tag}'s rows are not consecutive: seqs {seqs}")
        if a.seq is not None and a.seq != seqs[-1]:
            verdict.add(f"TXN-1: {a.tag} returned seq {a.seq} but its rows landed at seqs {seqs}")

    versions = Versions(rows)
    for a in attempts:
        if a.kind not in (SI, SSI) or a.tag not in committed or a.snap is None:
            continue
        first = committed[a.tag][0]
        for key, value in a.reads.items():
            at = versions.at(key, a.snap)
            if at != value:
                verdict.add(f"TXN-2: {a.kind} {a.tag} (snapshot seq {a.snap}) read {key!r}={value!r}; the "
                            f"history holds {at!r} there")
        for key in sorted(set(a.writes) - a.unmarked):
            others = versions.between(key, a.snap, first)
            if others:
                verdict.add(f"TXN-3: lost update: {a.kind} {a.tag} (snapshot seq {a.snap}) committed {key!r} at "
                            f"seq {first} over writes of {key!r} at seqs {others} it never saw")
        checked = (set(a.reads) if a.kind == SSI else set()) | a.marked
        for key in sorted(checked):
            others = versions.between(key, a.snap, first)
            if others:
                what = "read" if key in a.reads and a.kind == SSI else "marked"
                verdict.add(f"TXN-4: {a.kind} {a.tag} (snapshot seq {a.snap}, commit seq {first}) {what} {key!r}, "
                            f"written meanwhile at seqs {others}: not serializable at its commit")
        for lo, hi in (a.ranges if a.kind == SSI else ()):
            others = versions.in_range(lo, hi, a.snap, first)
            if others:
                verdict.add(f"TXN-5: phantom: {a.kind} {a.tag} (snapshot seq {a.snap}, commit seq {first}) scanned "
                            f"[{lo!r}, {hi!r}), written meanwhile at (seq, key) {others[:3]}: not serializable at "
                            f"its commit")

    incs: dict[bytes, int] = {}
    for a in attempts:
        if a.role == "inc" and a.tag in committed:
            for key in a.writes:
                incs[key] = incs.get(key, 0) + 1
    for key in counters:
        n, got = incs.get(key, 0), count_of(versions.at(key, float("inf")))
        if got != n:
            verdict.add(f"TXN-3: lost update: counter {key!r} ends at {got}, {n} increments of it committed")

    def skews(pairs: Iterable[tuple[bytes, bytes]]) -> list[tuple[int, bytes]]:
        members = {k: pair for pair in pairs for k in pair}
        state: dict[bytes, bytes | None] = {}
        out = []
        for seq, key, value in rows:
            if key in members:
                state[key] = value
                x, y = members[key]
                if is_off(state.get(x)) and is_off(state.get(y)):
                    out.append((seq, x))
        return out

    for seq, x in skews(guarded):
        verdict.add(f"TXN-4: write skew: guarded pair {x!r} both off at seq {seq}")
    if slots is not None:
        (lo, hi), limit = slots
        live: set[bytes] = set()
        for seq, key, value in rows:
            if lo <= key < hi:
                (live.add if value is not None else live.discard)(key)
                if len(live) > limit:
                    verdict.add(f"TXN-5: phantom write skew: [{lo!r}, {hi!r}) holds {len(live)} keys at seq {seq}, "
                                f"more than the {limit} its SSI inserters allow")
                    break
    verdict.figures["si_skews"] = len(skews(skew_pairs))
    verdict.figures["committed"] = sum(1 for a in attempts if a.kind in (SI, SSI) and a.tag in committed)
    verdict.figures["conflicts"] = sum(1 for a in attempts if a.outcome == "conflict")

    if final is not None:
        for key in sorted(set(final) | set(versions.by_key)):
            want = versions.at(key, float("inf"))
            if final.get(key) != want:
                verdict.add(f"TXN-1: after the last takeover {key!r} reads {final.get(key)!r}; the history's last "
                            f"value is {want!r}")
    return verdict
