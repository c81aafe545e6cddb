"""The simulator's command line: ``sim run --seed S`` and ``sim dst`` (a campaign over seeds).

Two scenarios (``--workload``): ``store``, the object-store workload of
:mod:`sim.store_workload` (concurrent CAS, sequence claims and private keys under swarm faults,
checked by its oracle), and ``db``, writers fencing each other on one database
(:mod:`sim.db_workload`, checked by the invariants of ``spec/protocols/``). A failing seed prints
the one command that replays it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys

from slatedb.runtime.production import ProductionRuntime

from .db_workload import run_db_workload
from .store_workload import StoreRunResult, run_store_workload

#: Wall time is only reported (time compression), never fed into a run: read it through the
#: production runtime, the one module that owns the real clock.
_WALL = ProductionRuntime("sim-cli")


def _run_seed(args: tuple[int, int, int, str, str]) -> tuple[StoreRunResult, float]:
    seed, n_ops, n_clients, faults, workload = args
    start = _WALL.monotonic_s()
    if workload == "db":
        result = run_db_workload(seed, faults="none" if faults == "none" else "swarm")
    else:
        result = run_store_workload(seed, n_ops=n_ops, n_clients=n_clients, faults=faults)
    return result, _WALL.monotonic_s() - start  # type: ignore[return-value]


def _replay(ns: argparse.Namespace, seed: int) -> str:
    return (f"./just sim run --seed {seed} --workload {ns.workload} --ops {ns.ops} --clients {ns.clients} "
            f"--faults {ns.faults}")


def _parse_seeds(text: str) -> range:
    if ".." in text:
        lo, hi = text.split("..", 1)
        return range(int(lo), int(hi) + 1)
    return range(int(text))


def cmd_run(ns: argparse.Namespace) -> int:
    result, wall_s = _run_seed((ns.seed, ns.ops, ns.clients, ns.faults, ns.workload))
    print(f"seed {result.seed}: {'PASS' if result.ok else 'FAIL'}  trace {result.digest[:16]}  "
          f"events {result.events}  virtual {result.virtual_s:.1f}s  wall {wall_s:.2f}s  faults {result.faults}")
    for v in result.violations:
        print(f"  violation: {v}")
    if not result.ok:
        if getattr(result, "last_events", ""):
            print("last events:\n" + result.last_events)  # type: ignore[attr-defined]
        print(f"replay: {_replay(ns, ns.seed)}")
    return 0 if result.ok else 1


def cmd_dst(ns: argparse.Namespace) -> int:
    seeds = _parse_seeds(ns.seeds)
    jobs = ns.jobs or os.cpu_count() or 1
    out = open(ns.out, "w") if ns.out else None
    start = _WALL.monotonic_s()
    failures: list[StoreRunResult] = []
    virtual_s = 0.0
    faults: dict[str, int] = {}
    done = 0
    work = [(seed, ns.ops, ns.clients, ns.faults, ns.workload) for seed in seeds]
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        for result, wall_s in pool.map(_run_seed, work):
            done += 1
            virtual_s += result.virtual_s
            for k, v in result.faults.items():
                faults[k] = faults.get(k, 0) + v
            if not result.ok:
                failures.append(result)
            if out:
                out.write(json.dumps({"seed": result.seed, "ok": result.ok, "digest": result.digest,
                                      "virtual_s": result.virtual_s, "wall_s": wall_s,
                                      "faults": result.faults, "violations": list(result.violations)}) + "\n")
            if sys.stderr.isatty() or done % max(1, len(work) // 10) == 0 or done == len(work):
                print(f"\r[{done}/{len(work)}] failures {len(failures)}", end="" if sys.stderr.isatty() else "\n",
                      file=sys.stderr, flush=True)
    wall = _WALL.monotonic_s() - start
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print("scenario        " + ("db-workload (three writers fencing each other; FENCE-*, DUR-1, BOUNDARY-3)"
                                 if ns.workload == "db" else "store-workload (object-store CAS, claims, private keys)"))
    print(f"runs            {len(work)}")
    print(f"failures        {len(failures)}")
    print(f"faults injected {sum(faults.values())} {faults}")
    print(f"virtual time    {virtual_s:.0f} s")
    print(f"wall time       {wall:.1f} s on {jobs} jobs")
    print(f"compression     {virtual_s / max(wall * jobs, 1e-9):.0f}x per core")
    for f in failures:
        print(f"FAIL seed {f.seed}: {f.violations[0]}")
        print(f"  replay: {_replay(ns, f.seed)}")
    if out:
        out.close()
    return 1 if failures else 0


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

    p_dst = sub.add_parser("dst", help="a campaign over many seeds, on all cores")
    p_dst.add_argument("--seeds", default="0..199", help="N or A..B (inclusive); default 0..199")
    p_dst.add_argument("--jobs", type=int, default=0, help="worker processes (default: all cores)")
    p_dst.add_argument("--out", help="write one JSON line per seed to this file")
    common(p_dst)
    p_dst.set_defaults(fn=cmd_dst)

    ns = parser.parse_args(argv)
    return ns.fn(ns)


if __name__ == "__main__":
    sys.exit(main())
