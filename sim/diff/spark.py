"""``./just diff --engine spark``: the differential campaign's sequences as Spark tasks (one per
seed and mode, each task with its own pair of engine servers), the way ``sim sweep --engine
spark`` runs seeds. Mismatches come back to the driver, which shrinks and reports them as the
local engine does."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

from sim.campaign.spark_engine import MAX_PARTITIONS

from .engines import OUR, THEIRS, Engine
from .ops import generate
from .run import Stats, run_sequence

STAT_FIELDS = ("sequences", "operations", "switches", "kills", "reads", "checks", "skipped")


def run_one(seed: int, mode: str, steps: int, allow: frozenset[str]) -> dict:
    """One sequence on fresh engines: its figures and its mismatch (None when it passed)."""
    tmp = Path(tempfile.mkdtemp(prefix="slatedb-diff-task-"))
    engines = {OUR: Engine(OUR, tmp), THEIRS: Engine(THEIRS, tmp)}
    stats = Stats()
    try:
        got = run_sequence(generate(seed, steps, mode), mode, engines, stats, allow)
    finally:
        for e in engines.values():
            e.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return {"seed": seed, "mode": mode, **{f: getattr(stats, f) for f in STAT_FIELDS},
            "mismatch": None if got is None else {"step": got.step, "op": got.op, "kind": got.kind,
                                                  "detail": got.detail}}


def diff_on(spark: Any, seeds: Iterable[int], steps: int, modes: list[str], allow: frozenset[str]) -> list[dict]:
    """Every (seed, mode) as a Spark task on ``spark``; the rows in (seed, mode) order."""
    pairs = [(s, m) for s in seeds for m in modes]
    rdd = spark.sparkContext.parallelize(pairs, min(len(pairs), MAX_PARTITIONS))
    rows = rdd.map(lambda p: run_one(p[0], p[1], steps, allow)).collect()
    return sorted(rows, key=lambda r: (r["seed"], r["mode"]))
