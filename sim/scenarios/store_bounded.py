"""The store workload under the production retry policy: RETRY-1, exactly N + 1 attempts.

Every other scenario runs the simulator's unbounded retry policy (a call retries until the
scenario heals the faults). Here each client's runtime carries the production policy
(``slatedb.runtime.production.PRODUCTION_RETRIES``: ``max_retries`` and the 180 s deadline; no
logging) with its own ``max_retries`` drawn from 0..5, against a store failing often enough
(transient errors 10-60 %, lost replies, stalls of up to 5, 60 or 400 s a leg) that calls run
out of retries, and some run into the deadline. Every call goes through the engine's
``retry_transient`` or ``create_if_absent``; each is framed in the trace (``call`` ...
``call.end``) so that :mod:`sim.checks.retry` counts its attempts from the simulated store's own
request records and checks RETRY-1 (spec/objstore.md). A model of the private keys
checks that an exhausted mutation is taken as ambiguous (applied or not), never lost or doubled.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from slatedb.errors import ObjectNotFoundError, ObjectStoreRetriesExhaustedError
from slatedb.objstore import OVERWRITE
from slatedb.objstore.memory import MemoryStore
from slatedb.objstore.retry import create_if_absent, retry_transient
from slatedb.runtime.production import PRODUCTION_RETRIES

from sim.checks.retry import RetryBoundChecks
from sim.scenarios.store import fault_counts, private_values_violations
from sim.world.choices import Choices
from sim.world.harness import Checker, Scenario, Setup, WorldResult, run_world
from sim.world.invariants import ORACLE, Violation
from sim.world.runtime import SimRuntime
from sim.world.store import SimObjectStore, StoreFaults

#: The retry bounds a client may carry (0: a single attempt).
MAX_RETRIES = (0, 1, 2, 3, 5)


class BoundedWorld:
    """The clients' shared store, the private keys' possible values and what the oracle needs."""

    def __init__(self, setup: Setup) -> None:
        choices, trace = setup.choices, setup.trace
        self.setup = setup
        self.world = SimRuntime("world", choices, trace)
        rng = choices.stream("faults")
        self.faults = StoreFaults() if setup.faults == "none" else StoreFaults(
            latency_min_s=0.0005, latency_max_s=rng.choice([0.002, 0.02]),
            transient_rate=rng.uniform(0.1, 0.6), ambiguous_rate=rng.uniform(0.0, 0.15),
            stall_rate=rng.uniform(0.0, 0.02), stall_max_s=rng.choice([5.0, 60.0, 400.0]))
        trace.record("world", "faults", config=repr(self.faults))
        shape = choices.stream("shape")
        self.n_clients = shape.count(1, setup.options.get("n_clients", 4))
        self.ops_left = shape.count(1, setup.options.get("n_ops", 300))
        self.private_possible: dict[str, set[bytes | None]] = {}
        self.claims: dict[str, list[str]] = {}
        self.violations: list[Violation] = []
        self.outcomes: dict[str, int] = {}
        self.direct = MemoryStore(setup.bucket, self.world.now_ms)  # the final state, read without faults


async def _call(w: BoundedWorld, rt: SimRuntime, op: str, key: str, fn: Any) -> tuple[str, Any]:
    """Run one logical call framed for the checker: ``("ok", result)``, ``("exhausted", error)``
    or ``(<error type>, error)`` for a permanent answer."""
    trace = w.setup.trace
    trace.record(rt.name, "call", op=op, key=key)
    attempts = None
    try:
        result = await fn()
        outcome: tuple[str, Any] = ("ok", result)
    except ObjectStoreRetriesExhaustedError as e:
        outcome, attempts = ("exhausted", e), e.attempts
    except ObjectNotFoundError as e:
        outcome = (type(e).__name__, e)
    except Exception as e:  # noqa: BLE001 -- the checker judges it (RETRY-1: never another error)
        outcome = (type(e).__name__, e)
    trace.record(rt.name, "call.end", outcome=outcome[0], attempts=attempts)
    w.outcomes[outcome[0]] = w.outcomes.get(outcome[0], 0) + 1
    return outcome


async def _client(w: BoundedWorld, i: int) -> None:
    setup, choices, trace = w.setup, w.setup.choices, w.setup.trace
    name = f"client{i}"
    rt = SimRuntime(name, choices, trace, bugs=setup.bugs)
    rt.retry_policy = attrs.evolve(PRODUCTION_RETRIES, max_retries=rt.rng.choice(MAX_RETRIES), log=False)
    trace.record(name, "retry.policy", max_retries=rt.retry_policy.max_retries, deadline_s=rt.retry_policy.deadline_s)
    store = SimObjectStore(MemoryStore(setup.bucket, rt.now_ms), choices.stream("store", name), trace, process=name,
                           faults=w.faults)
    next_claim = 1
    while w.ops_left > 0:
        w.ops_left -= 1
        op = rt.rng.choice(["put", "put", "get", "get", "delete", "claim", "claim", "list"])
        if op == "claim":
            key = f"seq/{next_claim:020d}"
            next_claim += 1
            got, _ = await _call(w, rt, "create", key, lambda: create_if_absent(store, rt, key, name.encode()))
            if got == "ok" and _:
                w.claims.setdefault(key, []).append(name)
        elif op == "list":
            await _call(w, rt, "list", "seq/", lambda: retry_transient(rt, lambda: store.list("seq/"), what="list"))
        else:
            await _private(w, rt, store, op)
    trace.record(name, "client.done")


async def _private(w: BoundedWorld, rt: SimRuntime, store: SimObjectStore, op: str) -> None:
    key = f"private/{rt.name}/k{rt.rng.randrange(3)}"
    possible = w.private_possible.setdefault(key, {None})
    if op == "put":
        value = rt.rng.randbytes(rt.rng.randrange(1, 32))
        got, _ = await _call(w, rt, op, key,
                             lambda: retry_transient(rt, lambda: store.put(key, value, OVERWRITE), what=f"put {key}"))
        w.private_possible[key] = {value} if got == "ok" else possible | {value}
    elif op == "delete":
        got, _ = await _call(w, rt, op, key, lambda: retry_transient(rt, lambda: store.delete(key), what=f"del {key}"))
        w.private_possible[key] = {None} if got == "ok" else possible | {None}
    else:
        got, answer = await _call(w, rt, op, key, lambda: retry_transient(rt, lambda: store.get(key), what=f"get {key}"))
        if got in ("ok", "ObjectNotFoundError"):
            data = answer.data if got == "ok" else None
            if data not in possible:
                w.violations.append(Violation(f"{rt.name} read {key}={data!r}, possible {possible!r}", "oracle",
                                              ORACLE))
            w.private_possible[key] = {data}


async def _clients(w: BoundedWorld, nursery: trio.Nursery | None) -> None:
    assert nursery is not None
    for i in range(w.n_clients):
        nursery.start_soon(_client, w, i, name=f"client{i}")


def _oracle(w: BoundedWorld, _failed: bool) -> list[Violation]:
    """One owner per claimed id; every private key holds a possible value at the end."""
    violations = list(w.violations)
    for key, winners in sorted(w.claims.items()):
        if len(winners) > 1:
            violations.append(Violation(f"{key} claimed by {winners}", "oracle", ORACLE))
    return violations + private_values_violations(w.private_possible, w.direct)


def _figures(w: BoundedWorld) -> dict[str, Any]:
    checks = w.setup.checkers["retry"]
    return {"calls": checks.judged, "exhausted": checks.exhausted, "at_deadline": checks.at_deadline,
            "outcomes": dict(w.outcomes)}


SCENARIO = Scenario(
    "store-bounded", BoundedWorld, _clients, nursery="join", oracles=_oracle, virtual_limit_s=None,
    checkers=(Checker("retry", lambda _setup: RetryBoundChecks()),),
    figures=_figures, fault_counts=fault_counts, processes_declared=("client0..clientN",),
    fault_kinds=("transient", "ambiguous", "stall"))


def run_store_bounded(seed: int, *, bugs: frozenset[str] = frozenset(), choices: Choices | None = None,
                      faults: str = "swarm", n_ops: int = 300, n_clients: int = 4) -> WorldResult:
    """Run the bounded-retry store workload for ``seed`` (``faults``: ``"swarm"`` or ``"none"``)."""
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults, n_ops=n_ops, n_clients=n_clients)
