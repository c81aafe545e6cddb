"""The simulator's command line: ``sim run --seed S``, ``sim dst`` and ``sim sweep`` (campaigns
over seeds), ``sim bench`` (time compression on one core), ``sim bugs`` (the bug catalogue of
:mod:`sim.scenarios.catalogue`), ``sim hunt`` (seeds until the simulator catches a catalogued bug) and
``sim shrink`` (a failing run minimised, :mod:`sim.campaign.shrink`) and ``sim mutate`` (mutation testing
of the protocol modules, :mod:`sim.campaign.mutate`).

``--workload`` names any scenario of the one table, :data:`sim.scenarios.registry.SCENARIOS`: ``store``
(object-store CAS, claims and private keys, :mod:`sim.scenarios.store`), ``db`` (writers fencing
each other, :mod:`sim.scenarios.db`), ``takeover``, ``seqmeta``, ``compactor``, and whatever is
appended there; ``sim sweep`` / ``sim dst`` also take ``--workload all``. A failing seed prints
the one command that replays it. Campaigns run in :mod:`sim.campaign.sweep` (worker processes) or, with
``sim sweep --engine spark``, in :mod:`sim.campaign.spark_engine`.
"""

from __future__ import annotations

import argparse
import os
import sys

import attrs

from slatedb.runtime.production import ProductionRuntime

from sim.scenarios import catalogue as bugs_mod
from sim.campaign import hunt as hunt_mod
from sim.campaign import ledger as ledger_mod
from sim.world import probes as probes_mod
from sim.scenarios import registry as scenarios_mod
from sim.campaign import sweep as sweep_mod
from sim.world.harness import WorldResult, skipping_checks
from sim.world.invariants import LIVENESS, Violation, as_violation
from sim.campaign.sweep import Scenario, parse_seeds
from sim.campaign.argtypes import number as _number, whole as _whole


def _scenario(ns: argparse.Namespace) -> Scenario:
    return Scenario(workload=ns.workload, ops=ns.ops, clients=ns.clients, faults=ns.faults,
                    bugs=tuple(getattr(ns, "bug", None) or ()),
                    seed_limit_s=getattr(ns, "seed_limit_s", sweep_mod.SEED_WALL_LIMIT_S))


def _run_seed(args: tuple[int, int, int, str, str]) -> tuple[WorldResult, float]:
    """One seed: (seed, ops, clients, faults, workload) -> (the workload's result, wall seconds)."""
    seed, n_ops, n_clients, faults, workload = args
    return sweep_mod.simulate(Scenario(workload=workload, ops=n_ops, clients=n_clients, faults=faults), seed)


def _replay(ns: argparse.Namespace, seed: int) -> str:
    return _scenario(ns).replay(seed)


def _parse_seeds(text: str) -> range:
    return parse_seeds(text)


def _invariant_id(text: str) -> str:
    """argparse type of ``--skip-check``: an invariant id (READ-1, CKPT-4, LIN); a protocol id must
    be one of spec/protocols/README.md (a typo of an id was left out 'silent')."""
    from sim.campaign import timeline
    from sim.world.invariants import SPEC_ID, is_id
    if not is_id(text):
        raise argparse.ArgumentTypeError(f"not an invariant id: {text!r} (ids look like READ-1, CKPT-4, LIN)")
    known = timeline.invariant_texts()
    if SPEC_ID.fullmatch(text) and known and text not in known:
        prefix = text.rsplit("-", 1)[0] + "-"
        same = sorted((k for k in known if k.startswith(prefix)), key=lambda k: int(k.rsplit("-", 1)[1]))
        raise argparse.ArgumentTypeError(f"no invariant {text} in spec/protocols/README.md "
                                         f"({', '.join(same) or 'none of that prefix'})")
    return text


def _unwritable(flag: str, path: str | None, make_dirs: bool = False) -> str | None:
    """Why ``path`` (the value of ``flag``) cannot be written, in one line, or None: checked before
    a run, so that a campaign or a shrink is not spent and then lost on a typo in an output path.
    ``make_dirs``: the writer creates missing directories (only an existing ancestor must be a
    writable directory)."""
    if not path:
        return None
    if os.path.isdir(path):
        return f"{flag} {path}: is a directory"
    where = os.path.dirname(os.path.abspath(path))
    while make_dirs and not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    if not os.path.isdir(where):
        return f"{flag} {path}: " + (f"{where} is not a directory" if os.path.exists(where) else f"no directory {where}")
    if not os.access(where, os.W_OK):
        return f"{flag} {path}: directory {where} is not writable"
    return None


def _open_out(flag: str, path: str, mode: str = "w"):
    """``open(path, mode)``; an error is one line naming ``flag`` (:class:`ValueError`)."""
    try:
        return open(path, mode)
    except OSError as e:
        raise ValueError(f"cannot write {flag} {path}: {e.strerror or e}") from None


def _record(row: dict) -> str | None:
    """Append a campaign's row to the ledger; a ledger that fails now (it was checked before the
    campaign) costs the row, said in one line, never the campaign's table and verdict."""
    try:
        return ledger_mod.record(row)
    except ledger_mod.LedgerError as e:
        print(f"sim: the campaign was not recorded: {e}", file=sys.stderr)
        return None


#: The exit code of a command Ctrl-C stopped (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
_JOBS = _whole(0, " (0: all cores)")
_WALL = ProductionRuntime("sim-cli")  # wall time is reported, never fed into a run


def cmd_run(ns: argparse.Namespace) -> int:
    try:
        scenario = _scenario(ns)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    problem = _unwritable("--timeline", getattr(ns, "timeline", None))
    if problem:
        print(f"sim: {problem}", file=sys.stderr)
        return 2
    choices = None
    from sim.world import trace as trace_mod
    skip = tuple(getattr(ns, "skip_check", None) or ())
    limit = getattr(ns, "seed_limit_s", 0.0) or 0.0
    with trace_mod.capture() as traces, skipping_checks(skip), sweep_mod.wall_limit(limit) as over_limit:
        if getattr(ns, "keep", None) is not None:
            from sim.world import choices as choices_mod
            from sim.campaign import shrink as shrink_mod
            try:
                with open(ns.keep) as f:
                    prefix = choices_mod.loads(f.read())
            except (OSError, ValueError) as e:
                print(f"sim: cannot read the choice sequence {ns.keep!r}: {e}", file=sys.stderr)
                return 2
            replay = shrink_mod.replay_command(scenario, ns.seed, ns.keep)
            try:
                result, choices, wall_s = shrink_mod.simulate_choices(scenario, ns.seed, prefix)
            except sweep_mod.SeedOverWallLimit:  # stopped outside the world (its end-of-run checks)
                result, wall_s = None, limit
            unread = choices.unread() if choices is not None else []
            if unread:  # a replay of the saved run draws from every stream it saved
                print(f"sim: the choice sequence {ns.keep!r} was not saved from this run: {len(unread)} of its "
                      f"{len(prefix)} streams are none seed {ns.seed} of {scenario.workload} draws from (first: "
                      f"{unread[0]}); replay it with the command `sim shrink` printed", file=sys.stderr)
                return 2
        else:
            replay = scenario.replay(ns.seed)
            try:
                result, wall_s = sweep_mod.simulate(scenario, ns.seed)
            except sweep_mod.SeedOverWallLimit:
                result, wall_s = None, limit
    replay += "".join(f" --skip-check {i}" for i in sorted(set(skip)))
    if limit:
        replay += f" --seed-limit-s {limit:g}"
    events = max(traces, key=len).events if traces else []
    if result is None:
        trace = max(traces, key=len) if traces else None
        result = WorldResult(scenario.workload, ns.seed, False, trace.digest() if trace else "", len(events),
                             events[-1].time_s if events else 0.0, {}, ())
    if over_limit[0]:  # stopped from inside as if its virtual limit had passed: that liveness verdict is not its own
        stopped = Violation(f"liveness: seed {ns.seed} of {scenario.workload} ran over its wall limit of {limit:g} s "
                            f"and was stopped (a world looping in virtual time?)" + ("; its last events below" if events else ""),
                            LIVENESS, LIVENESS)
        result = attrs.evolve(result, ok=False, violations=(stopped, *(v for v in result.violations
                                                                        if as_violation(v).invariant != LIVENESS)))
    print(f"seed {result.seed}: {'PASS' if result.ok else 'FAIL'}  trace {result.digest[:16]}  "
          f"events {result.events}  virtual {result.virtual_s:.1f}s  wall {wall_s:.2f}s  faults {result.faults}")
    for v in result.violations:
        print(f"  violation: {as_violation(v)}")
    if skip:
        would = getattr(result, "skipped", {}) or {}
        print("  left out: " + ", ".join(f"{i} ({would[i]} verdict(s) not raised)" if would.get(i) else f"{i} (silent)"
                                         for i in sorted(set(skip))))
    if getattr(ns, "trace", False) and (choices is not None and choices.trace is not None or traces):
        print("trace:\n" + (choices.trace if choices is not None and choices.trace is not None
                             else max(traces, key=len)).render())
    elif not result.ok:
        _print_around(events, result)
    if getattr(ns, "timeline", None):
        try:
            _write_timeline(ns.timeline, events, result, scenario, ns.seed, replay, wall_s)
        except OSError as e:
            print(f"sim: cannot write --timeline {ns.timeline}: {e.strerror or e}", file=sys.stderr)
            return 2
    if not result.ok:
        print(f"replay: {replay}")
    return 0 if result.ok else 1


def _print_around(events: list, result) -> None:
    """The protocol events and faults around the (first) violation, the violating one marked."""
    from sim.campaign import timeline
    if not events:
        if getattr(result, "last_events", ""):
            print("last events:\n" + result.last_events)
        return
    idx, how = timeline.violation_index(events, result.violations[0]) if result.violations else (None, "end")
    what = {"event": "the violating event", "related": "the last event naming what the violation names",
            "end": "the end of the run"}[how]
    print(f"protocol events and faults around {what} (marked >>; spawns and the store's ordinary traffic left out):")
    print(timeline.format_around(events, idx))


def _write_timeline(path: str, events: list, result, scenario, seed: int, replay: str, wall_s: float | None,
                    title: str | None = None) -> None:
    from sim.campaign import timeline
    title = title or f"sim run: {scenario.workload} seed {seed} {'PASS' if result.ok else 'FAIL'}"
    timeline.write(path, events, title=title, header=timeline.header_for(result, scenario, seed, replay, wall_s),
                   violations=list(result.violations))
    print(f"timeline: {path}")


def cmd_bugs(ns: argparse.Namespace) -> int:
    """The catalogue: one line per entry, then the known bug classes still waiting for code."""
    n = max(len(b.name) for b in bugs_mod.CATALOGUE)
    w = max(len(b.workload) for b in bugs_mod.CATALOGUE)
    i = max(len(", ".join(b.invariants)) for b in bugs_mod.CATALOGUE)
    print(f"{'name':<{n}} {'workload':<{w}} {'invariants':<{i}} {'budget':>6}  description")
    for b in bugs_mod.CATALOGUE:
        print(f"{b.name:<{n}} {b.workload:<{w}} {', '.join(b.invariants):<{i}} {b.budget:>6}  {b.description}")
        if ns.verbose:
            print(f"{'':<{n}} class: {b.bug_class}\n{'':<{n}} source: {b.source}\n{'':<{n}} switch: {b.site}"
                  + (f"\n{'':<{n}} also caught by: {', '.join(b.also)}" if b.also else ""))
    print("\nplanned (their code does not exist yet):")
    for bug_class, where in bugs_mod.PLANNED:
        print(f"  - {bug_class}  [{where}]")
    return 0


def cmd_hunt(ns: argparse.Namespace) -> int:
    """Seeds 0..N-1 with a bug switched on until one fails: which seed, after how many, what fired,
    how long it took, and the command that replays it. Non-zero if an entry went undetected."""
    names = [b.name for b in bugs_mod.CATALOGUE] if ns.all else list(ns.bug or ())
    if not names:
        print("sim: hunt needs --bug NAME or --all", file=sys.stderr)
        return 2
    try:
        ledger_mod.check()
    except ledger_mod.LedgerError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    jobs = ns.jobs or os.cpu_count() or 1
    results = []
    interrupted = None
    for name in names:
        try:
            r = hunt_mod.hunt(name, ns.seeds, jobs=jobs, workload=ns.workload, rate=ns.rate,
                              skip=tuple(ns.skip_check or ()))
        except KeyboardInterrupt:  # the entries hunted so far keep their report (and ledger rows)
            interrupted = name
            break
        results.append(r)
        _record(ledger_mod.from_hunt(r))
        if not ns.all:
            left_out = ("  left out:  " + ", ".join(f"{i} (would have fired in {r.skipped_seeds.get(i, 0)} seed(s))"
                                                    for i in r.skipped)) if r.skipped else ""
            if r.detected_seed is None:
                print(f"{name}: NOT detected in seeds 0..{r.seeds_run - 1} of {r.workload} ({r.wall_s:.1f} s wall)")
                if left_out:
                    print(left_out)
                continue
            print(f"{name}: detected by seed {r.detected_seed} of {r.workload} after {r.detected_seed + 1} seed(s), "
                  f"{r.wall_s:.1f} s wall")
            print(f"  fired:     {r.invariant}" + ("" if r.expected else
                                                  f" (expected {', '.join(bugs_mod.BY_NAME[name].invariants)})"))
            if r.detections is not None:
                print(f"  rate:      {r.detections}/{r.seeds_run} seeds")
            print(f"  violation: {r.violation[:300]}")
            print(f"  replay:    {r.replay}")
            if left_out:
                print(left_out)
            if r.probe_seeds:
                print("  probes:    " + ", ".join(f"{p} {n}" for p, n in sorted(r.probe_seeds.items())))
    if ns.all:
        rate_col = f" {'rate':>9}" if ns.rate else ""
        b = max([24, *(len(r.bug) for r in results)])  # the columns fit the longest name
        w = max([9, *(len(r.workload) for r in results)])
        print(f"{'bug':<{b}} {'workload':<{w}} {'seed':>5} {'seeds':>5} {'fired':<10} {'wall s':>7}{rate_col}  replay")
        for r in results:
            rate_txt = f" {f'{r.detections}/{r.seeds_run}':>9}" if ns.rate else ""
            if r.detected_seed is None:
                print(f"{r.bug:<{b}} {r.workload:<{w}} {'-':>5} {r.seeds_run:>5} {'NOT FOUND':<10} "
                      f"{r.wall_s:>7.1f}{rate_txt}")
            else:
                fired = r.invariant + ("" if r.expected else "?")
                print(f"{r.bug:<{b}} {r.workload:<{w}} {r.detected_seed:>5} {r.detected_seed + 1:>5} {fired:<10} "
                      f"{r.wall_s:>7.1f}{rate_txt}  {r.replay}")
    if interrupted:
        print(f"INTERRUPTED (Ctrl-C) while hunting {interrupted}: "
              + (f"the {len(results)} entr{'y' if len(results) == 1 else 'ies'} above ran to the end, "
                 f"{len(names) - len(results)} did not" if results else "no entry ran to the end"))
        return INTERRUPTED
    return 0 if all(r.detected_seed is not None for r in results) else 1


def _scenarios_for_all(faults: str) -> list[str]:
    """``--workload all``: every scenario that runs in faults mode ``faults`` (``--faults none``
    leaves out the scenarios whose faults are their own, and says so on stderr)."""
    names = sweep_mod.taking_faults(faults)
    left = [n for n in scenarios_mod.BY_NAME if n not in names]
    if left:
        print(f"sim: --faults {faults} --workload all runs {', '.join(names)}; not {', '.join(left)} "
              f"(their faults are their own)", file=sys.stderr)
    return names


def cmd_sweep(ns: argparse.Namespace) -> int:
    """``sim dst`` and ``sim sweep``: a campaign over seeds, then the summary table, then one
    replay command per failing seed; non-zero if any seed failed. ``--workload all`` runs one
    campaign per scenario of the registry, one after another (rows of all of them in ``--out``)."""
    if ns.workload == "all":
        problem = _unwritable("--out", ns.out)
        if problem:
            print(f"sim: {problem}", file=sys.stderr)
            return 2
        names = _scenarios_for_all(ns.faults)
        if getattr(ns, "engine", "local") == "spark" and ns.parquet:
            base = ns.parquet
        rc = 0
        for i, name in enumerate(names):
            if i:
                print()
            print(f"== {name} ==")
            sub = argparse.Namespace(**vars(ns))
            sub.workload = name
            if ns.out:
                sub.out = ns.out if i == 0 else None
                sub._append = ns.out if i else None
            if getattr(ns, "engine", "local") == "spark":
                sub.parquet = base.replace(".parquet", f"-{name}.parquet") if base.endswith(".parquet") else f"{base}-{name}"
            code = cmd_sweep(sub)
            if code == INTERRUPTED:
                return code
            rc = max(rc, code)
        return rc
    try:
        seeds = parse_seeds(ns.seeds)
        scenario = _scenario(ns)
        if getattr(ns, "engine", "local") != "spark":
            ledger_mod.check()
        if getattr(ns, "_append", None):
            ns.out = ns._append
            out = _open_out("--out", ns.out, "a")
        else:
            out = _open_out("--out", ns.out) if ns.out else None
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    started_on = ledger_mod.current_commit()  # the code that runs: the checkout may move meanwhile
    try:
        if getattr(ns, "engine", "local") == "spark":
            from sim.campaign.spark_engine import SparkUnavailable, sweep_spark

            try:
                report = sweep_spark(scenario, seeds, master=ns.master, parquet=ns.parquet, out=out,
                                     ledger_parquet=ledger_mod.parquet_path(), ledger_kind=ns.command)
            except SparkUnavailable as e:
                print(f"sim: {e}", file=sys.stderr)
                return 2
        else:
            report = sweep_mod.sweep_local(scenario, seeds, jobs=ns.jobs, out=out, progress=not ns.no_progress)
    finally:
        if out:
            out.close()
    # The ledger first: a reader that stops early (``| head``) must not lose the campaign's row.
    recorded = None if report.engine == "spark" or not report.rows else _record(
        ledger_mod.from_report(report, scenario, ns.command, commit=started_on))
    print(sweep_mod.format_summary(sweep_mod.summarize(report), scenario))
    if report.engine != "spark":  # the spark engine's rows carry no probe hits
        print(probes_mod.format_table(report.rows))
    if report.engine == "spark":
        if ledger_mod.parquet_path():
            print(f"{'ledger':<15} {ledger_mod.parquet_path()}")
    elif recorded:
        print(f"{'ledger':<15} {recorded}")
    if getattr(ns, "engine", "local") == "spark":
        print(f"{'parquet':<15} {ns.parquet}")
    if ns.out:
        print(f"{'results':<15} {ns.out}")
    failures = sweep_mod.format_failures(report.rows)
    if failures:
        print(failures)
    if report.interrupted:
        print(f"INTERRUPTED (Ctrl-C) after {report.wall_s:.1f} s: {len(report.rows)} of {len(seeds)} seed(s) ran "
              "(the figures above are theirs)")
        return INTERRUPTED
    return 1 if any(not row["ok"] for row in report.rows) else 0


def cmd_dst(ns: argparse.Namespace) -> int:
    """The main job (:mod:`sim.campaign.dst`): every scenario of the registry (or ``--workload``) in one
    time-boxed campaign balanced by measured cost (or exactly ``--seeds``); one table, then a
    replay command per failing seed; non-zero if any seed failed."""
    from sim.campaign import dst as dst_mod
    if ns.coverage:
        return _dst_coverage(ns)
    names = _scenarios_for_all(ns.faults) if ns.workload == "all" else [ns.workload]
    if ns.seeds is not None:  # exactly these seeds: a flag that picks seeds otherwise was silently ignored
        other = [f for f, on in (("--quick", ns.quick), ("--minutes", ns.minutes is not None),
                                 (f"--from {ns.start}", ns.start != 0)) if on]
        if other:
            print(f"sim: --seeds {ns.seeds} names the seeds to run; {' and '.join(other)} would be ignored "
                  f"(--from S shifts the plan or a soak)", file=sys.stderr)
            return 2
    try:
        scenarios = [Scenario(workload=n, ops=ns.ops, clients=ns.clients, faults=ns.faults,
                              bugs=tuple(ns.bug or ()), seed_limit_s=ns.seed_limit_s) for n in names]
        seeds = parse_seeds(ns.seeds) if ns.seeds is not None else None
        problem = _unwritable("--out", ns.out)
        if problem:
            raise ValueError(problem)
        ledger_mod.check()
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    if (ns.minutes is not None and ns.minutes <= 0) or (ns.cap_minutes is not None and ns.cap_minutes <= 0):
        print("sim: --minutes and --cap-minutes must be positive", file=sys.stderr)
        return 2
    budget_s = ns.minutes * 60.0 if ns.minutes is not None else None
    plan = None
    if seeds is None and budget_s is None:  # the main job: a seed plan, the same on every machine
        plan = dst_mod.plan("quick" if ns.quick else "default", names, ns.start)
        print("plan: " + ", ".join(f"{w} {r.start}..{r.stop - 1}" for w, r in plan.items()), flush=True)
    try:
        out = _open_out("--out", ns.out) if ns.out else None
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    started_on = ledger_mod.current_commit()  # the code that runs: the checkout may move meanwhile
    try:
        campaign = dst_mod.run_campaign(scenarios, budget_s=budget_s, seeds=plan if plan is not None else seeds,
                                        start=ns.start, jobs=ns.jobs, out=out, progress=not ns.no_progress,
                                        hard_stop_s=ns.cap_minutes * 60.0 if ns.cap_minutes else None)
    finally:
        if out:
            out.close()
    recorded = None
    for result in campaign.results:  # the ledger (sim/campaign/ledger.py), one row per scenario, before any
        if campaign.interrupted and not result.rows:  # Ctrl-C: the seeds that ran, each scenario that ran one
            continue
        recorded = _record(ledger_mod.from_rows(  # output: `./just dst | head` keeps it
            result.rows, result.scenario, kind="dst", engine="local", wall_s=campaign.wall_s, commit=started_on))
    print(dst_mod.format_table(campaign))
    print()
    print(probes_mod.format_table(campaign.rows))
    gaps = dst_mod.coverage_gaps(campaign)
    for gap in gaps:
        print(f"COVERAGE GAP: {gap}")
    if campaign.results and recorded:
        print(f"ledger: {recorded}")
    if ns.out:
        print(f"results: {ns.out}")
    if campaign.interrupted:
        return INTERRUPTED
    return 0 if campaign.ok and not gaps else 1


def _dst_coverage(ns: argparse.Namespace) -> int:
    """``sim dst --coverage``: the same campaign again in a fresh process under coverage.py
    (:mod:`sim.campaign.coverage`), then line and branch coverage per protocol module and file and
    every branch it never took."""
    from sim.campaign import coverage as code_coverage
    argv = [a for a in ns.argv if a != "--coverage"]
    code, report = code_coverage.measure_command(argv)
    print()
    print(code_coverage.format_table(report, files=True))
    print()
    print(code_coverage.format_branches(report))
    return code


def cmd_bench(ns: argparse.Namespace) -> int:
    """Time compression of the standard scenario on one core: seeds one after another, pinned."""
    try:
        seeds = parse_seeds(ns.seeds)
        scenario = _scenario(ns)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    result = sweep_mod.bench(scenario, seeds, pin=True)
    print(sweep_mod.format_bench(result, scenario, seeds))
    failures = sweep_mod.format_failures(result.rows)
    if failures:
        print(failures)
        return 1
    if ns.min_compression and result.compression < ns.min_compression:
        print(f"compression {result.compression:.0f}x is below --min-compression {ns.min_compression:.0f}x")
        return 1
    return 0


def cmd_shrink(ns: argparse.Namespace) -> int:
    """Minimise a failing run's schedule (:mod:`sim.campaign.shrink`); print the report and the replay
    command; with ``--write-test`` write it out as a pytest regression test."""
    from sim.world import choices as choices_mod
    from sim.campaign import shrink as shrink_mod
    log = (lambda m: print(m, file=sys.stderr)) if not ns.quiet else None
    if ns.write_test:
        name = os.path.splitext(os.path.basename(ns.write_test))[0]
        if not (name.startswith("test_") and ns.write_test.endswith(".py")):
            print(f"sim: --write-test wants a path like tests/regressions/test_<name>.py, not {ns.write_test!r}",
                  file=sys.stderr)
            return 2
    problem = (_unwritable("--save", ns.save) or _unwritable("--timeline", ns.timeline)
               or _unwritable("--write-test", ns.write_test, make_dirs=True))
    if problem:  # before the shrink, which takes minutes
        print(f"sim: {problem}", file=sys.stderr)
        return 2
    try:
        r = shrink_mod.shrink(ns.workload, ns.seed, ns.bug or (), faults=ns.faults, ops=ns.ops, clients=ns.clients,
                              max_runs=ns.max_runs, max_wall_s=ns.max_seconds, log=log)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    path = ns.save
    if path is None:  # under .sim/ (ignored by git), never the working directory itself
        os.makedirs(".sim", exist_ok=True)
        path = os.path.join(".sim", f"shrunk-{ns.workload}-{ns.seed}.json")
    with open(path, "w") as f:
        f.write(choices_mod.dumps(r.saved) + "\n")
    print(shrink_mod.format_report(r, path, trace_lines=ns.trace_lines))
    print(f"choice sequence saved to {path}")
    if ns.timeline:
        from sim.world import trace as trace_mod
        scenario = r.scenario()
        with trace_mod.capture() as traces:
            shrunk, _, wall_s = shrink_mod.simulate_choices(scenario, r.seed, r.saved)
        _write_timeline(ns.timeline, max(traces, key=len).events if traces else [], shrunk, scenario, r.seed,
                        r.replay(path), wall_s,
                        title=f"sim shrink: {r.workload} seed {r.seed}, shrunk run, fires {r.invariant}")
    if ns.write_test:
        path = ns.write_test
        name = os.path.splitext(os.path.basename(path))[0]
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(shrink_mod.regression_test(r, name[len("test_"):]))
        print(f"regression test written to {path}")
    return INTERRUPTED if r.interrupted else 0


def cmd_ledger(ns: argparse.Namespace) -> int:
    """Cumulative seeds per scenario and commit, from the local SQLite ledger and the Spark
    engine's Parquet ledger."""
    sqlite = ns.sqlite or ledger_mod.sqlite_path() or ledger_mod.DEFAULT_SQLITE
    parquet = ns.parquet or ledger_mod.parquet_path() or ledger_mod.DEFAULT_PARQUET
    archive = ns.archive_file or ledger_mod.archive_path()
    if ns.sqlite and not os.path.isfile(ns.sqlite):
        print(f"sim: --sqlite {ns.sqlite}: no such ledger", file=sys.stderr)
        return 2
    if ns.archive:
        if archive is None:
            print("sim: no archive (SIM_LEDGER_ARCHIVE=off): name one with --archive-file", file=sys.stderr)
            return 2
        problem = _unwritable("--archive-file", archive, make_dirs=True)
        if problem:
            print(f"sim: {problem}", file=sys.stderr)
            return 2
    try:
        if ns.archive:
            added = ledger_mod.archive(ledger_mod.read_all(sqlite, parquet), archive)
            print(f"{added} campaign(s) appended to {archive}")
        rows = ledger_mod.read_all(sqlite, parquet, archive)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    where = f"{sqlite} or {parquet}" + (f" or {archive}" if archive else "")
    recorded = rows
    if ns.scenario:
        rows = [r for r in rows if r["scenario"] == ns.scenario]
    if ns.commit:
        rows = [r for r in rows if r["commit_id"].startswith(ns.commit)]
    if not recorded:
        print(f"no campaign recorded in {where}")
        return 0
    if not rows:
        which = " and ".join(([f"scenario {ns.scenario}"] if ns.scenario else [])
                             + ([f"a commit starting {ns.commit}"] if ns.commit else []))
        print(f"none of the {len(recorded)} campaign(s) in {where} is of {which} (scenarios recorded: "
              f"{', '.join(sorted({r['scenario'] for r in recorded}))})")
        return 0
    if ns.campaigns:
        sc = max([10, *(len(r["scenario"]) for r in rows)])  # compactor-workers, store-bounded
        print(f"{'recorded (UTC)':<20} {'commit':<18} {'kind':<6} {'engine':<6} {'scenario':<{sc}} {'bugs':<24} "
              f"{'seeds':>6} {'failures':>8} {'faults':>7} {'wall s':>8}")
        for r in rows:
            print(f"{r['recorded_utc']:<20} {r['commit_id']:<18} {r['kind']:<6} {r['engine']:<6} {r['scenario']:<{sc}} "
                  f"{(r['bugs'] or '-')[:24]:<24} {r['seeds']:>6} {r['failures']:>8} {r['faults']:>7} {r['wall_s']:>8.1f}")
        print()
    print(ledger_mod.format_cumulative(ledger_mod.cumulative(rows)))
    print(f"\n{len(rows)} campaign(s) from {sqlite}" + (f", {parquet}" if os.path.isdir(parquet) else "")
          + (f" and {archive}" if archive and os.path.exists(archive) else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sim", description="Deterministic simulation of slatedb.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, allow_all: bool = False) -> None:
        p.add_argument("--ops", type=_whole(1), default=2000, help="operations per run (store; default 2000)")
        p.add_argument("--clients", type=_whole(1), default=6, help="concurrent clients (store; default 6)")
        p.add_argument("--faults", choices=["swarm", "all", "none"], default="swarm",
                       help="swarm (default): each seed draws its own mix of faults; none: no injected faults (the "
                            "scenarios with such a mode: db, store, gc, ...); all: every store fault at once (store)")
        p.add_argument("--workload", choices=list(scenarios_mod.BY_NAME) + (["all"] if allow_all else []),
                       default="store",
                       help="a scenario of the table (sim.scenarios.registry.SCENARIOS): store, db, takeover, seqmeta, "
                            "compactor, ..." + ("; all: every one of them in turn" if allow_all else ""))
        p.add_argument("--bug", action="append", choices=sorted(bugs_mod.BY_NAME), metavar="NAME",
                       help="switch on a catalogued bug (repeatable; see `sim bugs`)")

    p_run = sub.add_parser("run", help="run one seed and print its verdict and trace digest")
    p_run.add_argument("--seed", type=int, required=True)
    p_run.add_argument("--keep", default=None, metavar="FILE",
                       help="replay a saved choice sequence (JSON, written by `sim shrink`) instead of the seed's own")
    p_run.add_argument("--trace", action="store_true", help="print the whole trace (every event, the store's traffic too)")
    p_run.add_argument("--timeline", metavar="HTML", help="write a picture of the run (one self-contained HTML page)")
    p_run.add_argument("--skip-check", action="append", type=_invariant_id, metavar="ID",
                       help="leave the checks of this invariant out (repeatable; e.g. CKPT-4)")
    p_run.add_argument("--seed-limit-s", type=_number(False, " (0: no limit)"), default=0.0, metavar="S",
                       help="stop the run after S wall seconds and show its last events (the replay of a seed a "
                            "campaign stopped at its wall limit; default 0: no limit)")
    common(p_run)
    p_run.set_defaults(fn=cmd_run)

    def seed_limit(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seed-limit-s", type=_number(False, " (0: no limit)"), default=sweep_mod.SEED_WALL_LIMIT_S,
                       metavar="S",
                       help="a seed still running after S wall seconds is stopped and fails (liveness), named; "
                            f"0: no limit (default {sweep_mod.SEED_WALL_LIMIT_S:g})")

    def campaign(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seeds", default="0..199", help="N or A..B (inclusive); default 0..199")
        p.add_argument("--jobs", type=_JOBS, default=0, help="worker processes (default: all cores)")
        p.add_argument("--out", help="write one JSON line per seed to this file")
        p.add_argument("--no-progress", action="store_true", help="no progress line on stderr (local engine)")
        seed_limit(p)
        common(p, allow_all=True)

    p_dst = sub.add_parser("dst", help="the main job: every scenario, a fixed seed plan (the same on every machine); "
                                       "one table")
    p_dst.add_argument("--seeds", default=None,
                       help="N or A..B (inclusive): exactly these seeds of each scenario instead of the plan")
    length = p_dst.add_mutually_exclusive_group()
    length.add_argument("--quick", action="store_true",
                        help="the quick plan (about 30 s on 2 idle cores; the before-stop check and CI)")
    length.add_argument("--minutes", type=_number(True), default=None,
                        help="a soak: time-boxed to N minutes, seeds balanced by measured cost")
    p_dst.add_argument("--cap-minutes", type=_number(True), default=None,
                       help="a wall-clock cap on a plan: seeds not run by then fail the campaign, named")
    p_dst.add_argument("--from", dest="start", type=int, default=0, help="first seed of every scenario (default 0)")
    p_dst.add_argument("--jobs", type=_JOBS, default=0, help="worker processes (default: all cores)")
    p_dst.add_argument("--out", help="write one JSON line per seed to this file")
    p_dst.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    seed_limit(p_dst)
    p_dst.add_argument("--coverage", action="store_true",
                       help="run the campaign under coverage.py; print line and branch coverage of the protocol "
                            "modules and every branch never taken")
    common(p_dst, allow_all=True)
    p_dst.set_defaults(fn=cmd_dst, workload="all")

    p_sweep = sub.add_parser("sweep", help="a campaign over seeds in worker processes or on Spark; summary, JSON lines")
    campaign(p_sweep)
    p_sweep.add_argument("--engine", choices=["local", "spark"], default="local",
                         help="local: worker processes (--jobs); spark: one Spark task per seed")
    p_sweep.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p_sweep.add_argument("--parquet", default="sim-results.parquet",
                         help="Parquet table the spark engine writes (default sim-results.parquet)")
    p_sweep.set_defaults(fn=cmd_sweep)

    p_bench = sub.add_parser("bench", help="time compression of a fixed set of seeds on one core")
    p_bench.add_argument("--seeds", default="0..49", help="N or A..B (inclusive); default 0..49")
    p_bench.add_argument("--min-compression", type=_number(False), default=0.0,
                         help="exit non-zero below this many virtual s per wall s")
    common(p_bench)
    p_bench.set_defaults(fn=cmd_bench, workload="db")

    p_shrink = sub.add_parser("shrink", help="minimise a failing run's choices (any scenario); optionally write a test")
    p_shrink.add_argument("--seed", type=int, required=True)
    p_shrink.add_argument("--save", metavar="FILE", help="where to save the shrunk choice sequence "
                          "(default .sim/shrunk-<workload>-<seed>.json)")
    p_shrink.add_argument("--write-test", metavar="PATH", help="write a pytest regression test (tests/regressions/test_<name>.py)")
    p_shrink.add_argument("--max-runs", type=_whole(1), default=400, help="candidate runs at most (default 400)")
    p_shrink.add_argument("--max-seconds", type=_number(True), default=300.0, help="wall seconds at most (default 300)")
    p_shrink.add_argument("--trace-lines", type=_whole(0), default=60, help="readable trace lines to print (default 60)")
    p_shrink.add_argument("--timeline", metavar="HTML", help="write a picture of the shrunk run (one HTML page)")
    p_shrink.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    common(p_shrink)
    p_shrink.set_defaults(fn=cmd_shrink, workload="db")

    p_ledger = sub.add_parser("ledger", help="cumulative seeds per scenario and commit, from every recorded campaign")
    p_ledger.add_argument("--sqlite", help=f"the local ledger (default $SIM_LEDGER or {ledger_mod.DEFAULT_SQLITE})")
    p_ledger.add_argument("--parquet", help=f"the Spark engine's ledger (default {ledger_mod.DEFAULT_PARQUET})")
    p_ledger.add_argument("--scenario", help="only this scenario")
    p_ledger.add_argument("--commit", help="only commits starting with this")
    p_ledger.add_argument("--campaigns", action="store_true", help="also list every campaign")
    p_ledger.add_argument("--archive", action="store_true",
                          help="first append the local campaigns to the archive in the repository (commit it)")
    p_ledger.add_argument("--archive-file", help=f"the archive (default $SIM_LEDGER_ARCHIVE or {ledger_mod.ARCHIVE})")
    p_ledger.set_defaults(fn=cmd_ledger)

    p_bugs = sub.add_parser("bugs", help="list the bug catalogue (bugs the simulator must catch)")
    p_bugs.add_argument("-v", "--verbose", action="store_true", help="also the bug class, source and switch site")
    p_bugs.set_defaults(fn=cmd_bugs)

    p_hunt = sub.add_parser("hunt", help="run seeds with a catalogued bug switched on until one fails")
    which = p_hunt.add_mutually_exclusive_group(required=True)
    which.add_argument("--bug", action="append", choices=sorted(bugs_mod.BY_NAME), metavar="NAME",
                       help="the entry to hunt (repeatable)")
    which.add_argument("--all", action="store_true", help="every entry, then a table")
    p_hunt.add_argument("--seeds", type=_whole(1), default=None, help="seeds 0..N-1 (default: each entry's budget)")
    p_hunt.add_argument("--jobs", type=_JOBS, default=0, help="worker processes (default: all cores)")
    p_hunt.add_argument("--workload", choices=list(scenarios_mod.BY_NAME), default=None,
                        help="hunt in this scenario instead of the entry's own")
    p_hunt.add_argument("--rate", action="store_true", help="run every seed and report the detection rate too")
    p_hunt.add_argument("--skip-check", action="append", type=_invariant_id, metavar="ID",
                        help="leave the checks of this invariant out (repeatable), to see which other oracle catches "
                             "the bug; the report says in how many seeds each would have fired")
    p_hunt.set_defaults(fn=cmd_hunt)

    from sim.campaign import mutate as mutate_mod
    p_mutate = sub.add_parser("mutate", help="mutation testing of the protocol modules, each mutant judged by a "
                                             "campaign over every scenario plus its package's tests")
    mutate_mod.add_arguments(p_mutate)
    p_mutate.set_defaults(fn=mutate_mod.cmd_mutate)

    ns, unknown = parser.parse_known_args(argv)
    if unknown:  # refused by the command's own parser: its usage lists the options it takes
        (sub.choices.get(ns.command) or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    ns.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return ns.fn(ns)
    except KeyboardInterrupt:  # a Ctrl-C no campaign turned into its report (or a second one)
        print("\nsim: interrupted (Ctrl-C)", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:  # `sim ledger | head`: the reader left; whatever was to be recorded was
        if argv is not None:  # called in a process of the caller's (tests): its stdout is not ours to close
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # 128 + SIGPIPE, as a shell reports a writer the pipe stopped


if __name__ == "__main__":
    sys.exit(main())
