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

import attrs
import trio

from slatedb.errors import (
    ObjectNotFoundError,
    PreconditionFailedError,
    TransientObjectStoreError,
)
from slatedb.objstore import CREATE_IF_ABSENT, OVERWRITE, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.objstore.retry import create_if_absent

from sim.world.invariants import ORACLE, Violation
from sim.world.store import SimObjectStore, StoreFaults
from sim.world.choices import Choices
from sim.world.runtime import SimRuntime, run_deterministic
from sim.world.trace import Trace


@attrs.frozen
class StoreRunResult:
    seed: int
    digest: str
    ops: int
    events: int
    virtual_s: float
    faults: dict[str, int]
    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


async def _workload(seed: int, choices: Choices, n_ops: int, n_clients: int, faults_mode: str,
                    bugs: frozenset[str]) -> StoreRunResult:
    trace = Trace(trio.current_time)
    bucket = MemoryBucket()
    world = SimRuntime("world", choices, trace)
    fault_rng = choices.stream("faults")
    faults = {
        "swarm": lambda: StoreFaults.swarm(fault_rng),
        "all": lambda: StoreFaults(0.0005, 0.05, 0.05, 0.05, 0.01, 120.0),
        "none": StoreFaults,
    }[faults_mode]()
    trace.record("world", "faults", config=repr(faults))

    acked_incr = 0
    unknown_incr = 0
    claims: dict[int, list[str]] = {}
    private_possible: dict[str, set[bytes | None]] = {}
    violations: list[str] = []
    shape = choices.stream("shape")  # the seed's world is the full one; a shrunk one may be smaller
    n_clients = shape.count(1, n_clients)
    ops_left = [shape.count(1, n_ops)]

    async def client(i: int) -> None:
        nonlocal acked_incr, unknown_incr
        name = f"client{i}"
        rt = SimRuntime(name, choices, trace, offset_ms=world.rng.randrange(-5000, 5000), bugs=bugs)
        store = SimObjectStore(
            MemoryStore(bucket, rt.now_ms), choices.stream("store", name), trace, process=name, faults=faults
        )
        next_claim = 1
        while ops_left[0] > 0:
            ops_left[0] -= 1
            op = rt.rng.choice(["incr", "incr", "claim", "claim", "own", "own", "list", "sleep"])
            try:
                if op == "incr":
                    got = await store.get("counter")
                    new = str(int(got.data) + 1).encode()
                    try:
                        await store.put("counter", new, PutMode.update_if_match(got.meta.etag))
                        acked_incr += 1
                    except TransientObjectStoreError:
                        unknown_incr += 1
                    except PreconditionFailedError:
                        pass
                elif op == "claim":
                    # Through the engine's create_if_absent (as manifests and WAL objects are): it
                    # retries ambiguous outcomes and reads the object back to tell ours apart.
                    key = f"seq/{next_claim:020d}"
                    if await create_if_absent(store, rt, key, name.encode()):
                        claims.setdefault(next_claim, []).append(name)
                    next_claim += 1
                elif op == "own":
                    key = f"private/{name}/k{rt.rng.randrange(4)}"
                    possible = private_possible.setdefault(key, {None})
                    action = rt.rng.choice(["put", "get", "delete"])
                    if action == "put":
                        value = rt.rng.randbytes(rt.rng.randrange(1, 64))
                        try:
                            await store.put(key, value, OVERWRITE)
                            private_possible[key] = {value}
                        except TransientObjectStoreError:
                            possible.add(value)
                    elif action == "delete":
                        try:
                            await store.delete(key)
                            private_possible[key] = {None}
                        except TransientObjectStoreError:
                            possible.add(None)
                    else:
                        try:
                            data: bytes | None = (await store.get(key)).data
                        except ObjectNotFoundError:
                            data = None
                        if data not in possible:
                            violations.append(Violation(f"{name} read {key}={data!r}, possible {possible!r}", "oracle", ORACLE))
                        private_possible[key] = {data}
                elif op == "list":
                    metas = await store.list("seq/")
                    keys = [m.key for m in metas]
                    if keys != sorted(keys):
                        violations.append(Violation(f"{name} list not in key order: {keys}", "oracle", ORACLE))
                else:
                    await rt.sleep(rt.rng.choice([0.001, 0.01, 0.5]))
            except TransientObjectStoreError:
                pass
        trace.record(name, "client.done")

    seed_store = MemoryStore(bucket, world.now_ms)
    seed_store.put_now("counter", b"0", CREATE_IF_ABSENT)
    async with trio.open_nursery() as nursery:
        for i in range(n_clients):
            nursery.start_soon(client, i, name=f"client{i}")

    # Oracle, on the final state (read directly, without faults).
    final = int(seed_store.get_now("counter").data)
    if not (acked_incr <= final <= acked_incr + unknown_incr):
        violations.append(Violation(f"counter={final}, acked={acked_incr}, unknown={unknown_incr}", "oracle", ORACLE))
    for claim_id, winners in sorted(claims.items()):
        if len(winners) > 1:
            violations.append(Violation(f"seq id {claim_id} claimed by {winners}", "oracle", ORACLE))
        owner = seed_store.get_now(f"seq/{claim_id:020d}").data.decode()
        if winners and owner != winners[0]:
            violations.append(Violation(f"seq id {claim_id} acknowledged to {winners[0]} but holds {owner}", "oracle", ORACLE))
    for key, possible in sorted(private_possible.items()):
        try:
            data: bytes | None = seed_store.get_now(key).data
        except ObjectNotFoundError:
            data = None
        if data not in possible:
            violations.append(Violation(f"final {key}={data!r}, possible {possible!r}", "oracle", ORACLE))

    counts: dict[str, int] = {}
    for e in trace.events:
        fields = dict(e.fields)
        decision = "stall" if e.kind == "fault.stall" else fields.get("decision")
        if decision and decision != "ok":
            counts[decision] = counts.get(decision, 0) + 1
    return StoreRunResult(
        seed, trace.digest(), n_ops, len(trace), trio.current_time(), counts, tuple(violations)
    )


def run_store_workload(seed: int, *, n_ops: int = 2000, n_clients: int = 6, faults: str = "swarm",
                       bugs: frozenset[str] = frozenset(), choices: Choices | None = None) -> StoreRunResult:
    """Run the workload for ``seed`` on a fresh virtual clock with seeded scheduling.

    ``faults`` is ``"swarm"`` (a random subset of faults per seed), ``"all"`` or ``"none"``;
    ``bugs`` switches on catalogued bugs (``sim bugs``) in every client; every random choice
    comes from ``choices`` (default: generated from ``seed``).
    """
    assert faults in ("swarm", "all", "none"), faults
    choices = Choices(seed) if choices is None else choices
    return run_deterministic(_workload, seed, choices, n_ops, n_clients, faults, frozenset(bugs), seed=choices)
