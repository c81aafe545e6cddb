"""What the ``load`` scenario's plain and sharded loads share (``sim/scenarios/load.py``,
``sim/scenarios/load_sharded.py``): the world's store of ``memory://sim``, a process's runtime
and store, a partition's draws, one task attempt run under a crash plan, the picked attempt's
result, and the operator's abort after a driver crash. Every draw is made where, and in the
order, the two drivers made it before they shared this code: the seeds' traces are unchanged."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import attrs
import trio

from sim.checks.load import Load
from sim.world.choices import boolean
from sim.world.engine import Crash, crashable
from sim.world.rooted import RootedStore
from sim.world.runtime import SimRuntime
from sim.world.store import SimObjectStore


class WorldStore(SimObjectStore):
    """A ``load`` world process's store of ``memory://sim``; ``open_url`` (a sharded load's shard,
    ``memory://sim/shards/...``) stays in the world's bucket with the same faults, its trace keys
    carrying the shard's root (:class:`sim.world.rooted.RootedStore`), never in the process-wide
    memory registry."""

    def __init__(self, world: Any, inner: Any, rt: SimRuntime, process: str) -> None:
        setup = world.setup
        super().__init__(inner, setup.choices.stream("store", process), setup.trace, process=process,
                         faults=world.faults)
        self._roots = _Roots(setup.bucket, setup.choices, setup.trace, world.faults, rt.now_ms)

    def open_url(self, url: str) -> Any:
        return RootedStore(self._roots, self.process, url)


@attrs.define
class _Roots:
    """What :class:`sim.world.rooted.RootedStore` needs of a world."""

    bucket: Any
    choices: Any
    trace: Any
    faults: Any
    clock: Any
    healed: bool = False
    stores: list = attrs.Factory(list)

    def clock_of(self, _process: str) -> Any:
        return self.clock

    def store(self, process: str, url: str) -> Any:
        return RootedStore(self, process, url)


#: ``store_of(world, process name, runtime)``: the process's store (``load.py`` ``_store``).
StoreOf = Callable[[Any, str, SimRuntime], Any]


def process_io(world: Any, name: str, store_of: StoreOf) -> tuple[SimRuntime, Any]:
    """The runtime and store of process ``name``."""
    setup = world.setup
    rt = SimRuntime(name, setup.choices, setup.trace, bugs=setup.bugs)
    return rt, store_of(world, name, rt)


def partition_draws(world: Any, load: Load, p: int, keys: list, shapes: list[str]) -> tuple[Any, str, set]:
    """Partition ``p``'s stream, its attempts' shape (one of ``shapes``) and the keys it deletes."""
    rng = world.setup.choices.stream("task", f"{load.name}.p{p}")
    shape = rng.choice(shapes)
    return rng, shape, {k for k in keys if boolean(rng, 0.15)}


async def run_attempt(world: Any, load: Load, p: int, a: int, keys: list, deletes: set, kill_s: float | None,
                      store_of: StoreOf, stage: Callable[[Any, SimRuntime, int, list], Awaitable[Any]]) -> Any:
    """Attempt ``a`` of partition ``p``: its values (``None``: a delete), staged by ``stage(store,
    rt, a, values)`` (its result, or ``None``: the attempt found the load ended) under a crash
    at ``kill_s``. Returns ``(result, values)``, or ``None`` when it crashed or found the end."""
    name = f"{load.name}.p{p}.a{a}"
    rt, store = process_io(world, name, store_of)
    vals = [None if k in deletes else b"%s.p%d.a%d:%s" % (load.name.encode(), p, a, k) for k in keys]
    load.attempt_values.update(v for v in vals if v is not None)
    out: list = []

    async def body() -> str:
        res = await stage(store, rt, a, vals)
        if res is None:
            return "ended"
        out.append(res)
        return "staged"

    got = await crashable(world, name, store, Crash(kill_s) if kill_s is not None else None, body)
    return (out[0], vals) if got == "staged" else None


def take(picked: Any, p: int, keys: list, results: list, rows: dict) -> None:
    """The picked attempt's result goes to the commit, its rows to the oracle."""
    if picked is not None:
        res, vals = picked
        results[p] = res
        rows.update(zip(keys, vals))


async def operator_abort(world: Any, load: Load, rng: Any, store_of: StoreOf,
                         abort: Callable[[Any, SimRuntime], Awaitable[Any]]) -> None:
    """After a driver crash, an operator (``<load>.abort``) ends the load a moment later."""
    rt, store = process_io(world, f"{load.name}.abort", store_of)
    await trio.sleep(rng.uniform(0.0, 0.5))
    await abort(store, rt)
    load.ended = True
