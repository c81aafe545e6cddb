"""The subprocess that judges one mutant (or the baseline) for ``sim mutate``: ``python -m
sim.campaign.mutate_judge SPEC OUT``, run in a copy of the tree by :func:`sim.campaign.mutate.judge`.

It runs the checks of ``SPEC`` (scenario seeds, pytest runs) in order, one JSON line per check to
``OUT``, and stops at the first failure unless the spec says ``all`` (the baseline). A check with
``box_s`` that runs longer (process CPU seconds) is stopped and reported as a timeout.

With ``coverage`` in the spec (the baseline), it records which lines of ``slatedb/`` each check
executes, as coverage.py *contexts*: ``seed::SCENARIO::SEED`` for a seed, ``test::NODEID`` for one
test (set when the test's setup starts), ``<import>`` for what runs while the protocol modules are
imported, ``collect::...`` for pytest's collection. Coverage starts before anything under
``slatedb`` is imported (this module imports nothing of the project at the top), so a line that
only runs at import time is seen as such. The per-context lines go to ``OUT.cov.json``; per test
it also reports the outcome, the seconds it took and whether it started a subprocess (whose lines
coverage does not see), for :mod:`sim.campaign.mutate_select`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

#: The context of the lines run while importing the protocol modules (before any check).
IMPORT_CONTEXT = "<import>"

#: Tests of a package left out of the judge, and why (passed to pytest as ``--ignore``).
JUDGE_IGNORED_TESTS: dict[str, str] = {
    "tests/gc/test_live.py": "runs on the real clock: its work grows with the machine's load (over 5 CPU minutes at "
                             "nice 19 on a loaded machine) and its verdict depends on timing",
}


class CheckTimeout(BaseException):
    """Raised in the judge when a check outruns its own CPU box (``box_s``, ITIMER_PROF)."""


def check_label(check: dict) -> str:
    if check["kind"] == "seed":
        return f"{check['scenario']} seed {check['seed']}"
    label = "tests " + " ".join(check["paths"])
    if check.get("nodes") is not None:
        label += f" ({len(check['nodes'])} selected)"
    return label


def seed_context(scenario: str, seed: int) -> str:
    return f"seed::{scenario}::{seed}"


def test_context(nodeid: str) -> str:
    return f"test::{nodeid}"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _import_modules(files: list[str]) -> None:
    """Import these modules (paths relative to the tree; what fails to import is left), so that the
    lines run at import are all recorded under :data:`IMPORT_CONTEXT`, not under whichever check
    happens to import a module first."""
    import importlib

    for rel in files:
        parts = Path(rel).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        try:
            importlib.import_module(name)
        except BaseException as e:  # noqa: BLE001 - optional dependencies, modules meant as scripts
            if isinstance(e, KeyboardInterrupt):
                raise


def judge_main(spec_path: str, out_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    here = Path.cwd().resolve()
    cov = None
    if spec.get("coverage"):
        import coverage

        cov = coverage.Coverage(data_file=str(here / ".mutate-coverage"), include=[str(here / "slatedb" / "*")],
                                config_file=False)
        cov.start()
        cov.switch_context(IMPORT_CONTEXT)
    with open(out_path, "a") as out:
        def emit(d: dict) -> None:
            out.write(json.dumps(d) + "\n")
            out.flush()

        import slatedb

        if not Path(slatedb.__file__).resolve().is_relative_to(here):
            emit({"check": "isolation", "ok": False, "violation": f"imported {slatedb.__file__}, not the copy in {here}"})
            return 1
        if cov is not None:
            _import_modules(spec.get("imports", []))
        over: list[float] = []

        def on_prof(_signum: int, _frame: Any) -> None:  # the check's CPU box ran out
            over.append(_cpu())
            raise CheckTimeout()

        signal.signal(signal.SIGPROF, on_prof)
        for check in spec["checks"]:
            label = check_label(check)
            before = _cpu()
            box = check.get("box_s")
            if box:
                signal.setitimer(signal.ITIMER_PROF, box, 1.0)  # again each CPU second if swallowed
            try:
                res = _run_check(check, cov, exitfirst=not spec.get("all"))
            except BaseException as e:  # noqa: BLE001 - a mutant may break anything, even imports
                if isinstance(e, KeyboardInterrupt):
                    raise
                res = {"ok": False, "violation": f"{type(e).__name__}: {e}"}
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            if over:  # whatever the check reported after the interruption: it ran out of time
                res = {"ok": False, "timeout": True, "violation": f"over its time box ({box:.0f} CPU s)"}
            emit({"check": label, **res, "cost_s": _cpu() - before, "cpu_s": _cpu()})
            if not res["ok"] and not spec.get("all"):
                break
        if cov is not None:
            cov.stop()
            cov.save()
            _write_coverage(cov, here, Path(out_path + ".cov.json"))
        emit({"done": True, "cpu_s": _cpu()})
    return 0


def _write_coverage(cov: Any, here: Path, dest: Path) -> None:
    """``{context: {path relative to the tree: [lines]}}``."""
    data = cov.get_data()
    out: dict[str, dict[str, list[int]]] = {}
    for f in data.measured_files():
        rel = Path(f).resolve().relative_to(here).as_posix()
        for line, contexts in data.contexts_by_lineno(f).items():
            for ctx in contexts:
                out.setdefault(ctx, {}).setdefault(rel, []).append(line)
    for files in out.values():
        for lines in files.values():
            lines.sort()
    dest.write_text(json.dumps(out))


def _run_check(check: dict, cov: Any = None, exitfirst: bool = True) -> dict:
    if check["kind"] == "seed":
        if cov is not None:
            cov.switch_context(seed_context(check["scenario"], check["seed"]))
        from sim.campaign.sweep import Scenario, run_seed

        row = run_seed(Scenario(workload=check["scenario"]), check["seed"])
        return {"ok": row["ok"], "digest": row["digest"], "violation": (row["violations"] or [""])[0][:500]}
    import subprocess

    import pytest

    nodes = check.get("nodes")
    order = {n: i for i, n in enumerate(nodes)} if nodes is not None else None

    class Plugin:
        """Failures; with coverage, a context per test and each test's outcome, time, subprocesses;
        with ``nodes``, only those tests, in that order."""

        def __init__(self) -> None:
            self.failed: list[str] = []
            self.tests: dict[str, dict] = {}
            self.current: str | None = None

        def pytest_collection_modifyitems(self, items: list) -> None:
            if order is not None:
                items[:] = sorted((it for it in items if it.nodeid in order), key=lambda it: order[it.nodeid])

        def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
            self.current = nodeid
            self.tests.setdefault(nodeid, {"ok": True, "skipped": False, "s": 0.0, "subprocess": False})
            if cov is not None:
                cov.switch_context(test_context(nodeid))

        def pytest_runtest_logreport(self, report: Any) -> None:
            t = self.tests.setdefault(report.nodeid, {"ok": True, "skipped": False, "s": 0.0, "subprocess": False})
            t["s"] += report.duration
            if report.failed:
                t["ok"] = False
                self.failed.append(report.nodeid)
            if report.skipped:
                t["skipped"] = True

        def pytest_collectreport(self, report: Any) -> None:
            if report.failed:
                self.failed.append(f"collecting {report.nodeid}")

    plugin = Plugin()
    real_init = subprocess.Popen.__init__

    def popen_init(self: Any, *a: Any, **kw: Any) -> None:  # coverage cannot see into a child process
        if plugin.current is not None and plugin.current in plugin.tests:
            plugin.tests[plugin.current]["subprocess"] = True
        real_init(self, *a, **kw)

    if cov is not None:
        cov.switch_context("collect::" + " ".join(check["paths"]))
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    ignored = [f"--ignore={p}" for p in JUDGE_IGNORED_TESTS]
    try:
        rc = pytest.main([*check["paths"], *ignored, *(["-x"] if exitfirst else []), "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", "--hypothesis-seed=0", "-o", "addopts=", "-W",
                          "ignore::DeprecationWarning"], plugins=[plugin])
    finally:
        subprocess.Popen.__init__ = real_init  # type: ignore[method-assign]
    ok = int(rc) in (0, 5)
    res = {"ok": ok, "violation": "" if ok else f"pytest exit {int(rc)}: {', '.join(plugin.failed[:3]) or 'failed'}"}
    if cov is not None:
        res["tests"] = plugin.tests
    return res


if __name__ == "__main__":
    sys.exit(judge_main(sys.argv[1], sys.argv[2]))
