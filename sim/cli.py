"""The simulator's command line: ``sim run --seed S``, ``sim dst`` and ``sim sweep`` (campaigns
over seeds), ``sim bench`` (time compression on one core).

Two scenarios (``--workload``): ``store``, the object-store workload of
:mod:`sim.store_workload` (concurrent CAS, sequence claims and private keys under swarm faults,
checked by its oracle), and ``db``, writers fencing each other on one database
(:mod:`sim.db_workload`, checked by the invariants of ``spec/protocols/``). A failing seed prints
the one command that replays it. Campaigns run in :mod:`sim.sweep` (worker processes) or, with
``sim sweep --engine spark``, in :mod:`sim.spark_engine`.
"""

from __future__ import annotations

import argparse
import sys

from . import sweep as sweep_mod
from .store_workload import StoreRunResult
from .sweep import Scenario, parse_seeds


def _scenario(ns: argparse.Namespace) -> Scenario:
    return Scenario(workload=ns.workload, ops=ns.ops, clients=ns.clients, faults=ns.faults,
                    bugs=tuple(getattr(ns, "bug", None) or ()))


def _run_seed(args: tuple[int, int, int, str, str]) -> tuple[StoreRunResult, float]:
    """One seed: (seed, ops, clients, faults, workload) -> (the workload's result, wall seconds)."""
    seed, n_ops, n_clients, faults, workload = args
    return sweep_mod.simulate(Scenario(workload=workload, ops=n_ops, clients=n_clients, faults=faults), seed)


def _replay(ns: argparse.Namespace, seed: int) -> str:
    return _scenario(ns).replay(seed)


def _parse_seeds(text: str) -> range:
    return parse_seeds(text)


def cmd_run(ns: argparse.Namespace) -> int:
    result, wall_s = sweep_mod.simulate(_scenario(ns), ns.seed)
    print(f"seed {result.seed}: {'PASS' if result.ok else 'FAIL'}  trace {result.digest[:16]}  "
          f"events {result.events}  virtual {result.virtual_s:.1f}s  wall {wall_s:.2f}s  faults {result.faults}")
    for v in result.violations:
        print(f"  violation: {v}")
    if not result.ok:
        if getattr(result, "last_events", ""):
            print("last events:\n" + result.last_events)  # type: ignore[attr-defined]
        print(f"replay: {_replay(ns, ns.seed)}")
    return 0 if result.ok else 1


def cmd_sweep(ns: argparse.Namespace) -> int:
    """``sim dst`` and ``sim sweep``: a campaign over seeds, then the summary table, then one
    replay command per failing seed; non-zero if any seed failed."""
    try:
        seeds = parse_seeds(ns.seeds)
        scenario = _scenario(ns)
    except ValueError as e:
        print(f"sim: {e}", file=sys.stderr)
        return 2
    out = open(ns.out, "w") if ns.out else None
    try:
        if getattr(ns, "engine", "local") == "spark":
            from .spark_engine import SparkUnavailable, sweep_spark

            try:
                report = sweep_spark(scenario, seeds, master=ns.master, parquet=ns.parquet, out=out)
            except SparkUnavailable as e:
                print(f"sim: {e}", file=sys.stderr)
                return 2
        else:
            report = sweep_mod.sweep_local(scenario, seeds, jobs=ns.jobs, out=out)
    finally:
        if out:
            out.close()
    print(sweep_mod.format_summary(sweep_mod.summarize(report), scenario))
    if getattr(ns, "engine", "local") == "spark":
        print(f"{'parquet':<15} {ns.parquet}")
    if ns.out:
        print(f"{'results':<15} {ns.out}")
    failures = sweep_mod.format_failures(report.rows)
    if failures:
        print(failures)
    return 1 if any(not row["ok"] for row in report.rows) else 0


cmd_dst = cmd_sweep


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sim", description="Deterministic simulation of slatedb.")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--ops", type=int, default=2000, help="operations per run (default 2000)")
        p.add_argument("--clients", type=int, default=6, help="concurrent clients (default 6)")
        p.add_argument("--faults", choices=["swarm", "all", "none"], default="swarm")
        p.add_argument("--workload", choices=["store", "db"], default="store",
                       help="store: object-store CAS workload; db: writers fencing each other")

    p_run = sub.add_parser("run", help="run one seed and print its verdict and trace digest")
    p_run.add_argument("--seed", type=int, required=True)
    common(p_run)
    p_run.set_defaults(fn=cmd_run)

    def campaign(p: argparse.ArgumentParser) -> None:
        p.add_argument("--seeds", default="0..199", help="N or A..B (inclusive); default 0..199")
        p.add_argument("--jobs", type=int, default=0, help="worker processes (default: all cores)")
        p.add_argument("--out", help="write one JSON line per seed to this file")
        common(p)

    p_dst = sub.add_parser("dst", help="a campaign over many seeds, on all cores")
    campaign(p_dst)
    p_dst.set_defaults(fn=cmd_sweep, engine="local")

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
    p_bench.add_argument("--min-compression", type=float, default=0.0,
                         help="exit non-zero below this many virtual s per wall s")
    common(p_bench)
    p_bench.set_defaults(fn=cmd_bench, workload="db")

    ns = parser.parse_args(argv)
    return ns.fn(ns)


if __name__ == "__main__":
    sys.exit(main())
