"""A concurrent workload against the simulated object store, with its own oracle.

Several clients share one simulated store, each through its own fault-injecting view, and do
what the database protocols do with a store: compare-and-swap a shared counter with
update-if-match (like ``gc/*.boundary``), claim sequence ids with create-if-absent (like
``manifest/`` and ``wal/``), and keep private keys with plain puts, reads, lists and deletes.

The oracle accounts for ambiguous outcomes: an operation answered with a transient error may or
may not have applied, so the checks are bounds, not equalities. It is the smoke campaign of
``./just dst`` until the database protocols are simulated, and the workload of the determinism
tests (same seed, same trace digest).
"""

from __future__ import annotations

import trio

from slatedb.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    TransientObjectStoreError,
)
from slatedb.objstore import CREATE_IF_ABSENT, OVERWRITE, PutMode
from slatedb.objstore.memory import MemoryStore
from slatedb.objstore.retry import create_if_absent

from sim.world.invariants import ORACLE, Violation
from sim.world.store import SimObjectStore, StoreFaults
from sim.world.choices import Choices
from sim.world.harness import Scenario, Setup, WorldResult, run_world
from sim.world.runtime import SimRuntime


class StoreWorld:
    """The clients' shared state and what the oracle needs: acknowledged and ambiguous
    increments, claims, the possible values of every private key."""

    def __init__(self, setup: Setup) -> None:
        choices, trace = setup.choices, setup.trace
        self.setup = setup
        self.world = SimRuntime("world", choices, trace)
        fault_rng = choices.stream("faults")
        self.faults = {
            "swarm": lambda: StoreFaults.swarm(fault_rng),
            "all": lambda: StoreFaults(0.0005, 0.05, 0.05, 0.05, 0.01, 120.0),
            "none": StoreFaults,
        }[setup.faults]()
        trace.record("world", "faults", config=repr(self.faults))
        self.acked_incr = 0
        self.unknown_incr = 0
        self.claims: dict[int, list[str]] = {}
        self.private_possible: dict[str, set[bytes | None]] = {}
        self.violations: list[Violation] = []
        shape = choices.stream("shape")  # the seed's world is the full one; a shrunk one may be smaller
        self.n_clients = shape.count(1, setup.options.get("n_clients", 6))
        self.n_ops = setup.options.get("n_ops", 2000)
        self.ops_left = shape.count(1, self.n_ops)
        self.seed_store = MemoryStore(setup.bucket, self.world.now_ms)
        self.seed_store.put_now("counter", b"0", CREATE_IF_ABSENT)


async def _client(w: StoreWorld, i: int) -> None:
    setup, choices, trace = w.setup, w.setup.choices, w.setup.trace
    name = f"client{i}"
    rt = SimRuntime(name, choices, trace, offset_ms=w.world.rng.randrange(-5000, 5000), bugs=setup.bugs)
    store = SimObjectStore(
        MemoryStore(setup.bucket, rt.now_ms), choices.stream("store", name), trace, process=name, faults=w.faults
    )
    next_claim = 1
    while w.ops_left > 0:
        w.ops_left -= 1
        op = rt.rng.choice(["incr", "incr", "claim", "claim", "own", "own", "list", "sleep"])
        try:
            if op == "incr":
                got = await store.get("counter")
                new = str(int(got.data) + 1).encode()
                try:
                    await store.put("counter", new, PutMode.update_if_match(got.meta.etag))
                    w.acked_incr += 1
                except TransientObjectStoreError:
                    w.unknown_incr += 1
                except PreconditionFailedError:
                    pass
            elif op == "claim":
                # Through the engine's create_if_absent (as manifests and WAL objects are): it
                # retries ambiguous outcomes and reads the object back to tell ours apart.
                key = f"seq/{next_claim:020d}"
                if await create_if_absent(store, rt, key, name.encode()):
                    w.claims.setdefault(next_claim, []).append(name)
                next_claim += 1
            elif op == "own":
                await _own(w, rt, store, name)
            elif op == "list":
                metas = await store.list("seq/")
                keys = [m.key for m in metas]
                if keys != sorted(keys):
                    w.violations.append(Violation(f"{name} list not in key order: {keys}", "oracle", ORACLE))
            else:
                await rt.sleep(rt.rng.choice([0.001, 0.01, 0.5]))
        except TransientObjectStoreError:
            pass
    trace.record(name, "client.done")


async def _own(w: StoreWorld, rt: SimRuntime, store: SimObjectStore, name: str) -> None:
    key = f"private/{name}/k{rt.rng.randrange(4)}"
    possible = w.private_possible.setdefault(key, {None})
    action = rt.rng.choice(["put", "get", "delete"])
    if action == "put":
        value = rt.rng.randbytes(rt.rng.randrange(1, 64))
        try:
            await store.put(key, value, OVERWRITE)
            w.private_possible[key] = {value}
        except TransientObjectStoreError:
            possible.add(value)
    elif action == "delete":
        try:
            await store.delete(key)
            w.private_possible[key] = {None}
        except TransientObjectStoreError:
            possible.add(None)
    else:
        try:
            data: bytes | None = (await store.get(key)).data
        except ObjectNotFoundError:
            data = None
        if data not in possible:
            w.violations.append(Violation(f"{name} read {key}={data!r}, possible {possible!r}", "oracle", ORACLE))
        w.private_possible[key] = {data}


async def _clients(w: StoreWorld, nursery: trio.Nursery | None) -> None:
    assert nursery is not None
    for i in range(w.n_clients):
        nursery.start_soon(_client, w, i, name=f"client{i}")


def _oracle(w: StoreWorld, _failed: bool) -> list[Violation]:
    """On the final state (read directly, without faults): the counter within the acknowledged
    and ambiguous increments, one owner per claimed id, every private key a possible value."""
    violations = list(w.violations)
    final = int(w.seed_store.get_now("counter").data)
    if not (w.acked_incr <= final <= w.acked_incr + w.unknown_incr):
        violations.append(Violation(f"counter={final}, acked={w.acked_incr}, unknown={w.unknown_incr}", "oracle",
                                    ORACLE))
    for claim_id, winners in sorted(w.claims.items()):
        if len(winners) > 1:
            violations.append(Violation(f"seq id {claim_id} claimed by {winners}", "oracle", ORACLE))
        owner = w.seed_store.get_now(f"seq/{claim_id:020d}").data.decode()
        if winners and owner != winners[0]:
            violations.append(Violation(f"seq id {claim_id} acknowledged to {winners[0]} but holds {owner}", "oracle",
                                        ORACLE))
    return violations + private_values_violations(w.private_possible, w.seed_store)


def private_values_violations(private_possible: dict[str, set[bytes | None]], store: MemoryStore) -> list[Violation]:
    """Every private key holds one of its possible values at the end (read directly, no faults);
    the store workloads' shared oracle (``store``, ``store-bounded``)."""
    violations = []
    for key, possible in sorted(private_possible.items()):
        try:
            data: bytes | None = store.get_now(key).data
        except ObjectNotFoundError:
            data = None
        if data not in possible:
            violations.append(Violation(f"final {key}={data!r}, possible {possible!r}", "oracle", ORACLE))
    return violations


def fault_counts(setup: Setup, _world: object | None) -> dict[str, int]:
    """Injected faults by decision (``stall`` for a stall), from the trace: the store workloads'."""
    counts: dict[str, int] = {}
    for e in setup.trace.events:
        fields = e.f
        decision = "stall" if e.kind == "fault.stall" else fields.get("decision")
        if decision and decision != "ok":
            counts[decision] = counts.get(decision, 0) + 1
    return counts


SCENARIO = Scenario(
    "store", StoreWorld, _clients, nursery="join", oracles=_oracle, virtual_limit_s=None,
    figures=lambda w: {"ops": w.n_ops}, fault_counts=fault_counts,
    processes_declared=("client0..clientN",),
    fault_kinds=("transient", "ambiguous", "stall"))


def run_store_workload(seed: int, *, n_ops: int = 2000, n_clients: int = 6, faults: str = "swarm",
                       bugs: frozenset[str] = frozenset(), choices: Choices | None = None) -> WorldResult:
    """Run the workload for ``seed`` on a fresh virtual clock with seeded scheduling.

    ``faults`` is ``"swarm"`` (a random subset of faults per seed), ``"all"`` or ``"none"``;
    ``bugs`` switches on catalogued bugs (``sim bugs``) in every client; every random choice
    comes from ``choices`` (default: generated from ``seed``).
    """
    return run_world(SCENARIO, seed, choices=choices, bugs=bugs, faults=faults, n_ops=n_ops, n_clients=n_clients)
