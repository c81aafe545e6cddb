"""The side-by-side Db benchmark (``./just bench``): its children share one workload, the driver
runs a child end to end, and its ratios are oriented so that > 1 means ours is better."""

from __future__ import annotations

from pathlib import Path

from slatedb.bench import db as bench

BENCH = Path(bench.__file__).resolve().parent
CHILDREN = ("db_workload_ours.py", "db_workload_official.py", "db_workload_sqlite.py")


def _workload_block(name: str) -> str:
    """The duplicated workload definition: from its marker line to the next section marker."""
    lines = (BENCH / name).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# --- the workload"))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("# ---"))
    return "\n".join(lines[start + 1 : end])


def test_the_three_children_generate_the_same_workload():
    blocks = {name: _workload_block(name) for name in CHILDREN}
    assert len(set(blocks.values())) == 1, "db_workload_*.py: the workload definitions drifted apart"
    assert "random.Random(SEED)" in blocks[CHILDREN[0]] and "SEED = 20240601" in blocks[CHILDREN[0]]


def test_driver_runs_the_sqlite_child_end_to_end(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = bench.main(["--runs", "1", "--n", "200", "--engines", "sqlite3", "--no-pin",
                     "--tmpdir", str(tmp_path), "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "data checks: sqlite3 OK" in printed
    assert "| put, one call each" in printed and out.exists()


def test_ratios_mean_ours_is_better_above_one():
    assert bench.ratio(20.0, 10.0, higher=True) == "2.00x"  # rates: ours/other
    assert bench.ratio(5.0, 10.0, higher=False) == "2.00x"  # times and sizes: other/ours
    assert bench.ratio(None, 10.0, higher=True) == "-"


def test_driver_runs_every_peer_side_by_side_with_a_ratio_each(tmp_path, capsys):
    """plyvel, rocksdict and lmdb, each in its own child of the peers' venv (made on first use),
    beside ours: every data check passes and each peer has its ratio column."""
    rc = bench.main(["--runs", "1", "--n", "300", "--engines", "ours,plyvel,rocksdict,lmdb", "--no-pin",
                     "--tmpdir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "data checks: ours OK, plyvel OK, rocksdict OK, lmdb OK; all engines scanned identical bytes" in printed
    header = next(line for line in printed.splitlines() if line.startswith("| phase"))
    for peer in ("plyvel", "rocksdict", "lmdb"):
        assert f"ours vs {peer}" in header


def test_wrong_data_from_a_child_fails_the_run(tmp_path, capsys, monkeypatch):
    real = bench.run_child

    def tampered(cmd, engine, timeout_s):
        res, err = real(cmd, engine, timeout_s)
        res["checks"]["digest"] = "0" * 64  # the child scanned back other bytes than were written
        return res, err

    monkeypatch.setattr(bench, "run_child", tampered)
    rc = bench.main(["--runs", "1", "--n", "200", "--engines", "sqlite3", "--no-pin", "--tmpdir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert rc == 1 and "data checks: sqlite3 FAILED" in printed and "wrong data: digest=" in printed
