"""``./just dst --coverage`` (sim/campaign/coverage.py): a campaign measured under coverage.py, per
protocol module, with every branch never taken; each module held to its floor
(:data:`sim.campaign.coverage.FLOORS`, one place) for the short campaign
:data:`sim.campaign.coverage.TEST_CAMPAIGN` (seed 1 of every scenario, in a subprocess)."""

from __future__ import annotations

import io
import re

import pytest

from sim.campaign import coverage as cc
pytestmark = pytest.mark.xdist_group("sim-coverage")


@pytest.fixture(scope="module")
def measured() -> tuple[int, cc.CoverageReport]:
    import subprocess

    # Plus a package no scenario imports (the benchmarks): it must count, wholly uncovered.
    return cc.measure_command(cc.TEST_CAMPAIGN, modules=cc.PROTOCOL_MODULES + (NEVER_IMPORTED,),
                              stdout=subprocess.DEVNULL, env={**__import__("os").environ, "SIM_LEDGER": "off"})


NEVER_IMPORTED = "bench"


def test_every_protocol_module_has_a_floor() -> None:
    assert set(cc.FLOORS) == set(cc.PROTOCOL_MODULES)
    for name, (line, branch) in cc.FLOORS.items():
        assert 0 < line <= 100 and 0 < branch <= 100, name


def test_a_module_the_campaign_never_imports_counts_wholly_uncovered(measured) -> None:
    _, report = measured
    for name in (NEVER_IMPORTED,):
        m = report.module(name)
        assert m.statements > 0 and m.covered_lines == 0 and m.branches > 0 and m.covered_branches == 0, m
        assert m.branch_pct == 0.0 and all(f.missing_branches for f in m.files if f.branches)


def test_the_short_campaign_reaches_every_floor(measured) -> None:
    code, report = measured
    assert code == 0, "the measured campaign failed a seed"
    assert [m.name for m in report.modules] == [*cc.PROTOCOL_MODULES, NEVER_IMPORTED]
    assert not cc.below_floors(report), cc.below_floors(report)


def test_report_lists_modules_files_and_branches_never_taken(measured) -> None:
    _, report = measured
    table = cc.format_table(report, files=True)
    assert "slatedb/gc " in table and "slatedb/gc/collector.py" in table and "slatedb/destroy.py" in table
    branches = cc.format_branches(report).splitlines()
    assert len(branches) > 1
    assert all(re.match(r"  slatedb/\S+\.py:(\d+->(\d+|exit)  |: \.\.\. \d+ more)", ln) for ln in branches[1:])
    gc = report.module("gc")
    assert gc.statements > 0 and 0 < gc.covered_lines < gc.statements


def test_a_floor_above_the_measure_is_reported(measured) -> None:
    _, report = measured
    wal = report.module("wal")
    problems = cc.below_floors(report, {"wal": (min(100.0, wal.line_pct + 0.1), 0.0)})
    assert problems and problems[0].startswith("slatedb/wal: lines")


def test_dst_coverage_reruns_the_same_campaign_under_coverage(monkeypatch, capsys) -> None:
    from sim import cli
    seen = []
    report = cc.CoverageReport((cc.ModuleCoverage("wal", (cc.FileCoverage("slatedb/wal/writer.py", 10, 7, 4, 3, (5,),
                                                                           ((12, 14),)),)),))
    monkeypatch.setattr(cc, "measure_command", lambda argv: (seen.append(list(argv)), (0, report))[1])
    assert cli.main(["dst", "--workload", "db", "--seeds", "0..2", "--coverage", "--jobs", "1"]) == 0
    assert seen == [["dst", "--workload", "db", "--seeds", "0..2", "--jobs", "1"]]
    out = capsys.readouterr().out
    assert "slatedb/wal " in out and "70.0%" in out and "slatedb/wal/writer.py:12->14" in out
