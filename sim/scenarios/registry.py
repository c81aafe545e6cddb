"""The one table of simulator scenarios: each registered once, with its metadata.

A scenario is a declared world (``SCENARIO``, a :class:`sim.world.harness.Scenario`) and a
``run(seed, *, bugs=frozenset(), choices=None, ...)`` function that is
``run_world(SCENARIO, ...)``: one :class:`sim.world.harness.WorldResult` with ``ok``,
``violations`` (:class:`sim.world.invariants.Violation`), ``digest``, ``events``, ``virtual_s``,
``faults`` and the scenario's figures. Every random choice it makes comes from ``choices``
(:mod:`sim.world.choices`; default generated from the seed), which is what makes it replayable
from a saved sequence and shrinkable by ``sim shrink`` with no shrink points of its own.

Registering one line here makes a scenario runnable (``sim run``), sweepable (``sim sweep``,
``sim dst``, ``--workload all``), huntable (``sim hunt``) and shrinkable (``sim shrink``); its
catalogue entries name it in ``sim/scenarios/catalogue.py``. Functions are imported lazily: the catalogue and
the CLI read this table without running anything.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

import attrs


@attrs.frozen
class ScenarioSpec:
    """One scenario: ``name`` (``--workload``), ``runner`` (``module:function``), a one-line
    ``description`` (what runs, which invariants watch), ``takes_faults`` (its function takes
    ``faults="swarm" | "none"``), ``takes_size`` (``n_ops``/``n_clients``: the store's) and
    ``cost_s``, the CPU seconds one seed costs on an idle core: measured on 2 idle cores of this
    project's machine (load below 1.4), seeds 0..39 of each scenario one after another in one
    process, ``time.process_time`` per seed (2026-11-26, 0e638e5; the command and table are in
    ``docs/simulation.md``, "Per-scenario speed"). gc, compactor, compactor-workers and rescale
    hold that figure divided by the speed-up of the eighth session's simulator work (f08de8d..c464b05,
    side by side with main without it, seeds 0..9, under load; same section), and gc, compactor and
    compactor-workers then by the tenth session's (5d4e0c7..baa897d: its instruction counts, the
    machine being loaded; same section). Earlier tables were
    measured under load and were 2 to 5 times too high. ``sim dst``'s seed
    plans follow from it, ``sim mutate`` balances its judge's seeds by it; re-measure when a
    scenario's traces or the engine's speed change."""

    name: str
    runner: str
    description: str
    takes_faults: bool = False
    takes_size: bool = False
    cost_s: float = 1.0

    def function(self) -> Callable[..., Any]:
        module, _, fn = self.runner.partition(":")
        return getattr(importlib.import_module(module), fn)

    def run(self, seed: int, *, bugs: frozenset[str] = frozenset(), choices: Any = None, faults: str = "swarm",
            ops: int = 2000, clients: int = 6) -> Any:
        kwargs: dict[str, Any] = {"bugs": frozenset(bugs)}
        if choices is not None:
            kwargs["choices"] = choices
        if self.takes_size:
            kwargs.update(n_ops=ops, n_clients=clients, faults=faults)
        elif self.takes_faults and faults == "none":
            kwargs["faults"] = "none"
        return self.function()(seed, **kwargs)


SCENARIOS: tuple[ScenarioSpec, ...] = (
    ScenarioSpec("db", "sim.scenarios.db:run_db_workload",
                 "db-workload (three writers fencing each other; FENCE-*, DUR-1, BOUNDARY-3, LIN)", takes_faults=True,
                 cost_s=0.094),
    ScenarioSpec("takeover", "sim.scenarios.takeover:run_takeover_workload",
                 "takeover (rounds of four writers, crash and pause points at protocol events; FENCE-*, DUR-1)",
                 cost_s=0.091),
    ScenarioSpec("seqmeta", "sim.scenarios.seqmeta:run_seqmeta_workload",
                 "seqmeta (stalled metadata writers vs a GC boundary, RFC 004; SEQMETA-1/2, BOUNDARY-1)",
                 cost_s=0.048),
    ScenarioSpec("store", "sim.scenarios.store:run_store_workload",
                 "store-workload (object-store CAS, claims, private keys)", takes_faults=True, takes_size=True,
                 cost_s=0.096),
    ScenarioSpec("store-bounded", "sim.scenarios.store_bounded:run_store_bounded",
                 "store-bounded (store calls under the production retry policy, 0-5 retries, frequent faults; RETRY-1)",
                 takes_faults=True, cost_s=0.037),
    ScenarioSpec("compactor", "sim.scenarios.compactor:run_compactor_workload",
                 "compactor (writer, fencing compactors, crashes, admin submissions; CFENCE-*, COMPACT-*, RESUME-*)",
                 takes_faults=True, cost_s=0.286),
    ScenarioSpec("compactor-workers", "sim.scenarios.compactor_workers:run_compactor_workers",
                 "compactor-workers (coordinators and 2-4 separate workers that crash, stall, lose their heartbeat and "
                 "return late; COMPACT-5/6/9, CFENCE-*, RESUME-*)", takes_faults=True, cost_s=0.317),
    ScenarioSpec("gc", "sim.scenarios.gc:run_gc_workload",
                 "gc (aggressive GC, checkpoints, readers, a clone, freezes, crashes; GC-*, CKPT-*, READ-*, "
                 "BOUNDARY-1/2, CLONE-1..4)", takes_faults=True, cost_s=0.412),
    ScenarioSpec("destroy", "sim.scenarios.destroy:run_destroy_workload",
                 "destroy (soft and hard destroys racing a writer, a reader, checkpoints, a clone and GC; DESTROY-1..6)",
                 takes_faults=True, cost_s=0.087),
    ScenarioSpec("rescale", "sim.scenarios.rescale:run_rescale_workload",
                 "rescale (split by projection, shard writers, merge by union, GC everywhere, crashes of the "
                 "rescaler; PROJ-*, READ-3, CLONE-1/2)", takes_faults=True, cost_s=0.292),
    ScenarioSpec("txn", "sim.scenarios.txn:run_txn_workload",
                 "txn (concurrent SNAPSHOT / SERIALIZABLE_SNAPSHOT transactions and plain writes, flushes, "
                 "crashes, writer takeovers; history checked: TXN-1..5, FENCE-*, DUR-1)", cost_s=0.038),
    ScenarioSpec("load", "sim.scenarios.load:run_load_workload",
                 "load (bulk loads staged by task attempts, killed, retried or speculative, committed into a live "
                 "writer's database, or a sharded load racing the writer for the URL, drivers crashing; "
                 "LOAD-1/4/5/6/7/10, DUR-1, FENCE-*)", cost_s=0.039),
)

BY_NAME: dict[str, ScenarioSpec] = {s.name: s for s in SCENARIOS}
assert len(BY_NAME) == len(SCENARIOS), "duplicate scenario names"
