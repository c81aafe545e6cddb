"""``sim sweep --engine spark``: the same seeds as Spark tasks give the same verdict and trace
digest as the local engine, seed by seed, and land in a Parquet table.

The process's one local-mode Spark session (tests/conftest.py: ``local[2,2]``, bound to
127.0.0.1, no UI) serves the one test that needs it; the xdist group keeps every Spark test
on one worker, so the suite starts one JVM.
"""

from __future__ import annotations

import pytest

from sim.campaign.sweep import Scenario, summarize, sweep_local

pytestmark = pytest.mark.xdist_group("spark")

#: The fields that must not depend on the engine (wall_s does, of course).
SAME = ("seed", "workload", "ok", "digest", "events", "virtual_s", "faults", "violations", "invariants", "replay")


@pytest.fixture(scope="module")
def spark(request):
    spark_engine = pytest.importorskip("sim.campaign.spark_engine")
    try:
        spark_engine._check_available()
    except spark_engine.SparkUnavailable as e:
        pytest.skip(str(e))
    return request.getfixturevalue("spark_sessions").get()  # the process's one session (tests/conftest.py)


def _read_parquet(spark, path: str) -> list[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow comes with the spark extra
        return [r.asDict(recursive=True) for r in spark.read.parquet(path).collect()]
    table = pq.read_table(path)
    rows = table.to_pylist()
    for row in rows:  # pyarrow reads a map column as a list of (key, value) pairs
        row["faults"] = dict(row["faults"])
    return rows


def test_spark_sweep_equals_the_local_engine_seed_by_seed(spark, tmp_path) -> None:
    from sim.campaign.spark_engine import sweep_on

    db = Scenario(workload="db")
    seeds = range(4)
    path = str(tmp_path / "sim-results.parquet")
    report = sweep_on(spark, db, seeds, parquet=path, progress=False)
    local = sweep_local(db, seeds, jobs=1, progress=False)

    assert report.engine == "spark" and report.cores == 2
    table = sorted(_read_parquet(spark, path), key=lambda r: r["seed"])
    assert [r["seed"] for r in table] == list(seeds)
    for spark_row, parquet_row, local_row in zip(report.rows, table, local.rows):
        expected = {k: local_row[k] for k in SAME}
        assert {k: spark_row[k] for k in SAME} == expected
        assert {k: parquet_row[k] for k in SAME} == {**expected, "faults": dict(expected["faults"])}
        assert local_row["ok"] and len(local_row["digest"]) == 64
    s = summarize(report)
    assert (s.runs, s.failures, s.engine) == (4, 0, "spark")
    assert s.faults == summarize(local).faults


def test_spark_unavailable_is_one_clear_error(monkeypatch) -> None:
    import sim.campaign.spark_engine as spark_engine

    monkeypatch.setattr(spark_engine.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(spark_engine.SparkUnavailable, match="needs Java"):
        spark_engine._check_available()


def test_cli_sweep_engine_spark_wiring(tmp_path, monkeypatch, capsys) -> None:
    """``sim sweep --engine spark`` hands master, Parquet path and --out to the engine and prints
    its summary. The engine itself is the test above; a stand-in here keeps this test off the
    JVM (pytest-xdist's groups do not hold under pytest 9, so a second session could start)."""
    import sim.campaign.spark_engine as spark_engine
    from sim import cli
    from sim.campaign.sweep import SweepReport, _write_row, run_seed

    calls = []

    def stand_in(scenario, seeds, *, master, parquet, out, ledger_parquet, ledger_kind):
        calls.append((master, parquet, list(seeds)))
        assert ledger_parquet is None and ledger_kind == "sweep"  # the test suite records no campaign
        rows = [run_seed(scenario, seed) for seed in seeds]
        for row in rows:
            _write_row(out, row)
        return SweepReport(rows, 1.0, 2, "spark", startup_s=9.5)

    monkeypatch.setattr(spark_engine, "sweep_spark", stand_in)
    parquet, out = tmp_path / "t.parquet", tmp_path / "t.jsonl"
    code = cli.main(["sweep", "--engine", "spark", "--master", "local[2]", "--seeds", "0..1", "--workload", "store",
                     "--ops", "200", "--parquet", str(parquet), "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert calls == [("local[2]", str(parquet), [0, 1])]
    assert "engine          spark, 2 cores (session start 9.5 s" in text and "runs            2" in text
    assert f"parquet         {parquet}" in text
    assert len(out.read_text().splitlines()) == 2
