"""``sim hunt``: run a catalogued bug's seeds (:mod:`sim.scenarios.catalogue`) until one fails,
and report which invariant fired, how fast, and (for the ledger) every seed that ran."""

from __future__ import annotations

import concurrent.futures

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.scenarios.catalogue import BY_NAME, fired, replay_command, run
from sim.world import probes as probes_mod
from sim.world.harness import skipping_checks


@attrs.frozen
class HuntResult:
    """What ``sim hunt`` reports for one entry."""

    bug: str
    workload: str
    seeds_run: int  # seeds 0..seeds_run-1 ran: up to the detecting one (all of them with ``rate``)
    detected_seed: int | None  # the lowest failing seed
    invariant: str  # what fired at the detecting seed ("-" when undetected)
    expected: bool  # that is one of the entry's invariants
    wall_s: float  # wall time from the start of the hunt to the detecting seed's verdict
    violation: str = ""
    detections: int | None = None  # with ``rate``: how many of the seeds failed
    # For the campaign ledger (sim/campaign/ledger.py): every seed that ran.
    failing_seeds: tuple[int, ...] = ()
    faults: dict = attrs.field(factory=dict)  # fault kind -> injected, summed over the seeds run
    virtual_s: float = 0.0
    total_wall_s: float = 0.0
    probe_seeds: dict = attrs.field(factory=dict)  # coverage probe -> seeds of the hunt that hit it
    skipped: tuple[str, ...] = ()  # invariant ids whose checks were left out (``--skip-check``)
    skipped_seeds: dict = attrs.field(factory=dict)  # left-out id -> seeds in which it would have fired

    @property
    def replay(self) -> str:
        return replay_command(self.workload, self.detected_seed if self.detected_seed is not None else 0, [self.bug],
                              self.skipped)


_WALL = ProductionRuntime("sim-bugs")  # wall time is reported, never fed into a run


def _hunt_one(args: tuple[str, int, str, tuple[str, ...]]):
    workload, seed, bug, skip = args
    with probes_mod.counting() as hits, skipping_checks(skip):
        result = run(workload, seed, [bug])
    return (seed, result.ok, fired(result), (result.violations[0] if result.violations else ""),
            dict(result.faults), float(result.virtual_s), tuple(sorted(k for k, v in hits.items() if v)),
            tuple(sorted(result.skipped)))


def _verdicts(work: list[tuple[str, int, str]], jobs: int):
    """``_hunt_one`` of every item, yielded in order; with ``jobs > 1`` computed in worker
    processes at most ``2 * jobs`` ahead, so that a consumer that stops early wastes little."""
    if jobs <= 1:
        for args in work:
            yield _hunt_one(args)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        pending: dict[int, concurrent.futures.Future] = {}
        submitted = 0
        try:
            for i in range(len(work)):
                while submitted < len(work) and len(pending) < 2 * jobs:
                    pending[submitted] = pool.submit(_hunt_one, work[submitted])
                    submitted += 1
                yield pending.pop(i).result()
        finally:
            for f in pending.values():
                f.cancel()


def hunt(name: str, seeds: int | None = None, *, jobs: int = 1, workload: str | None = None,
         rate: bool = False, skip: tuple[str, ...] = ()) -> HuntResult:
    """Run seeds 0..seeds-1 (default: the entry's budget) of the entry's workload (or
    ``workload``) with the bug on, in seed order, until one fails; with ``rate``, run them all
    and count the failures too. Parallel runs (``jobs``) give the same answer. ``skip``:
    invariant ids whose checks are left out (:func:`sim.world.harness.skipping_checks`), to
    measure which other oracle catches the bug; the result counts the seeds in which each would
    have fired."""
    bug = BY_NAME[name]
    skip = tuple(sorted(set(skip)))
    with skipping_checks(skip):
        pass  # refuses an unknown id before any seed runs
    workload = workload or bug.workload
    n = bug.budget if seeds is None else seeds
    start = _WALL.monotonic_s()
    first: tuple[int, str, str, float] | None = None
    detections = 0
    ran = 0
    failing: list[int] = []
    faults: dict[str, int] = {}
    virtual_s = 0.0
    probe_seeds: dict[str, int] = {}
    skipped_seeds: dict[str, int] = {}
    work = [(workload, s, name, skip) for s in range(n)]
    for seed, ok, inv, violation, seed_faults, seed_virtual_s, hit, would in _verdicts(work, jobs):
        ran += 1
        for i in would:
            skipped_seeds[i] = skipped_seeds.get(i, 0) + 1
        virtual_s += seed_virtual_s
        for p in hit:
            probe_seeds[p] = probe_seeds.get(p, 0) + 1
        for k, v in seed_faults.items():
            faults[k] = faults.get(k, 0) + int(v)
        if ok:
            continue
        failing.append(seed)
        detections += 1
        if first is None:
            first = (seed, inv, violation, _WALL.monotonic_s() - start)
            if not rate:
                break
    ledger = {"failing_seeds": tuple(failing), "faults": faults, "virtual_s": virtual_s,
              "total_wall_s": _WALL.monotonic_s() - start, "probe_seeds": probe_seeds,
              "skipped": skip, "skipped_seeds": skipped_seeds}
    if first is None:
        return HuntResult(name, workload, ran, None, "-", False, _WALL.monotonic_s() - start,
                          detections=0 if rate else None, **ledger)
    seed, inv, violation, wall_s = first
    return HuntResult(name, workload, ran if rate else seed + 1, seed, inv, inv in bug.invariants, wall_s,
                      violation, detections=detections if rate else None, **ledger)
