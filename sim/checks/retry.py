"""RETRY-1 (spec/objstore.md): under a bounded retry policy a call makes exactly ``max_retries + 1``
attempts before ``ObjectStoreRetriesExhaustedError`` (or stops at its deadline), never more, never
fewer, never another error, and never goes on past its deadline by more than one pause.

Judged from what the simulated store recorded, not from the retry module's own events: a process
announces its policy (``retry.policy max_retries=N deadline_s=D``), opens each logical call
(``call op=... key=...``) and closes it (``call.end outcome=ok|exhausted|<error type>
attempts=...``); the store's requests of that process in between are the call's attempts, with
their fate (``store.result outcome=transient-error`` or ``store.reply-lost``: failed
transiently). Consecutive requests of one operation on one key are one retried request (a
create's read-back ``get`` after an ambiguous create is a group of its own, bounded on its own).
"""

from __future__ import annotations

from typing import Any

import attrs

from slatedb.runtime import BACKOFF_MAX_S

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace

RETRY_1 = "RETRY-1"
#: How far past its deadline a retried request may end: the deadline is checked before each pause
#: (at most ``BACKOFF_MAX_S`` times 1.5 with jitter: the simulated clients' calls are not those of
#: an opened database, whose pauses reach 15 s) and cuts the next attempt at once.
DEADLINE_SLACK_S = 1.5 * BACKOFF_MAX_S + 0.5


@attrs.define
class _Attempt:
    n: int
    op: str
    key: str
    time_s: float  # virtual time the request was sent
    failed: bool = False  # failed transiently (error before applying, or the reply lost)
    answered: str = ""  # the store's outcome


@attrs.define
class _Call:
    op: str
    key: str
    start_s: float
    attempts: list[_Attempt] = attrs.Factory(list)


class RetryBoundChecks:
    """RETRY-1 over the calls of every process that announced a bounded policy."""

    def __init__(self) -> None:
        self.policy: dict[str, tuple[int, float | None]] = {}  # process -> (max_retries, deadline_s)
        self.calls: dict[str, _Call] = {}  # process -> its open call
        self.judged = 0
        self.exhausted = 0
        self.at_deadline = 0  # calls exhausted by the deadline, not the count

    def attach(self, trace: Trace) -> "RetryBoundChecks":
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e: Event) -> None:
        kind = e.kind
        if kind == "retry.policy":
            f = e.f
            self.policy[e.process] = (f["max_retries"], f.get("deadline_s"))
            return
        call = self.calls.get(e.process)
        if kind == "call":
            f = e.f
            self.calls[e.process] = _Call(f["op"], f["key"], e.time_s)
        elif call is None:
            return
        elif kind.startswith("store.") and kind not in ("store.result", "store.reply-lost"):
            f = e.f
            call.attempts.append(_Attempt(f["n"], kind[len("store."):], f["key"], e.time_s))
        elif kind in ("store.result", "store.reply-lost"):
            f = e.f
            attempt = next((a for a in reversed(call.attempts) if a.n == f["n"]), None)
            if attempt is not None:
                if kind == "store.reply-lost" or f.get("outcome") == "transient-error":
                    attempt.failed = True
                else:
                    attempt.answered = str(f.get("outcome"))
        elif kind == "call.end":
            del self.calls[e.process]
            self._judge(e, call, e.f)

    def _judge(self, e: Event, call: _Call, f: dict[str, Any]) -> None:
        max_retries, deadline_s = self.policy[e.process]
        bound = max_retries + 1
        outcome = f["outcome"]
        self.judged += 1
        what = f"{call.op} {call.key} (max_retries={max_retries})"
        groups: list[list[_Attempt]] = []
        for a in call.attempts:
            if groups and (groups[-1][-1].op, groups[-1][-1].key) == (a.op, a.key):
                groups[-1].append(a)
            else:
                groups.append([a])
        ends = [g[0].time_s for g in groups[1:]] + [e.time_s]
        for group, end_s in zip(groups, ends):
            desc = f"{group[0].op} {group[0].key}"
            if deadline_s is not None and end_s - group[0].time_s > deadline_s + DEADLINE_SLACK_S:
                raise InvariantViolation(RETRY_1, e, f"{what}: {desc} went on {end_s - group[0].time_s:.1f} s, past "
                                                     f"the retry deadline of {deadline_s:g} s")
            if len(group) > bound:
                raise InvariantViolation(RETRY_1, e, f"{what}: {len(group)} attempts of {desc}, more than "
                                                     f"max_retries + 1 = {bound}")
            answered = [a for a in group[:-1] if not a.failed]
            if answered:
                raise InvariantViolation(RETRY_1, e, f"{what}: {desc} retried after attempt n={answered[0].n} was "
                                                     f"answered ({answered[0].answered})")
        if outcome == "TransientObjectStoreError":
            raise InvariantViolation(RETRY_1, e, f"{what}: the transient error itself escaped the bounded retry")
        if not groups:
            raise InvariantViolation(RETRY_1, e, f"{what}: ended {outcome} without a request")
        last = groups[-1]
        if outcome == "exhausted":
            self.exhausted += 1
            before_deadline = deadline_s is None or e.time_s - last[0].time_s < deadline_s - 1e-3  # float sums
            if before_deadline and (len(last) != bound or not all(a.failed for a in last)):
                raise InvariantViolation(RETRY_1, e, f"{what}: gave up after {len(last)} attempts of {last[0].op} "
                                                     f"{last[0].key} ({sum(a.failed for a in last)} failed), not "
                                                     f"max_retries + 1 = {bound}")
            self.at_deadline += not before_deadline
            if before_deadline and f.get("attempts") != bound:
                raise InvariantViolation(RETRY_1, e, f"{what}: ObjectStoreRetriesExhaustedError counts "
                                                     f"{f.get('attempts')} attempts, the store saw {len(last)}")
        elif last[-1].failed:
            raise InvariantViolation(RETRY_1, e, f"{what}: ended {outcome} though its last attempt "
                                                 f"n={last[-1].n} failed transiently")
