"""``sim diff`` / ``./just diff``: the differential campaign against the official engine.

For each seed and mode (shared store, twin stores) a sequence is generated
(:func:`sim.diff.ops.generate`) and run (:func:`sim.diff.run.run_sequence`). A mismatch prints
the seed, the step and what differed, then a shrunk sequence that still fails the same way (delta
debugging over the operation list: chunks removed, halves first, each candidate replayed on fresh
stores, kept when the failure's kind — ``read``, ``twin``, ``check:<ID>``, ``error:<engine>`` —
is unchanged), saved as JSON under ``.sim/`` with its replay command."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from slatedb.runtime.production import ProductionRuntime

from .engines import OUR, THEIRS, Engine
from .ops import SHARED, TWIN, generate
from .run import Mismatch, Stats, run_sequence

OUT_DIR = Path(".sim")


def shrink(ops: list[dict], mode: str, engines, kind: str, allow, budget: int) -> tuple[list[dict], int]:
    """ddmin: the smallest sub-list found (within ``budget`` replays) that fails with ``kind``."""
    runs = 0
    head = [o for o in ops[:1] if o["op"] == "open"]
    body = ops[len(head):]
    n = 2
    while len(body) >= 2 and runs < budget:
        chunk = max(1, len(body) // n)
        removed = False
        for start in range(0, len(body), chunk):
            if runs >= budget:
                break
            cand = body[:start] + body[start + chunk:]
            runs += 1
            got = run_sequence(head + cand, mode, engines, Stats(), allow)
            if got is not None and got.kind == kind:
                body = cand
                n = max(n - 1, 2)
                removed = True
                break
        if not removed:
            if chunk == 1:
                break
            n = min(len(body), n * 2)
    return head + body, runs


def campaign(seeds: range, steps: int, modes: list[str], *, allow: frozenset[str] = frozenset(),
             shrink_budget: int = 30, out=None, workdir: Path | None = None) -> tuple[Stats, list[dict]]:
    if out is None:
        def out(line: str) -> None:
            print(line, flush=True)
    stats = Stats()
    failures: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="slatedb-diff-engines-"))
    engines = {OUR: Engine(OUR, tmp), THEIRS: Engine(THEIRS, tmp)}
    try:
        for seed in seeds:
            for mode in modes:
                ops = generate(seed, steps, mode)
                got = run_sequence(ops, mode, engines, stats, allow, keep=workdir)
                if got is None:
                    continue
                failures.append(_report(seed, mode, ops, got, engines, allow, shrink_budget, out))
    finally:
        for e in engines.values():
            e.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return stats, failures


def spark_campaign(seeds: range, steps: int, modes: list[str], *, allow: frozenset[str] = frozenset(),
                   shrink_budget: int = 30, master: str | None = None, spark: Any = None,
                   out=None) -> tuple[Stats, list[dict]]:
    """The campaign with each sequence a Spark task (:mod:`sim.diff.spark`); mismatches are
    shrunk and reported on the driver."""
    from sim.campaign.spark_engine import DEFAULT_MASTER, spark_session

    from .spark import STAT_FIELDS, diff_on

    if out is None:
        def out(line: str) -> None:
            print(line, flush=True)
    if spark is None:
        with spark_session(master or DEFAULT_MASTER, app_name="sim-diff") as session:
            rows = diff_on(session, seeds, steps, modes, allow)
    else:
        rows = diff_on(spark, seeds, steps, modes, allow)
    stats = Stats()
    for r in rows:
        for f in STAT_FIELDS:
            setattr(stats, f, getattr(stats, f) + r[f])
    failures: list[dict] = []
    bad = [r for r in rows if r["mismatch"] is not None]
    if bad:
        tmp = Path(tempfile.mkdtemp(prefix="slatedb-diff-engines-"))
        engines = {OUR: Engine(OUR, tmp), THEIRS: Engine(THEIRS, tmp)}
        try:
            for r in bad:
                m = r["mismatch"]
                got = Mismatch(m["step"], m["op"], m["kind"], m["detail"])
                failures.append(_report(r["seed"], r["mode"], generate(r["seed"], steps, r["mode"]), got, engines,
                                        allow, shrink_budget, out))
        finally:
            for e in engines.values():
                e.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    return stats, failures


def _report(seed, mode, ops, got: Mismatch, engines, allow, budget, out) -> dict:
    out(f"MISMATCH seed {seed} mode {mode} step {got.step} {json.dumps(got.op)}: {got.kind}: {got.detail[:600]}")
    small, runs = shrink(ops, mode, engines, got.kind, allow, budget) if budget else (ops, 0)
    OUT_DIR.mkdir(exist_ok=True)
    path = OUT_DIR / f"diff-{mode}-{seed}.json"
    path.write_text(json.dumps({"seed": seed, "mode": mode, "kind": got.kind, "ops": small}, indent=1))
    out(f"  shrunk to {len(small)} of {len(ops)} operations in {runs} replays: {path}")
    for o in small:
        out(f"    {_short(o)}")
    out(f"  replay: ./just diff --replay {path}")
    return {"seed": seed, "mode": mode, "step": got.step, "kind": got.kind, "detail": got.detail,
            "shrunk": small, "file": str(path)}


def _short(op: dict) -> str:
    """An operation for the terminal: long values cut (the saved file has them whole)."""
    def cut(v):
        if isinstance(v, str) and len(v) > 48:
            return v[:40] + f"...({len(v)} chars)"
        if isinstance(v, list):
            return [cut(x) for x in v]
        if isinstance(v, dict):
            return {k: cut(x) for k, x in v.items()}
        return v
    return json.dumps(cut(op))


def _seeds(text: str) -> range:
    if ".." in text:
        a, b = text.split("..")
        return range(int(a), int(b) + 1)
    return range(int(text), int(text) + 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sim diff", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0..19", help="seed range A..B (inclusive)")
    p.add_argument("--steps", type=int, default=40, help="operations per sequence")
    p.add_argument("--mode", choices=(SHARED, TWIN, "both"), default="both")
    p.add_argument("--allow", default="", help="comma-separated check invariants to tolerate (a known defect)")
    p.add_argument("--shrink-budget", type=int, default=30, help="replays spent shrinking each mismatch")
    p.add_argument("--replay", default=None, help="a saved sequence (.sim/diff-*.json) to run again")
    p.add_argument("--keep", default=None, help="keep the stores under this directory")
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    p.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="local: sequences one after another; spark: one Spark task per seed and mode")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    ns = p.parse_args(argv)
    allow = frozenset(x for x in ns.allow.split(",") if x)
    keep = Path(ns.keep) if ns.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    clock = ProductionRuntime()  # the campaign's wall time, printed only
    started = clock.now_ms()
    if ns.replay:
        saved = json.loads(Path(ns.replay).read_text())
        tmp = Path(tempfile.mkdtemp(prefix="slatedb-diff-engines-"))
        engines = {OUR: Engine(OUR, tmp), THEIRS: Engine(THEIRS, tmp)}
        try:
            got = run_sequence(saved["ops"], saved["mode"], engines, Stats(), allow, keep=keep)
        finally:
            for e in engines.values():
                e.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        print("passes" if got is None else f"fails at step {got.step} {json.dumps(got.op)}: {got.kind}: {got.detail}")
        return 0 if got is None else 1
    modes = [SHARED, TWIN] if ns.mode == "both" else [ns.mode]
    if ns.engine == "spark":
        stats, failures = spark_campaign(_seeds(ns.seeds), ns.steps, modes, allow=allow,
                                         shrink_budget=ns.shrink_budget, master=ns.master)
    else:
        stats, failures = campaign(_seeds(ns.seeds), ns.steps, modes, allow=allow, shrink_budget=ns.shrink_budget,
                                   workdir=keep)
    figures = {"sequences": stats.sequences, "operations": stats.operations, "engine_switches": stats.switches,
               "kills": stats.kills, "reads_compared": stats.reads, "checks": stats.checks,
               "skipped": stats.skipped, "mismatches": len(failures),
               "kinds": sorted({f["kind"] for f in failures}), "seconds": round((clock.now_ms() - started) / 1000, 1)}
    if ns.json:
        print(json.dumps(figures))
    else:
        print("differential campaign: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
