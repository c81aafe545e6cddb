"""The campaign ledger (sim/campaign/ledger.py): every campaign -- ``sim dst``, ``sim sweep`` (local and
Spark), ``sim hunt`` -- appends its summary; ``sim ledger`` prints cumulative seeds per scenario
and commit."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from sim import cli

from sim.campaign import ledger
@pytest.fixture
def ledger_file(tmp_path, monkeypatch) -> str:
    path = str(tmp_path / "ledger.sqlite")
    monkeypatch.setenv("SIM_LEDGER", path)
    monkeypatch.setenv("SIM_LEDGER_PARQUET", str(tmp_path / "ledger.parquet"))
    return path


def _rows(path: str) -> list[dict]:
    return ledger.read_sqlite(path)


def test_dst_sweep_and_hunt_append_one_row_each(ledger_file, capsys) -> None:
    assert cli.main(["dst", "--workload", "store", "--seeds", "0..3", "--ops", "150", "--jobs", "1"]) == 0
    assert cli.main(["sweep", "--workload", "db", "--seeds", "5..6", "--jobs", "1"]) == 0
    assert cli.main(["hunt", "--bug", "zombie-ack", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert f"ledger          {ledger_file}" in out
    rows = _rows(ledger_file)
    assert [(r["kind"], r["scenario"], r["engine"]) for r in rows] == [
        ("dst", "store", "local"), ("sweep", "db", "local"), ("hunt", "db", "local")]
    dst, sweep, hunt = rows
    assert json.loads(dst["seed_ranges"]) == [[0, 3]] and dst["seeds"] == 4 and dst["failures"] == 0
    assert dst["faults"] == sum(json.loads(dst["faults_by_kind"]).values()) and dst["faults"] > 0
    assert dst["virtual_s"] > 0 and dst["wall_s"] > 0 and 0 < dst["core_s"] <= dst["wall_s"] and dst["bugs"] == ""
    assert json.loads(sweep["seed_ranges"]) == [[5, 6]]
    # The commit of the code that ran (this checkout), dirty or not.
    assert all(r["commit_id"] == ledger.current_commit() for r in rows) and rows[0]["commit_id"] != "unknown"
    # The hunt: seeds 0..N, seed N (the first that detects zombie-ack, with FENCE-3) last.
    (n,) = json.loads(hunt["failing_seeds"])
    assert hunt["bugs"] == "zombie-ack" and json.loads(hunt["seed_ranges"]) == [[0, n]]
    assert hunt["failures"] == 1 and f"detected by seed {n} of db" in out
    assert json.loads(hunt["by_invariant"]) == {"FENCE-3": 1} and hunt["faults"] > 0
    # Probe hits (seeds hitting each coverage probe) are in every row: db seeds hit manifest.conflict.
    assert json.loads(sweep["probe_hits"]).get("manifest.conflict", 0) >= 1
    assert json.loads(hunt["probe_hits"]).get("manifest.conflict", 0) >= 1
    assert "probes:    " in out
    assert cli.main(["ledger"]) == 0
    printed = capsys.readouterr().out
    assert "probe hits (seeds hitting each probe, all campaigns): " in printed and "manifest.conflict db " in printed


def test_a_failing_campaign_records_its_failures_by_invariant(ledger_file) -> None:
    assert cli.main(["dst", "--workload", "db", "--seeds", "0..2", "--jobs", "1", "--bug", "zombie-ack"]) == 1
    (row,) = _rows(ledger_file)
    assert row["bugs"] == "zombie-ack" and row["failures"] >= 1
    failing = json.loads(row["failing_seeds"])
    assert failing and len(failing) == row["failures"]
    assert json.loads(row["by_invariant"]).get("FENCE-3", 0) >= 1


def test_sim_ledger_prints_cumulative_seeds_per_scenario_and_commit(tmp_path, capsys) -> None:
    path = str(tmp_path / "l.sqlite")

    def add(commit, scenario, seeds, failing=(), bugs=(), kind="dst"):
        ledger.append_sqlite(path, ledger.entry(
            kind=kind, engine="local", scenario=scenario, faults_mode="swarm", bugs=bugs, seeds=seeds,
            failing_seeds=failing, by_invariant={"DUR-1": len(failing)} if failing else {},
            faults_by_kind={"fault.stall": 3}, virtual_s=10.0, wall_s=1.0, commit=commit,
            recorded_utc=f"2026-11-24T12:{len(seeds):02d}:00Z"))

    add("aaaa", "db", range(0, 200))
    add("aaaa", "db", range(100, 300), failing=[250])  # overlaps: 400 seeds run, 300 distinct
    add("bbbb", "db", range(0, 50))
    add("aaaa", "gc", range(0, 20))
    add("aaaa", "db", range(0, 8), failing=[1, 3], bugs=["zombie-ack"], kind="hunt")
    assert cli.main(["ledger", "--sqlite", path, "--parquet", str(tmp_path / "none")]) == 0
    out = capsys.readouterr().out
    lines = {tuple(ln.split()[:3]): ln.split() for ln in out.splitlines() if ln[:1].isalpha()}
    db_a = lines[("db", "aaaa", "-")]
    assert db_a[3:7] == ["2", "400", "300", "1"]  # campaigns, seeds, distinct, failures
    assert "DUR-1" in out
    assert lines[("db", "bbbb", "-")][3:7] == ["1", "50", "50", "0"]
    assert lines[("gc", "aaaa", "-")][3:7] == ["1", "20", "20", "0"]
    assert lines[("db", "aaaa", "zombie-ack")][3:7] == ["1", "8", "8", "2"]
    assert "clean campaigns (no bug switched on), all commits: db 450 seeds, 1 failing; gc 20 seeds, 0 failing" in out
    assert cli.main(["ledger", "--sqlite", path, "--parquet", str(tmp_path / "none"), "--scenario", "gc",
                     "--campaigns"]) == 0
    out = capsys.readouterr().out
    assert "db " not in out and out.count("gc ") >= 2


def test_nothing_is_recorded_under_the_test_suite_unless_asked_or_when_off(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("SIM_LEDGER", raising=False)
    assert os.environ.get("PYTEST_CURRENT_TEST")
    assert ledger.sqlite_path() is None and ledger.parquet_path() is None
    monkeypatch.setenv("SIM_LEDGER", "off")
    assert ledger.sqlite_path() is None
    monkeypatch.setenv("SIM_LEDGER", str(tmp_path / "x.sqlite"))
    assert ledger.sqlite_path() == str(tmp_path / "x.sqlite")


def test_the_sqlite_table_is_plain_sql(ledger_file) -> None:
    assert cli.main(["dst", "--workload", "store", "--seeds", "0..1", "--ops", "100", "--jobs", "1"]) == 0
    con = sqlite3.connect(ledger_file)
    try:
        (n, seeds), = con.execute("SELECT COUNT(*), SUM(seeds) FROM campaigns WHERE scenario = 'store'")
    finally:
        con.close()
    assert (n, seeds) == (1, 2)


@pytest.mark.xdist_group("spark")
def test_the_spark_engine_appends_to_the_parquet_ledger(ledger_file, tmp_path, capsys) -> None:
    spark_engine = pytest.importorskip("sim.campaign.spark_engine")
    try:
        spark_engine._check_available()
    except spark_engine.SparkUnavailable as e:
        pytest.skip(str(e))
    parquet = os.environ["SIM_LEDGER_PARQUET"]
    argv = ["sweep", "--engine", "spark", "--master", "local[2]", "--workload", "db", "--seeds", "0..1",
            "--parquet", str(tmp_path / "results.parquet")]
    assert cli.main(argv) == 0
    assert f"ledger          {parquet}" in capsys.readouterr().out
    (row,) = ledger.read_parquet(parquet)
    assert (row["kind"], row["engine"], row["scenario"], row["seeds"]) == ("sweep", "spark", "db", 2)
    assert json.loads(row["seed_ranges"]) == [[0, 1]] and row["faults"] > 0
    assert _rows(ledger_file) == []  # the Spark engine writes Parquet, not the local SQLite file
    # ``sim ledger`` reads both tables.
    assert cli.main(["ledger"]) == 0
    out = capsys.readouterr().out
    assert "db " in out and "sweep (spark)" in out


def test_a_ledger_written_before_probe_hits_gains_the_column(tmp_path) -> None:
    path = str(tmp_path / "old.sqlite")
    old = [c for c in ledger.COLUMNS if c[0] != "probe_hits"]
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE campaigns (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                + ", ".join(f"{n} {t} NOT NULL" for n, t in old) + ")")
    row = ledger.entry(kind="dst", engine="local", scenario="db", faults_mode="swarm", bugs=[], seeds=[0, 1],
                       failing_seeds=[], by_invariant={}, faults_by_kind={}, virtual_s=1.0, wall_s=1.0)
    con.execute(f"INSERT INTO campaigns ({', '.join(n for n, _ in old)}) VALUES ({', '.join('?' * len(old))})",
                [row[n] for n, _ in old])
    con.commit()
    con.close()
    ledger.append_sqlite(path, dict(row, probe_hits=json.dumps({"manifest.conflict": 2})))
    first, second = ledger.read_sqlite(path)
    assert first["probe_hits"] == "{}" and json.loads(second["probe_hits"]) == {"manifest.conflict": 2}
    (group,) = ledger.cumulative([first, second])
    assert group["seeds"] == 4 and group["probe_hits"] == {"manifest.conflict": 2}


def test_the_ledger_is_written_before_the_table_is_printed(ledger_file, monkeypatch) -> None:
    """Issue 25 item 10: ``./just dst | head`` closed the pipe while the table printed, and the
    campaign's ledger row, written after it, was lost. A table that cannot be printed now leaves
    the row recorded."""
    from sim.campaign import dst as dst_mod, sweep as sweep_mod

    def broken(*_a, **_k):
        raise BrokenPipeError("the reader went away")
    monkeypatch.setattr(dst_mod, "format_table", broken)
    monkeypatch.setattr(sweep_mod, "format_summary", broken)
    with pytest.raises(BrokenPipeError):
        cli.main(["dst", "--workload", "store", "--seeds", "0..1", "--ops", "100", "--jobs", "1", "--no-progress"])
    with pytest.raises(BrokenPipeError):
        cli.main(["sweep", "--workload", "store", "--seeds", "0..1", "--ops", "100", "--jobs", "1"])
    assert [(r["kind"], r["scenario"]) for r in _rows(ledger_file)] == [("dst", "store"), ("sweep", "store")]


def test_a_campaign_is_recorded_on_the_commit_it_started_on(ledger_file, monkeypatch) -> None:
    """The checkout may move while a campaign runs (another worktree merged into it): the row
    names the commit read before the first seed, not the one found at the end."""
    from sim.campaign import dst as dst_mod

    from sim.campaign import sweep as sweep_mod

    commits = iter(["aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"])
    monkeypatch.setattr(ledger, "current_commit", lambda cwd=None: next(commits))
    real, real_sweep = dst_mod.run_campaign, sweep_mod.sweep_local  # each campaign: the checkout moves meanwhile
    monkeypatch.setattr(dst_mod, "run_campaign", lambda *a, **kw: (ledger.current_commit(), real(*a, **kw))[1])
    monkeypatch.setattr(sweep_mod, "sweep_local", lambda *a, **kw: (ledger.current_commit(), real_sweep(*a, **kw))[1])
    assert cli.main(["dst", "--workload", "store", "--seeds", "0..1", "--ops", "100", "--jobs", "1"]) == 0
    assert cli.main(["sweep", "--workload", "store", "--seeds", "0..1", "--ops", "100", "--jobs", "1"]) == 0
    dst, sweep = _rows(ledger_file)
    assert dst["commit_id"] == "aaaaaaaaaaaa" and sweep["commit_id"] == "cccccccccccc"


def test_the_archive_carries_campaigns_to_another_machine(tmp_path, monkeypatch, capsys) -> None:
    """``sim ledger --archive`` appends the local campaigns the archive lacks (each once, however
    often it runs); on a machine with an empty local ledger ``sim ledger`` still counts them."""
    def add(path, commit, scenario, seeds, when):
        row = ledger.entry(kind="dst", engine="local", scenario=scenario, faults_mode="swarm", bugs=(), seeds=seeds,
                           failing_seeds=[], by_invariant={}, faults_by_kind={"fault.stall": 1}, virtual_s=1.0,
                           wall_s=1.0, commit=commit, recorded_utc=when)
        ledger.append_sqlite(path, row)

    here, there, archive = tmp_path / "here.sqlite", tmp_path / "there.sqlite", tmp_path / "a" / "campaigns.jsonl"
    add(str(here), "c1", "gc", range(0, 500), "2026-11-26T23:50:00Z")
    add(str(here), "c1", "db", range(0, 35), "2026-11-26T23:51:00Z")
    assert cli.main(["ledger", "--sqlite", str(here), "--archive", "--archive-file", str(archive)]) == 0
    assert "2 campaign(s) appended" in capsys.readouterr().out
    assert cli.main(["ledger", "--sqlite", str(here), "--archive", "--archive-file", str(archive)]) == 0
    assert "0 campaign(s) appended" in capsys.readouterr().out  # nothing twice
    assert len(archive.read_text().splitlines()) == 2
    add(str(there), "c2", "gc", range(500, 2500), "2026-11-27T01:00:00Z")  # another machine
    assert cli.main(["ledger", "--sqlite", str(there), "--archive-file", str(archive)]) == 0
    out = capsys.readouterr().out
    assert "all commits: db 35 seeds, 0 failing; gc 2500 seeds, 0 failing" in out and "3 campaign(s)" in out
    archive.write_text(archive.read_text() + '{"scenario": "gc"}\n')
    assert cli.main(["ledger", "--sqlite", str(there), "--archive-file", str(archive)]) == 2  # named, not a traceback
