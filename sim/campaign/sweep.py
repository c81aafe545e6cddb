"""Sweeps: many seeds of one scenario, one result row per seed, and a campaign summary.

``sim dst`` and ``sim sweep`` share this module. A :class:`Scenario` is everything a run depends
on except its seed; :func:`run_seed` runs one seed of it and returns a plain row (the JSON line
of ``--out`` and the Parquet row of the Spark engine), never raising. The local engine
(:func:`sweep_local`) fans the seeds out to worker processes; the Spark engine
(:mod:`sim.campaign.spark_engine`) runs the same :func:`run_seed` as Spark tasks, so both engines give the
same verdict and trace digest for every seed. :func:`summarize` and :func:`format_summary` make the
summary table both print; :func:`bench` measures time compression on one core (``sim bench``).

Wall time is only reported, never fed into a run: it is read through the production runtime,
the one module that owns the real clock.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import os
import signal
import statistics
import sys
import threading
from collections import Counter
from typing import IO, Any, Callable, Iterable, Iterator, Sequence

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.scenarios import catalogue as bugs_mod
from sim.world import probes as probes_mod
from sim.scenarios import registry as scenarios_mod
from sim.world import harness, invariants
from sim.world.invariants import Violation, as_violation

_WALL = ProductionRuntime("sim-sweep")

#: Every scenario a sweep can run: the one table's (:data:`sim.scenarios.registry.BY_NAME`, the same dict,
#: so a scenario registered there is sweepable at once).
WORKLOADS = scenarios_mod.BY_NAME

#: Time compression the simulator aims for on one core (virtual seconds per wall second).
TARGET_COMPRESSION = 1000.0

#: One line per scenario (:mod:`sim.scenarios.registry`), for summaries.
DESCRIPTIONS = {s.name: s.description for s in scenarios_mod.SCENARIOS}

#: The fields of one result row, in order (JSON lines and the Parquet schema).
ROW_FIELDS = ("seed", "workload", "ok", "digest", "events", "virtual_s", "faults", "violations",
              "invariants", "wall_s", "replay", "probes")


#: Wall seconds one seed of a campaign may run before :func:`run_seed` stops it and reports it
#: failed (liveness), naming the seed: a world that loops in virtual time (load seeds 388 and 567
#: once kept the default plan running for ever) costs a campaign this much, not the run. The
#: slowest scenario's seeds take a few seconds on an idle core: generous, so that only a loop
#: trips it, even on a loaded machine. ``--seed-limit-s`` (``sim dst``, ``sim sweep``) sets it;
#: 0 turns it off.
SEED_WALL_LIMIT_S = 300.0


def taking_faults(faults: str) -> list[str]:
    """The scenarios that run in faults mode ``faults``: every one in the swarm; ``none`` those
    whose faults can be switched off (``takes_faults``) and the store's; ``all`` the store's alone
    (the others' faults are their own)."""
    if faults == "swarm":
        return list(WORKLOADS)
    return [w for w, spec in WORKLOADS.items() if spec.takes_size or (faults == "none" and spec.takes_faults)]


@attrs.frozen
class Scenario:
    """What a run depends on besides its seed. ``ops`` and ``clients`` apply to ``store`` only,
    ``faults`` to ``store``, ``db`` and ``compactor``; ``bugs`` (catalogued bugs switched on in
    every process) to every scenario. ``seed_limit_s`` is the campaign's guard
    (:data:`SEED_WALL_LIMIT_S`), not part of the run: it takes no part in equality."""

    workload: str = "store"
    ops: int = 2000
    clients: int = 6
    faults: str = "swarm"
    bugs: tuple[str, ...] = attrs.field(default=(), converter=lambda b: tuple(sorted(set(b or ()))))
    seed_limit_s: float = attrs.field(default=SEED_WALL_LIMIT_S, eq=False)

    def __attrs_post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {self.workload!r} (one of {', '.join(WORKLOADS)})")
        if self.faults not in ("swarm", "all", "none"):
            raise ValueError(f"unknown faults mode {self.faults!r}")
        # A mode the scenario does not take was silently the swarm (takeover --faults none injected
        # its hundreds of faults, its replay command saying --faults none).
        takes = taking_faults(self.faults)
        if self.workload not in takes:
            raise ValueError(f"--faults {self.faults}: the {self.workload} scenario has no such mode, its faults are "
                             f"its own (--faults {self.faults} is for {', '.join(takes)})")

    def replay(self, seed: int) -> str:
        """The one command that replays ``seed`` of this scenario exactly."""
        cmd = f"./just sim run --seed {seed} --workload {self.workload}"
        if self.workload == "store":
            cmd += f" --ops {self.ops} --clients {self.clients}"
        if self.faults != "swarm":
            cmd += f" --faults {self.faults}"
        for bug in self.bugs:
            cmd += f" --bug {bug}"
        return cmd

    def describe(self) -> str:
        text = DESCRIPTIONS.get(self.workload, self.workload)
        if self.faults != "swarm":
            text += f", faults {self.faults}"
        if self.bugs:
            text += f", bugs {', '.join(self.bugs)}"
        return text


def parse_seeds(text: str) -> range:
    """``N`` (seeds 0..N-1) or ``A..B`` (inclusive)."""
    try:
        if ".." in text:
            lo, hi = text.split("..", 1)
            seeds = range(int(lo), int(hi) + 1)
        else:
            seeds = range(int(text))
    except ValueError:
        raise ValueError(f"bad seed range {text!r}: expected N or A..B") from None
    if not seeds:
        raise ValueError(f"empty seed range {text!r}")
    return seeds


def simulate(scenario: Scenario, seed: int, choices: Any = None) -> tuple[Any, float]:
    """Run one seed; its :class:`sim.world.harness.WorldResult` and
    the wall seconds it took. ``choices`` (:class:`sim.world.choices.Choices`) replays an edited or
    saved choice sequence instead of generating the seed's own."""
    start = _WALL.monotonic_s()
    unknown = set(scenario.bugs) - bugs_mod.BY_NAME.keys()
    if unknown:
        raise ValueError(f"unknown bug(s) {sorted(unknown)}; see `sim bugs`")
    result = scenarios_mod.BY_NAME[scenario.workload].run(
        seed, bugs=frozenset(scenario.bugs), choices=choices, faults=scenario.faults, ops=scenario.ops,
        clients=scenario.clients)
    return result, _WALL.monotonic_s() - start


class SeedOverWallLimit(BaseException):
    """A seed ran past its wall limit (:func:`wall_limit`). A ``BaseException``, so that no
    ``except Exception`` of the code under test takes it for one of its own errors."""


@contextlib.contextmanager
def wall_limit(seconds: float | None) -> Iterator[list[bool]]:
    """Stop the code run inside the block once it has run ``seconds`` wall seconds, and again
    every second until it ends; yields a list whose one item tells whether the limit passed. A
    simulated world is stopped from inside its run, as if its virtual limit had passed
    (:func:`sim.world.harness.stop_running_world`: an exception raised into trio's own code
    would leave the process unable to run the next world); anything else gets
    :class:`SeedOverWallLimit` raised into it. A no-op (never fires) for ``seconds`` 0 or None,
    off the main thread, or where ``SIGALRM`` does not exist."""
    fired = [False]
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield fired
        return

    def on_alarm(_signum: int, _frame: Any) -> None:
        fired[0] = True
        if not harness.stop_running_world():
            raise SeedOverWallLimit(f"ran over its wall limit of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_seed(scenario: Scenario, seed: int) -> dict:
    """One seed as a result row (see :data:`ROW_FIELDS`). An exception that escapes the workload
    is a failure of that seed, named by its type, so one bad seed never stops a campaign; a seed
    that runs past ``scenario.seed_limit_s`` wall seconds (:func:`wall_limit`) is stopped and
    fails as ``liveness``, so one looping seed never hangs one."""
    start = _WALL.monotonic_s()
    with probes_mod.counting() as hits:  # coverage probes (sim/world/probes.py), beside the trace
        try:
            with wall_limit(scenario.seed_limit_s) as fired:
                try:
                    result, wall_s = simulate(scenario, seed)
                except BaseException as e:
                    if not fired[0]:
                        raise
                    raise SeedOverWallLimit(str(e)) from e
            if fired[0]:  # the code under test swallowed it, and ended
                raise SeedOverWallLimit(f"ran over its wall limit of {scenario.seed_limit_s:g} s")
        except SeedOverWallLimit:
            # Its replay stops at the same limit and shows the run's last events (without it, it loops for ever).
            replay = f"{scenario.replay(seed)} --seed-limit-s {scenario.seed_limit_s:g}"
            violations = [Violation(f"liveness: seed {seed} of {scenario.workload} ran over its wall limit of "
                                    f"{scenario.seed_limit_s:g} s (a world looping in virtual time?) and was "
                                    f"stopped; replay: {replay}", invariants.LIVENESS, invariants.LIVENESS)]
            return _row(scenario, seed, False, "", 0, 0.0, {}, violations, _WALL.monotonic_s() - start, hits,
                        replay=replay)
        except Exception as e:  # noqa: BLE001 - reported as the seed's verdict, replayable
            # The scenario function itself raised: its own handling failed, a harness defect.
            violations = [Violation.harness(e)]
            return _row(scenario, seed, False, "", 0, 0.0, {}, violations, _WALL.monotonic_s() - start, hits)
    return _row(scenario, seed, bool(result.ok), result.digest, result.events, result.virtual_s,
                result.faults, list(result.violations), wall_s, hits)


def _row(scenario: Scenario, seed: int, ok: bool, digest: str, events: int, virtual_s: float, faults: dict,
         violations: list[str], wall_s: float, probes: dict | None = None, replay: str | None = None) -> dict:
    violations = [as_violation(v) for v in violations]
    return {
        "seed": int(seed), "workload": scenario.workload, "ok": ok, "digest": digest, "events": int(events),
        "virtual_s": float(virtual_s), "faults": {str(k): int(v) for k, v in sorted(faults.items())},
        "violations": [str(v) for v in violations], "invariants": sorted({v.invariant for v in violations}),
        "wall_s": float(wall_s), "replay": replay or scenario.replay(seed),
        # Probe hits of this seed, by probe name (also a column of the Spark engine's Parquet rows).
        "probes": {str(k): int(v) for k, v in sorted((probes or {}).items())},
    }


def invariant_of(violation: str) -> str:
    """The invariant a violation names (``FENCE-3``, ``DUR-1``, ``LIN``...), else ``liveness``,
    else the exception type, else ``oracle``: the field of a :class:`sim.world.invariants.Violation`
    (a plain string, e.g. a row read back from a file, is classified the same way once)."""
    if isinstance(violation, Violation):
        return violation.invariant
    return Violation.of_message(violation).invariant


#: The simulator's oracle for exceptions (spec/simulation.md): a simulated process ends only
#: with an outcome its scenario expects, so an exception that escapes one is a named failure.
ESCAPE = invariants.ESCAPE


def name_violation(violation: str) -> str:
    """A violation that names no invariant or oracle, only the type of the exception that
    escaped a simulated process (``CorruptionError: ...``), becomes an ``ESCAPE-1`` violation
    with that text; anything else is returned as it is (``harness: ...`` is a harness defect).
    The :class:`sim.world.invariants.Violation` (:func:`sim.world.invariants.as_violation`)."""
    return as_violation(violation)


# --- the local engine -----------------------------------------------------------------------


class Progress:
    """A one-line progress bar on ``stream`` (stderr). On a terminal it redraws in place with
    ``\\r``; otherwise it prints a plain line at every tenth of the way, so logs stay readable."""

    def __init__(self, total: int, *, stream: IO[str] | None = None, label: str = "sweep", enabled: bool = True,
                 width: int = 24) -> None:
        self.total, self.label, self.enabled, self.width = total, label, enabled, width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = _WALL.monotonic_s()
        self._last_draw = -1.0
        self._next_step = 1
        self._drawn = False
        self._printed = -1

    def line(self, done: int, failures: int) -> str:
        frac = done / self.total if self.total else 1.0
        filled = int(frac * self.width)
        elapsed = _WALL.monotonic_s() - self.start
        eta = f"{elapsed / done * (self.total - done):.0f}s" if done else "?"
        return (f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{self.total} "
                f"failures {failures}  elapsed {elapsed:.0f}s  eta {eta}")

    def update(self, done: int, failures: int) -> None:
        if not self.enabled:
            return
        if self.tty:
            now = _WALL.monotonic_s()
            if done < self.total and now - self._last_draw < 0.1:
                return
            self._last_draw = now
            self.stream.write("\r" + self.line(done, failures) + "\x1b[K")
            self._drawn = True
        else:
            step = self.total * self._next_step / 10
            if done == self._printed or (done < step and done < self.total):
                return
            self._printed = done
            while self._next_step <= 10 and self.total * self._next_step / 10 <= done:
                self._next_step += 1
            self.stream.write(self.line(done, failures) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


@attrs.frozen
class SweepReport:
    rows: list[dict]
    wall_s: float
    cores: int
    engine: str
    startup_s: float = 0.0
    interrupted: bool = False  # Ctrl-C stopped it: ``rows`` are the seeds that ran


def _write_row(out: IO[str] | None, row: dict) -> None:
    if out is not None:
        out.write(json.dumps(row, sort_keys=False) + "\n")
        out.flush()


def ignore_sigint() -> None:
    """A campaign worker's initializer: Ctrl-C is the campaign's to handle (it stops the workers
    and reports what ran), not a worker's to die of with a traceback of its own."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def sweep_local(scenario: Scenario, seeds: Iterable[int], *, jobs: int = 0, out: IO[str] | None = None,
                progress: bool = True, run: Callable[[Scenario, int], dict] | None = None) -> SweepReport:
    """Run every seed, ``jobs`` worker processes at a time (0: all cores; 1: in this process).

    Rows are written to ``out`` as they finish (so an interrupted campaign keeps what it did) and
    returned in seed order. ``run`` is the per-seed function (default :func:`run_seed`). Ctrl-C
    stops the workers at once; the report holds the seeds that ran (``interrupted``).
    """
    seeds = list(seeds)
    run = run or run_seed  # looked up per call: tests may substitute the module's run_seed
    jobs = jobs or os.cpu_count() or 1
    bar = Progress(len(seeds), enabled=progress)
    rows: list[dict] = []
    failures = 0
    start = _WALL.monotonic_s()

    def take(row: dict) -> None:
        nonlocal failures
        rows.append(row)
        failures += not row["ok"]
        _write_row(out, row)
        bar.update(len(rows), failures)

    interrupted = False
    try:
        if jobs == 1:
            for seed in seeds:
                take(run(scenario, seed))
        else:
            # Leaving the block terminates the workers: at Ctrl-C the seeds still running are not waited for.
            with multiprocessing.get_context().Pool(jobs, initializer=ignore_sigint) as pool:
                for row in pool.imap_unordered(functools.partial(run, scenario), seeds):
                    take(row)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        bar.close()
    rows.sort(key=lambda r: r["seed"])
    return SweepReport(rows, _WALL.monotonic_s() - start, jobs, "local", interrupted=interrupted)


# --- the summary ----------------------------------------------------------------------------


@attrs.frozen
class Summary:
    runs: int
    failures: int
    by_invariant: dict  # invariant id -> failing seeds that violated it
    faults: dict  # fault kind -> injected, summed over seeds
    virtual_s: float
    wall_s: float
    seed_wall_s: float  # per-seed wall times added up (busy core-seconds)
    cores: int
    engine: str
    startup_s: float = 0.0

    @property
    def compression(self) -> float:
        """Virtual seconds simulated per wall second, all cores together."""
        return self.virtual_s / max(self.wall_s, 1e-9)

    @property
    def compression_per_core(self) -> float:
        return self.compression / max(self.cores, 1)

    @property
    def seeds_per_minute(self) -> float:
        return self.runs * 60.0 / max(self.wall_s, 1e-9)


def summarize(report: SweepReport) -> Summary:
    by_invariant: Counter = Counter()
    faults: Counter = Counter()
    for row in report.rows:
        faults.update(row["faults"])
        if not row["ok"]:
            by_invariant.update(set(row.get("invariants") or [invariant_of(v) for v in row["violations"]]) or {"?"})
    return Summary(
        runs=len(report.rows), failures=sum(1 for r in report.rows if not r["ok"]),
        by_invariant=dict(by_invariant.most_common()), faults=dict(faults.most_common()),
        virtual_s=sum(r["virtual_s"] for r in report.rows), wall_s=report.wall_s,
        seed_wall_s=sum(r["wall_s"] for r in report.rows), cores=report.cores, engine=report.engine,
        startup_s=report.startup_s)


def _pairs(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"


def format_summary(summary: Summary, scenario: Scenario) -> str:
    """The summary table (labels in a 16-column first column)."""
    s = summary
    engine = {"local": f"local, {s.cores} worker process{'es' if s.cores != 1 else ''}"}.get(
        s.engine, f"{s.engine}, {s.cores} cores")
    if s.startup_s:
        engine += f" (session start {s.startup_s:.1f} s, not counted below)"
    hours = f" ({s.virtual_s / 3600:.1f} h)" if s.virtual_s >= 3600 else ""
    busy = s.virtual_s / max(s.seed_wall_s, 1e-9)
    rows = [
        ("scenario", scenario.describe()),
        ("engine", engine),
        ("runs", str(s.runs)),
        ("failures", str(s.failures)),
        ("by invariant", _pairs(s.by_invariant)),
        ("faults injected", str(sum(s.faults.values()))),
        ("faults by kind", _pairs(s.faults)),
        ("virtual time", f"{s.virtual_s:.0f} s{hours}"),
        ("wall time", f"{s.wall_s:.1f} s"),
        ("compression", f"{s.compression:.0f}x (virtual s per wall s); {s.compression_per_core:.0f}x per core "
                        f"({s.cores} cores); {busy:.0f}x per busy core-second"),
        ("seeds/minute", f"{s.seeds_per_minute:.0f}"),
    ]
    return "\n".join(f"{label:<15} {value}" for label, value in rows)


def format_failures(rows: Sequence[dict]) -> str:
    """One block per failing seed: its first violation, the command that replays it and the
    run's trace digest, which the replay prints again (the same run, bit for bit)."""
    lines = []
    for row in rows:
        if not row["ok"]:
            first = row["violations"][0] if row["violations"] else "(no violation recorded)"
            lines.append(f"FAIL seed {row['seed']}: {first}")
            lines.append(f"  replay: {row['replay']}")
            if row.get("digest"):
                lines.append(f"  trace:  {row['digest'][:16]} (the replay prints the same)")
    return "\n".join(lines)


# --- throughput -----------------------------------------------------------------------------


@attrs.frozen
class BenchResult:
    rows: list[dict]
    wall_s: float
    cpu: int | None
    cpu_s: float = 0.0  # CPU seconds this process used (below wall_s when the core was shared)

    @property
    def cpu_compression(self) -> float:
        return self.virtual_s / max(self.cpu_s, 1e-9)

    @property
    def virtual_s(self) -> float:
        return sum(r["virtual_s"] for r in self.rows)

    @property
    def compression(self) -> float:
        return self.virtual_s / max(self.wall_s, 1e-9)

    @property
    def seeds_per_minute(self) -> float:
        return len(self.rows) * 60.0 / max(self.wall_s, 1e-9)


def pin_to_one_core() -> int | None:
    """Pin this process to the first CPU it may use; the CPU, or None where that is unsupported."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def bench(scenario: Scenario, seeds: Iterable[int], *, pin: bool = True, progress: bool = True) -> BenchResult:
    """Run ``seeds`` one after another in this process (one core; pinned with ``pin``)."""
    cpu = pin_to_one_core() if pin else None
    before = os.times()
    report = sweep_local(scenario, seeds, jobs=1, progress=progress)
    after = os.times()
    cpu_s = (after.user - before.user) + (after.system - before.system)
    return BenchResult(report.rows, report.wall_s, cpu, cpu_s)


def format_bench(result: BenchResult, scenario: Scenario, seeds: range) -> str:
    walls = sorted(r["wall_s"] for r in result.rows)
    ratios = sorted(r["virtual_s"] / max(r["wall_s"], 1e-9) for r in result.rows)
    slowest = sorted(result.rows, key=lambda r: -r["wall_s"])[:3]
    met = "met" if result.compression >= TARGET_COMPRESSION else "NOT met"
    core = f"CPU {result.cpu}" if result.cpu is not None else "unpinned"
    rows = [
        ("scenario", scenario.describe()),
        ("seeds", f"{seeds.start}..{seeds.stop - 1} ({len(result.rows)}), one after another on one core ({core})"),
        ("failures", str(sum(1 for r in result.rows if not r["ok"]))),
        ("virtual time", f"{result.virtual_s:.0f} s"),
        ("wall time", f"{result.wall_s:.2f} s (CPU {result.cpu_s:.2f} s"
                      + (": the core was shared, see CPU figures)" if result.cpu_s < 0.9 * result.wall_s else ")")),
        ("compression", f"{result.compression:.0f}x virtual s per wall s on one core "
                        f"(target >= {TARGET_COMPRESSION:.0f}x: {met})"),
        ("per CPU second", f"{result.cpu_compression:.0f}x virtual s per CPU s"),
        ("seeds/minute", f"{result.seeds_per_minute:.0f} on one core"),
        ("per seed", f"wall median {statistics.median(walls) * 1000:.0f} ms, max {walls[-1] * 1000:.0f} ms; "
                     f"compression median {statistics.median(ratios):.0f}x, max {ratios[-1]:.0f}x"),
        ("slowest", ", ".join(f"seed {r['seed']} {r['wall_s']:.2f} s for {r['virtual_s']:.0f} virtual s"
                              for r in slowest)),
    ]
    return "\n".join(f"{label:<15} {value}" for label, value in rows)
