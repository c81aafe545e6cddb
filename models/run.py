#!/usr/bin/env python3
"""Check every Promela model and every unsafe variant with Spin; print a table.

Why this exists: the protocol pages in ``spec/protocols/`` state numbered
invariants; the models in this directory assert them.  A safe model must be
explored exhaustively (within its stated bounds) with no error, and each
unsafe variant -- the safe model with one protocol step removed, selected by a
``-D`` macro -- must make Spin produce a counterexample trail whose violated
assertion carries the expected invariant id.  An unsafe variant that passes
would mean the model (or the assertion) cannot see the bug it is there for.

Stdlib only.  Run from the repository root::

    .venv/bin/python models/run.py          # what ``./just models`` does

Tests import this file by path and call :func:`run_all` / :func:`run_one`.
Every run happens in its own temporary directory: no pan files are written
into the repository.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent
if str(MODELS_DIR.parent) not in sys.path:
    sys.path.insert(0, str(MODELS_DIR.parent))

from sim.world.invariants import SPEC_ID, SPEC_PREFIXES  # noqa: E402 - the one definition of ids (stdlib only)

#: Invariant ids look like ``FENCE-2`` (spec/protocols/README.md; defined in sim/world/invariants.py).
ID_PREFIXES = SPEC_PREFIXES
ID_RE = SPEC_ID

SAFE = "safe"

#: The one list of models, their bounds, and their unsafe variants.  Each
#: variant maps to the invariant id whose assertion Spin is expected to
#: violate first (Spin's depth-first search is deterministic, so this is stable).
MODELS: dict[str, dict] = {
    "wal_fencing": {
        "file": "wal_fencing.pml",
        "bounds": "3 writers, WAL ids 0..5, 1 data write each",
        "variants": {"UNSAFE_SKIP_FENCE": "DUR-1",
                     "UNSAFE_NO_EPOCH_RECHECK": "DUR-1",
                     "UNSAFE_L0_UNFENCED": "FENCE-5"},
    },
    "seqmeta_boundary": {
        "file": "seqmeta_boundary.pml",
        "bounds": "ids 1..5, writers with 1 and 3 attempts, GC 2 rounds",
        "variants": {"UNSAFE_NO_BOUNDARY_CHECK": "SEQMETA-1",
                     "UNSAFE_GC_DELETE_FIRST": "BOUNDARY-1"},
    },
    "checkpoint_gc": {
        "file": "checkpoint_gc.pml",
        "bounds": "SSTs 1..4, manifests 1..6, reader + compactor 2 CAS tries, GC 2 rounds",
        "variants": {"UNSAFE_GC_IGNORES_CHECKPOINTS": "GC-1",
                     "UNSAFE_GC_IGNORES_MIN_AGE": "GC-4"},
    },
    "reader_wal": {
        "file": "reader_wal.pml",
        "bounds": "WAL ids 1..4, manifests 1..6, reader 2 tries, GC 2 rounds",
        "variants": {"UNSAFE_GC_IGNORES_READER_CHECKPOINT": "READ-2"},
    },
    "compactor_fencing": {
        "file": "compactor_fencing.pml",
        "bounds": "2 compactors, 1 job, .manifest ids <= 6, .compactions ids <= 9",
        "variants": {"UNSAFE_NO_SECOND_BUMP": "CFENCE-2",
                     "UNSAFE_NO_REVALIDATE_AT_COMMIT": "COMPACT-3",
                     "UNSAFE_COMPACTIONS_BEFORE_MANIFEST": "COMPACT-2",
                     "UNSAFE_RECOMMIT_VALIDATES_FIRST": "COMPACT-10"},
    },
    "compaction_resume": {
        "file": "compaction_resume.pml",
        "bounds": "2 sources x 3 rows, keys 1..3, SST size 1..2, <= 2 crashes",
        "variants": {"UNSAFE_RESUME_REEMIT": "RESUME-2",
                     "UNSAFE_RESUME_SKIP_KEY": "RESUME-1"},
    },
    "clone_init": {
        "file": "clone_init.pml",
        "bounds": "parent manifests 1..2, SSTs 1..3, WAL ids 1..4, GC 2 rounds",
        "variants": {"UNSAFE_CLONE_NO_FINAL_CHECKPOINT": "CLONE-2",
                     "UNSAFE_CLONE_COPY_ALL_WAL": "CLONE-3"},
    },
    "destroy": {
        "file": "destroy.pml",
        "bounds": "WAL ids 1..4, 2 objects + manifest, 1 crash of the hard destroy",
        "variants": {"UNSAFE_SOFT_NO_FENCE": "DESTROY-2",
                     "UNSAFE_OPEN_IGNORES_DESTROYED": "DESTROY-3",
                     "UNSAFE_HARD_CHECK_OUTSIDE_CAS": "DESTROY-1",
                     "UNSAFE_DELETE_MANIFEST_FIRST": "DESTROY-4",
                     "UNSAFE_RELEASE_AFTER_DELETE": "DESTROY-5"},
    },
    "projection_union": {
        "file": "projection_union.pml",
        "bounds": "keys 0..3, 2+1 SSTs, every range and split point",
        "variants": {"UNSAFE_PROJECT_NO_NARROW": "PROJ-4",
                     "UNSAFE_UNION_SEQ_FIRST": "PROJ-3"},
    },
}

PAN_DEPTH = 100000


@dataclasses.dataclass
class Result:
    """Outcome of one Spin run (one model, one variant)."""

    model: str
    variant: str              # "safe" or the -D macro of an unsafe variant
    bounds: str
    expected: str             # "safe" or the expected violated invariant id
    states: int = 0           # "N states, stored" from pan
    errors: int = -1          # "errors: N" from pan (-1: pan did not report)
    verdict: str = "error"    # "safe", "counterexample" or "error"
    violated_id: str | None = None   # invariant id on the violated assert line
    trail: bool = False       # a .trail file was written
    seconds: float = 0.0
    detail: str = ""          # tool output on failure, or the violated line

    @property
    def ok(self) -> bool:
        """True when the run matches its expectation."""
        if self.expected == SAFE:
            return self.verdict == SAFE and self.errors == 0 and self.states > 0
        return (self.verdict == "counterexample" and self.trail
                and self.violated_id == self.expected)


def _defines(variant: str) -> list[str]:
    return [] if variant == SAFE else ["-D" + variant]


def _tool(name: str) -> str:
    path = shutil.which(name) or ("/usr/bin/" + name)
    return path


def violated_assertion(replay: str, source: str) -> tuple[int | None, str | None]:
    """From ``spin -t -p`` output, the violated line number and its invariant id.

    Spin prints ``spin: model.pml:LINE, Error: assertion violated``; the id is
    the ``/* ID */`` comment on that source line.
    """
    m = re.search(r"spin: \S+?:(\d+), Error: assertion violated", replay)
    if not m:
        return None, None
    line_no = int(m.group(1))
    lines = source.splitlines()
    line = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
    ids = ID_RE.findall(line)
    return line_no, (ids[0] if ids else None)


def run_one(model: str, variant: str = SAFE, workdir: str | os.PathLike | None = None) -> Result:
    """Generate, compile and run the verifier for one model variant.

    ``workdir``: run there and leave pan/trail files behind (tests replay the
    trail themselves); by default a temporary directory that is removed.
    """
    spec = MODELS[model]
    expected = SAFE if variant == SAFE else spec["variants"][variant]
    res = Result(model=model, variant=variant, bounds=spec["bounds"], expected=expected)
    start = time.monotonic()
    tmp = None
    if workdir is None:
        tmp = tempfile.mkdtemp(prefix=f"spin-{model}-")
        work = Path(tmp)
    else:
        work = Path(workdir)
        work.mkdir(parents=True, exist_ok=True)
    try:
        src_path = MODELS_DIR / spec["file"]
        source = src_path.read_text()
        pml = work / spec["file"]
        pml.write_text(source)
        spin, gcc = _tool("spin"), _tool("gcc")
        steps = [
            [spin, "-a", *_defines(variant), pml.name],
            # -O0: these state spaces are small, so compiling pan.c quickly
            # (~0.3 s against ~2 s at -O2) matters more than search speed.
            [gcc, "-w", "-O0", "-DSAFETY", "-o", "pan", "pan.c"],
        ]
        for cmd in steps:
            p = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
            if p.returncode != 0:
                res.detail = f"{' '.join(cmd)} failed:\n{p.stdout}{p.stderr}"
                return res
        p = subprocess.run(["./pan", f"-m{PAN_DEPTH}"], cwd=work, capture_output=True, text=True)
        out = p.stdout + p.stderr
        m = re.search(r"errors: (\d+)", out)
        res.errors = int(m.group(1)) if m else -1
        m = re.search(r"(\d+) states, stored", out)
        res.states = int(m.group(1)) if m else 0
        res.trail = (work / (pml.name + ".trail")).exists()
        if "max search depth too small" in out or res.errors < 0:
            res.detail = out
            return res
        if res.errors == 0:
            res.verdict = SAFE
            return res
        res.verdict = "counterexample"
        if res.trail:
            rp = subprocess.run([spin, "-t", "-p", *_defines(variant), pml.name],
                                cwd=work, capture_output=True, text=True)
            line_no, res.violated_id = violated_assertion(rp.stdout + rp.stderr, source)
            if line_no:
                res.detail = f"{spec['file']}:{line_no}: {source.splitlines()[line_no - 1].strip()}"
            else:
                res.detail = "no assertion in trail: " + (rp.stdout + rp.stderr)[-2000:]
        else:
            res.detail = out
        return res
    finally:
        res.seconds = time.monotonic() - start
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def all_runs() -> list[tuple[str, str]]:
    """Every (model, variant) pair: the safe model first, then its unsafe variants."""
    return [(name, v) for name, spec in MODELS.items() for v in (SAFE, *spec["variants"])]


def run_all(workers: int = 2) -> list[Result]:
    """Run every model and variant (``workers`` Spin runs at a time)."""
    pairs = all_runs()
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(lambda mv: run_one(*mv), pairs))


def format_table(results: list[Result]) -> str:
    """A plain-text table: model, variant, bounds, states, verdict (and problems)."""
    rows = [("model", "variant", "bounds", "states", "verdict", "violated", "check")]
    for r in results:
        rows.append((r.model, r.variant, r.bounds, str(r.states), r.verdict,
                     r.violated_id or "-", "ok" if r.ok else "FAIL"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    t0 = time.monotonic()
    results = run_all()
    print(format_table(results))
    bad = [r for r in results if not r.ok]
    for r in bad:
        want = "no error" if r.expected == SAFE else f"a trail violating {r.expected}"
        print(f"\nFAIL {r.model} [{r.variant}]: expected {want}, got {r.verdict}"
              f" ({r.violated_id or 'no id'})\n{r.detail}", file=sys.stderr)
    print(f"\n{len(results)} runs, {len(bad)} failed, {time.monotonic() - t0:.1f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
