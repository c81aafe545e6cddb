"""Side-by-side Db benchmark: ``python -m slatedb.bench.db`` (``./just bench``).

Runs the workload of shared/reference/baseline.md against our ``slatedb.Db`` (sync API), the
official ``slatedb==0.17.0`` wheel (in its own venv, see :mod:`slatedb.bench.official_venv`),
stdlib ``sqlite3``, and the embedded C-backed engines a Python user would pick: LevelDB
(``plyvel``), RocksDB (``rocksdict``) and LMDB (``lmdb``), pinned in a venv the benchmark makes
on first use (:mod:`slatedb.bench.peers_venv`). Every run of every engine is a fresh child
process pinned to CPU 0 with ``taskset -c 0``; runs are interleaved (ours, official, sqlite3,
plyvel, rocksdict, lmdb, ours, ...) so that a slow spell of the machine hits all engines alike;
the table shows the median of the runs, and one ratio column per peer. The children are
``db_workload_ours.py``, ``db_workload_official.py``, ``db_workload_sqlite.py`` and
``db_workload_peers.py``; each prints one ``__RESULT__{json}`` line, whose data checks the
driver verifies (the command exits non-zero on wrong data). See docs/benchmarks.md.

    python -m slatedb.bench.db                      # 3 runs of 100,000 keys, all engines
    python -m slatedb.bench.db --runs 1 --n 10000   # quick smoke
    python -m slatedb.bench.db --engines ours,official --json out.json
    python -m slatedb.bench.db --scale              # the scale curve: 100k, 1M, 10M keys (slatedb.bench.scale)
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from slatedb.bench.disk_floor import durable_create_floor, floor_line
from slatedb.bench.official_venv import REPO_ROOT, OfficialUnavailable, ensure_official_venv
from slatedb.bench.peers_venv import PEERS, ensure_peers_venv

HERE = Path(__file__).resolve().parent
ENGINES = ("ours", "official", "sqlite3", "plyvel", "rocksdict", "lmdb")
#: Opt-in columns (not in the default run): ``ours-nosync`` is ours with the local store's syncs
#: off (``file:///dir?fsync=false``, spec/objstore.md STORE-8), the official engine's durability.
OPT_IN = ("ours-nosync",)
OURS = ("ours", "ours-nosync")

#: (key, label, unit, higher_is_better)
PHASES = [
    ("put_one", "put, one call each", "keys/s", True),
    ("put_batch", "put, write batches of 100", "keys/s", True),
    ("get_existing", "get, existing keys", "gets/s", True),
    ("get_missing_in", "get, missing in range", "gets/s", True),
    ("get_beyond", "get, missing beyond last key", "gets/s", True),
    ("scan_one", "full scan, one row per step", "rows/s", True),
    ("scan_batch", "full scan, batches of 1000", "rows/s", True),
    ("durable_put", "durable put, one at a time", "puts/s", True),
    ("durable_p50_ms", "durable put, p50 latency", "ms", False),
    ("durable_put_16", "durable puts, 16 concurrent writers", "puts/s", True),
    ("close_ms", "close after loading N keys", "ms", False),
    ("close_cpu_ms", "close after loading N keys, process CPU", "ms", False),
    ("reopen_ms", "reopen", "ms", False),
    ("max_rss_mb", "max RSS of the process", "MB", False),
    ("get_existing_memtable", "extra: get existing, before close", "gets/s", True),
]


# --- running the children ------------------------------------------------------------------------


def pin_prefix(no_pin: bool) -> tuple[list[str], str]:
    """The ``taskset -c 0`` prefix, or none (and why) when pinning is off or impossible."""
    if no_pin:
        return [], "unpinned (--no-pin)"
    taskset = shutil.which("taskset")
    if taskset is None:
        return [], "UNPINNED: taskset not found (install util-linux); figures are noisier"
    probe = subprocess.run([taskset, "-c", "0", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return [], f"UNPINNED: 'taskset -c 0' failed ({probe.stderr.strip()}); figures are noisier"
    return [taskset, "-c", "0"], "each child pinned to CPU 0 with taskset -c 0"


def child_command(engine: str, venv_python: Path | None, n: int, tmpdir: str | None) -> list[str]:
    """The child that runs ``engine`` (``venv_python``: the official or the peers' venv)."""
    extra = ["--n", str(n)] + (["--tmpdir", tmpdir] if tmpdir else [])
    if engine == "ours":
        return [sys.executable, "-m", "slatedb.bench.db_workload_ours", *extra]
    if engine == "ours-nosync":
        return [sys.executable, "-m", "slatedb.bench.db_workload_ours", "--fsync", "off", *extra]
    if engine == "official":
        assert venv_python is not None
        return [str(venv_python), "-I", str(HERE / "db_workload_official.py"), *extra]
    if engine == "sqlite3":
        return [sys.executable, "-I", str(HERE / "db_workload_sqlite.py"), *extra]
    if engine in PEERS:
        assert venv_python is not None
        return [str(venv_python), "-I", str(HERE / "db_workload_peers.py"), "--engine", engine, *extra]
    raise ValueError(engine)


def run_child(cmd: list[str], engine: str, timeout_s: float) -> tuple[dict | None, str | None]:
    """Run one child; return (result, None) or (None, error text with the child's stderr)."""
    env = dict(os.environ)
    if engine not in OURS:  # isolated children: nothing of ours may leak in through PYTHON* variables
        env = {k: v for k, v in env.items() if not k.startswith("PYTHON")}
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-4000:]
        tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
        return None, f"timed out after {timeout_s:.0f} s\n{tail}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("__RESULT__")]
    if proc.returncode != 0 or not lines:
        return None, f"exit {proc.returncode}\n{proc.stderr[-8000:]}{proc.stdout[-2000:]}"
    return json.loads(lines[-1][len("__RESULT__") :]), None


# --- checks and formatting ------------------------------------------------------------------------


def check_result(res: dict) -> list[str]:
    """What is wrong with the data an engine returned (empty: all correct)."""
    c, n = res["checks"], res["n"]
    n_gets = max(1, n // 5)
    want = {
        "digest": c["expected_digest"], "batch_digest": c["expected_digest"], "rows": n, "batch_rows": n,
        "scan_one_rows": n, "scan_batch_rows": n, "hits_existing": n_gets, "hits_existing_memtable": n_gets,
        "hits_missing_in": 0, "hits_beyond": 0, "get_values_ok": True, "durable_ok": True,
    }
    return [f"{k}={c.get(k)!r} (want {v!r})" for k, v in want.items() if c.get(k) != v]


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit.endswith("/s"):
        if value >= 1e6:
            return f"{value / 1e6:.2f}M/s"
        if value >= 1e4:
            return f"{value / 1e3:.1f}k/s"
        if value >= 1e3:
            return f"{value / 1e3:.2f}k/s"
        return f"{value:.1f}/s"
    if unit == "ms":
        return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms" if value >= 1 else f"{value:.2f} ms"
    if unit == "MB":
        return f"{value:.0f} MB"
    return f"{value:g}"


def ratio(ours: float | None, other: float | None, higher: bool) -> str:
    """ours/other for rates, other/ours for times and sizes: >1 always means ours is better."""
    if ours is None or other is None or ours <= 0 or other <= 0:
        return "-"
    r = ours / other if higher else other / ours
    if r < 0.1:
        return f"{r:.2g}x"
    return f"{r:.2f}x" if r < 10 else f"{r:.1f}x"


def median_phases(results: list[dict]) -> dict[str, float]:
    keys = results[0]["phases"].keys()
    return {k: statistics.median(r["phases"][k] for r in results) for k in keys}


def render_table(medians: dict[str, dict], engines: list[str], n: int) -> str:
    cols = ["phase", "unit"] + [e for e in engines]
    others = [e for e in engines if e != "ours"] if "ours" in engines else []
    # ours with its syncs off against the official engine, whose local store never syncs
    nosync_vs = ["official"] if "ours-nosync" in engines and "official" in engines else []
    cols += [f"ours vs {e}" for e in others] + [f"ours-nosync vs {e}" for e in nosync_vs]
    cols.append("ratio is")
    rows = []
    for key, label, unit, higher in PHASES:
        label = label.replace("N keys", f"{n:,} keys")
        row = [label, unit]
        for e in engines:
            row.append(fmt(medians[e].get(key), unit) if e in medians else "failed")
        ours = medians.get("ours", {}).get(key)
        for e in others:
            row.append(ratio(ours, medians.get(e, {}).get(key), higher))
        for e in nosync_vs:
            row.append(ratio(medians.get("ours-nosync", {}).get(key), medians.get(e, {}).get(key), higher))
        row.append("ours/other (rate)" if higher else "other/ours (time, size)")
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [cols] + rows) for i in range(len(cols))]
    right = {i for i, c in enumerate(cols) if c not in ("phase", "unit", "ratio is")}

    def line(cells):
        return "| " + " | ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cols), sep] + [line(r) for r in rows])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


# --- main -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m slatedb.bench.db", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per engine; the table shows the median (default 3)")
    ap.add_argument("--n", type=int, default=100_000, help="keys loaded (default 100,000; gets are n/5)")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="comma-separated subset of: " + ", ".join(ENGINES + OPT_IN)
                         + " (default all but ours-nosync: ours with file:///dir?fsync=false)")
    ap.add_argument("--json", metavar="PATH", help="also write every run's figures and the medians as JSON")
    ap.add_argument("--no-pin", action="store_true", help="do not pin the children with taskset")
    ap.add_argument("--tmpdir", help="parent directory of the children's temp dirs (default: the system's)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds allowed per child run (default 1800)")
    sc = ap.add_argument_group("scale curve (--scale; see slatedb.bench.scale)")
    sc.add_argument("--scale", action="store_true",
                    help="run the scale curve instead of the main table: load, gets, scan and peak RSS at each size")
    sc.add_argument("--scale-sizes", default="100k,1M,10M", help="comma-separated key counts (default 100k,1M,10M)")
    sc.add_argument("--scale-engines", default=",".join(ENGINES),
                    help="comma-separated engines for --scale (default all: " + ", ".join(ENGINES) + ")")
    sc.add_argument("--scale-gets", type=int, default=20_000, help="hit gets and miss gets per size (default 20,000)")
    sc.add_argument("--scale-cap-min", type=float, default=30.0,
                    help="skip an engine at a size whose projected time (its previous size's, scaled by N) "
                         "exceeds this many minutes (default 30)")
    sc.add_argument("--scale-report", metavar="A.json,B.json",
                    help="print one scale report from the --json files of earlier --scale runs (runs nothing)")
    args = ap.parse_args(argv)
    if args.scale_report:
        from slatedb.bench.scale import report_from_json

        return report_from_json([p for p in args.scale_report.split(",") if p], ENGINES, fmt)
    if args.scale:
        args.engines = args.scale_engines
        if args.timeout == 1800:
            args.timeout = 4 * 3600.0
    wanted = {e.strip() for e in args.engines.split(",") if e.strip()}
    order = ("ours", "ours-nosync") + ENGINES[1:]
    engines = [e for e in order if e in wanted]  # columns always in this order
    unknown = wanted - set(order)
    if args.scale and "ours-nosync" in wanted:
        ap.error("--scale runs ours as deployed only (no ours-nosync)")
    if unknown or not engines or args.runs < 1 or args.n < 10:
        ap.error(f"bad --engines {sorted(unknown)} / --runs / --n (n >= 10)")

    prefix, pin_note = pin_prefix(args.no_pin)
    venvs: dict[str, Path] = {}  # engine -> the python of its venv (official wheel, peers)
    errors: dict[str, list[str]] = {e: [] for e in engines}
    if "official" in engines:
        try:
            venvs["official"] = ensure_official_venv()
        except OfficialUnavailable as e:
            errors["official"].append(str(e))
    if any(e in PEERS for e in engines):
        try:
            peers_python = ensure_peers_venv()
            venvs.update({e: peers_python for e in engines if e in PEERS})
        except OfficialUnavailable as e:
            for p in engines:
                if p in PEERS:
                    errors[p].append(str(e))

    if args.scale:
        from slatedb.bench.scale import run_scale

        return run_scale(args, engines, venvs, errors, prefix, pin_note, run_child, fmt, cpu_model)

    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    header = [
        f"Db benchmark, {stamp}: N = {args.n:,} keys, {max(1, args.n // 5):,} gets per get phase, "
        f"median of {args.runs} run(s) per engine, one fresh process per run",
        f"machine: {os.cpu_count()} CPUs, {cpu_model()}; Python {platform.python_version()}; {pin_note}",
    ]
    print("\n".join(header), file=sys.stderr, flush=True)

    runs: dict[str, list[dict]] = {e: [] for e in engines}
    for i in range(args.runs):
        for engine in engines:
            if engine not in (*OURS, "sqlite3") and engine not in venvs:
                continue  # its venv could not be made: reported below, column shows "failed"
            cmd = prefix + child_command(engine, venvs.get(engine), args.n, args.tmpdir)
            t0 = time.perf_counter()
            res, err = run_child(cmd, engine, args.timeout)
            took = time.perf_counter() - t0
            if res is None:
                errors[engine].append(f"run {i + 1}: {err}")
                print(f"  run {i + 1}/{args.runs} {engine:8s} FAILED after {took:.1f} s", file=sys.stderr, flush=True)
                continue
            bad = check_result(res)
            if bad:
                errors[engine].append(f"run {i + 1}: wrong data: " + "; ".join(bad))
            runs[engine].append(res)
            print(f"  run {i + 1}/{args.runs} {engine:8s} {took:6.1f} s"
                  f"{'' if not bad else '  WRONG DATA'}", file=sys.stderr, flush=True)

    medians = {e: median_phases(rs) for e, rs in runs.items() if rs}
    shown = engines
    versions = {e: rs[0]["version"] for e, rs in runs.items() if rs}
    print()
    print("\n".join(header))
    print("engines: " + ", ".join(f"{e} = {versions.get(e, 'FAILED')}" for e in shown)
          + "; default settings; local directory object store (file://) in a temp dir")
    print()
    print(render_table(medians, shown, args.n))
    print()
    print("ratio columns: >1 means ours is better (ours/other for rates; other/ours for ms and MB).")
    print("'extra' row: the same gets on the freshly loaded DB before close (rows in the memtable);")
    print("the main get rows run on the reopened DB. Put-in-batches loads a second, fresh DB.")
    floor = None
    if any(e in OURS for e in shown):  # what the durable rows are up against, measured now
        floor = durable_create_floor(args.tmpdir)
        print(floor_line(floor, 16, medians.get("official", {}).get("durable_put_16")))
    digests = {rs[0]["checks"]["digest"] for rs in runs.values() if rs}
    ok = [e for e in shown if runs.get(e) and not errors[e]]
    print(f"data checks: {', '.join(f'{e} ' + ('OK' if e in ok else 'FAILED') for e in shown)}"
          + ("; all engines scanned identical bytes" if len(digests) == 1 and len(ok) == len(shown) else ""))
    failed = {e: errs for e, errs in errors.items() if errs}
    for e, errs in failed.items():
        print(f"\n{e}: {len(errs)} problem(s)")
        for err in errs:
            print("  " + err.rstrip().replace("\n", "\n  "))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "date": stamp, "n": args.n, "runs_per_engine": args.runs, "pinning": pin_note,
            "machine": {"cpus": os.cpu_count(), "cpu": cpu_model(), "python": platform.python_version()},
            "median": medians, "runs": runs, "errors": errors, "disk_floor": floor,
        }, indent=1))
        print(f"\nwrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
