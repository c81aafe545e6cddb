"""A simulated world of writers taking over one database on a faulty store.

Three writer processes share one simulated object store (latency, transient errors, ambiguous
outcomes, stalls -- a swarm mix per seed). In some seeds writers also crash at a random moment
(wherever they are: mid-flush, mid-manifest-update; memory lost, requests on the wire still
land) and restart. Writer ``w1`` writes, waiting for durability now and
then; at random virtual times ``w2`` and then ``w3`` open the same database, each fencing its
predecessor, and keep writing. Zombies keep trying until they learn they were fenced.

Checked on every run:

* the trace invariants of :class:`sim.checks.WriterChecks` (FENCE-1/3/4, DUR-1, BOUNDARY-3);
* durability, end to end: every write acknowledged durable by any writer is readable, with
  that value or a newer one of the same key, by a final writer opened after everything.
"""

from __future__ import annotations

import attrs
import trio

import slatedb.aio as aio
from slatedb.errors import ClosedError, FencedError, SlateDBError
from slatedb.objstore.memory import MemoryBucket, MemoryStore

from .checks import WriterChecks
from .objstore import ProcessCrashed, SimObjectStore, StoreFaults
from .runtime import SimRuntime, derive_rng, run_deterministic
from .trace import Trace

#: A run that has not finished after this much virtual time is reported as stuck (liveness).
VIRTUAL_LIMIT_S = 6 * 3600

SETTINGS = {
    "l0_sst_size_bytes": 2048,
    "flush_interval": "20ms",
    "manifest_poll_interval": "300ms",
    "min_filter_keys": 8,
    "l0_max_ssts": 64,
}


@attrs.frozen
class DbWorkloadResult:
    """Same fields as ``StoreRunResult`` (the CLI reports both), plus the writer outcomes."""

    seed: int
    ok: bool
    digest: str
    events: int
    virtual_s: float
    faults: dict
    violations: tuple[str, ...]
    acked: int = 0
    fenced: int = 0
    last_events: str = ""


async def _writer(name: str, seed: int, trace: Trace, bucket: MemoryBucket, faults: StoreFaults,
                  n_writes: int, acked: dict, written: dict, crash_after_s: float | None,
                  bugs: frozenset[str] = frozenset()) -> str:
    """One writer process: open, write ``n_writes`` keys, close. With ``crash_after_s`` the
    process dies at that virtual time wherever it is (memory lost, nothing flushed) and is
    restarted once under the name ``<name>.r``, which reopens the database and goes on."""
    rt = SimRuntime(name, seed, trace, bugs=bugs)
    rng = derive_rng(seed, "workload", name)
    inner = MemoryStore(bucket, rt.now_ms, url="memory://sim")
    store = SimObjectStore(inner, derive_rng(seed, "store", name), trace, process=name, faults=faults)
    done = 0

    async def body() -> str:
        nonlocal done
        async with aio.Db.open("memory://sim", SETTINGS, store=store, runtime=rt) as db:
            for i in range(n_writes):
                key = b"k%03d" % rng.randrange(200)
                value = b"%s:%d" % (name.encode(), i)
                durable = rng.random() < 0.2
                h = await db.put(key, value)
                written[value] = h.seq  # before any wait: a crash may leave it durable anyway
                if durable:
                    await h.wait_durable()
                    acked[(name, h.seq)] = (key, value)
                done = i + 1
                if rng.random() < 0.3:
                    await rt.sleep(rng.uniform(0, 0.05))
        return "closed"

    with trio.CancelScope() as life:
        async with trio.open_nursery() as nursery:
            if crash_after_s is not None:

                async def crasher() -> None:
                    await trio.sleep(crash_after_s)
                    store.crash()
                    life.cancel()

                nursery.start_soon(crasher)
            try:
                outcome = await body()
            except* (FencedError, ClosedError):
                outcome = "fenced"
            except* ProcessCrashed:
                outcome = "crashed"
            nursery.cancel_scope.cancel()
        return outcome
    # Cancelled by the crasher: the process is dead. Restart it once.
    if not store.crashed:  # pragma: no cover - only the crasher cancels ``life``
        raise AssertionError("writer cancelled without a crash")
    return "crashed:" + await _writer(name + ".r", seed, trace, bucket, faults, max(1, n_writes - done),
                                      acked, written, None, bugs)


def run_db_workload(seed: int, *, faults: str = "swarm", bugs: frozenset[str] = frozenset()) -> DbWorkloadResult:
    """Run one world; a violated invariant or a lost write is reported in the result.

    ``bugs`` switches on catalogued bugs in every process of the world (``sim bugs``)."""
    trace = Trace(trio.current_time)
    checks = WriterChecks().attach(trace)
    try:
        return run_deterministic(_world, seed, faults, trace, checks, frozenset(bugs), seed=seed)
    except (AssertionError, SlateDBError) as e:
        return DbWorkloadResult(seed, False, trace.digest(), len(trace), trace.events[-1].time_s if trace.events else 0.0,
                                _fault_counts(checks), (f"{type(e).__name__}: {e}",), last_events=trace.render(last=30))
    except BaseExceptionGroup as group:
        errors = [e for e in _leaves(group)]
        return DbWorkloadResult(seed, False, trace.digest(), len(trace), trace.events[-1].time_s if trace.events else 0.0,
                                _fault_counts(checks), tuple(f"{type(e).__name__}: {e}" for e in errors),
                                last_events=trace.render(last=30))


def _leaves(group: BaseExceptionGroup):
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _fault_counts(checks: WriterChecks) -> dict:
    return {k: checks.counts[k] for k in ("fault.transient", "store.reply-lost", "fault.stall", "crash") if checks.counts[k]}


async def _world(seed: int, faults: str, trace: Trace, checks: WriterChecks, bugs: frozenset[str]) -> DbWorkloadResult:
    rng = derive_rng(seed, "world")
    store_faults = StoreFaults.swarm(rng) if faults == "swarm" else StoreFaults()
    crash_rate = rng.choice([0.0, 0.5, 1.0]) if faults == "swarm" else 0.0  # swarm: crashes on or off
    bucket = MemoryBucket()
    acked: dict = {}  # (writer, seq) -> (key, value) of writes acknowledged durable
    written: dict[bytes, int] = {}  # value -> seq of every write (values are unique)
    outcomes: dict[str, str] = {}

    async def run(name: str, delay_s: float, n: int) -> None:
        await trio.sleep(delay_s)
        crash_after = rng.uniform(0.05, 3.0) if rng.random() < crash_rate else None
        outcomes[name] = await _writer(name, seed, trace, bucket, store_faults, n, acked, written, crash_after, bugs)

    with trio.move_on_after(VIRTUAL_LIMIT_S) as limit:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "w1", 0.0, 400)
            nursery.start_soon(run, "w2", rng.uniform(0.05, 2.0), 200)
            nursery.start_soon(run, "w3", rng.uniform(1.0, 4.0), 200)
    # Liveness: with faults healed by retries, every writer finishes or learns it was fenced.
    assert not limit.cancelled_caught, f"liveness: writers still running after {VIRTUAL_LIMIT_S} virtual s"
    # Every acknowledged-durable write must be readable by a last writer: its own value, or the
    # value of a write of the same key with a higher seq (superseded, never rolled back).
    final_rt = SimRuntime("final", seed, trace)
    inner = MemoryStore(bucket, final_rt.now_ms, url="memory://sim")
    async with aio.Db.open("memory://sim", SETTINGS, store=inner, runtime=final_rt) as db:
        for (_name, seq), (key, value) in acked.items():
            got = await db.get(key)
            assert got is not None, f"DUR-1: acknowledged durable write {value!r} of {key!r} (seq {seq}) lost"
            assert got == value or written.get(got, -1) > seq, (
                f"DUR-1: {key!r} holds {got!r} (seq {written.get(got)}), older than acknowledged {value!r} (seq {seq})")
    fenced = sum(1 for o in outcomes.values() if o.endswith("fenced"))
    return DbWorkloadResult(seed, True, trace.digest(), len(trace), trio.current_time(), _fault_counts(checks), (),
                            acked=len(acked), fenced=fenced)
