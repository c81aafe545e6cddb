"""``sim sweep --engine spark``: the same seeds as Spark tasks give the same verdict and trace
digest as the local engine, seed by seed, and land in a Parquet table.

One local-mode Spark session (``local[2]``, bound to 127.0.0.1, no UI) serves the module; the
xdist group keeps both tests on one worker so the session starts once (~10 s).
"""

from __future__ import annotations

import pytest

from sim.sweep import Scenario, summarize, sweep_local

pytestmark = pytest.mark.xdist_group("spark")

#: The fields that must not depend on the engine (wall_s does, of course).
SAME = ("seed", "workload", "ok", "digest", "events", "virtual_s", "faults", "violations", "invariants", "replay")


@pytest.fixture(scope="module")
def spark():
    spark_engine = pytest.importorskip("sim.spark_engine")
    try:
        spark_engine._check_available()
    except spark_engine.SparkUnavailable as e:
        pytest.skip(str(e))
    with spark_engine.spark_session("local[2]", app_name="sim-test") as session:
        yield session


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
    from sim.spark_engine import sweep_on

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
    import sim.spark_engine as spark_engine

    monkeypatch.setattr(spark_engine.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(spark_engine.SparkUnavailable, match="needs Java"):
        spark_engine._check_available()


def test_cli_sweep_on_spark_writes_parquet_and_the_summary(spark, tmp_path, monkeypatch, capsys) -> None:
    """``sim sweep --engine spark`` through the CLI, on the module's session (a second JVM would
    double the module's time; the session's own start-up is what the fixture runs)."""
    import sim.spark_engine as spark_engine
    from sim import cli

    calls = []

    def on_module_session(scenario, seeds, *, master, parquet, out):
        calls.append(master)
        return spark_engine.sweep_on(spark, scenario, seeds, parquet=parquet, out=out)

    monkeypatch.setattr(spark_engine, "sweep_spark", on_module_session)
    parquet, out = tmp_path / "t.parquet", tmp_path / "t.jsonl"
    code = cli.main(["sweep", "--engine", "spark", "--master", "local[2]", "--seeds", "0..1", "--workload", "store",
                     "--ops", "200", "--parquet", str(parquet), "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert calls == ["local[2]"]
    assert "engine          spark, 2 cores" in text and "runs            2" in text and "failures        0" in text
    assert f"parquet         {parquet}" in text
    assert sorted(r["seed"] for r in _read_parquet(spark, str(parquet))) == [0, 1]
    assert len(out.read_text().splitlines()) == 2
