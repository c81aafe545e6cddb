"""The side-by-side Db benchmark (``./just bench``): its children share one workload, the driver
runs a child end to end, and its ratios are oriented so that > 1 means ours is better."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def test_the_disk_floor_times_the_local_stores_create_and_bounds_16_writers(tmp_path):
    """``slatedb.bench.disk_floor``: the create-if-absent syscalls of a WAL object, timed; the
    report's line turns the p50 into the durable puts a second that W writers can get at most
    (each group commit holds one put of each), and that over the official wheel's rate."""
    from slatedb.bench.disk_floor import durable_create_floor, floor_line

    floor = durable_create_floor(str(tmp_path), samples=5)
    assert 0 < floor["p10_ms"] <= floor["p50_ms"] <= floor["p90_ms"] and floor["samples"] == 5
    assert list(tmp_path.iterdir()) == []  # its directory is gone
    line = floor_line({"p10_ms": 0.5, "p50_ms": 1.0, "p90_ms": 4.0, "samples": 200.0}, 16, 160.0)
    assert "p50 1.00 ms" in line and "at most 16,000 durable puts/s from 16 writers" in line
    assert "100.0x the official's 16-writer rate in this run" in line
    assert "official" not in floor_line({"p10_ms": 1, "p50_ms": 2, "p90_ms": 3, "samples": 1.0}, 16, None)
    with pytest.raises(ValueError):
        durable_create_floor(str(tmp_path), samples=0)


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


def test_ours_with_fsync_off_is_an_opt_in_column_beside_ours(tmp_path, capsys):
    """``ours-nosync``: our child with ``file:///dir?fsync=false`` (spec/objstore.md STORE-8), the
    official engine's durability; not in the default run, compared with the official wheel in its
    own ratio column when both run."""
    assert "ours-nosync" not in bench.ENGINES  # the default run stays as it is
    out = tmp_path / "bench.json"
    rc = bench.main(["--runs", "1", "--n", "200", "--engines", "ours-nosync,ours", "--no-pin",
                     "--tmpdir", str(tmp_path), "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    assert "data checks: ours OK, ours-nosync OK; all engines scanned identical bytes" in printed
    assert "ours-nosync = slatedb-py" in printed and "(fsync=false)" in printed
    assert "disk floor: one WAL object's create" in printed and "durable puts/s from 16 writers" in printed
    header = next(line for line in printed.splitlines() if line.startswith("| phase"))
    assert header.index(" ours |") < header.index(" ours-nosync |") and "ours vs ours-nosync" in header
    assert bench.render_table({"ours": {"reopen_ms": 4.0}, "ours-nosync": {"reopen_ms": 2.0}, "official": {"reopen_ms": 3.0}},
                              ["ours", "ours-nosync", "official"], 100).splitlines()[0].count("ours-nosync vs official") == 1


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


# --- the scale curve (--scale) ---------------------------------------------------------------------


def test_scale_workload_is_the_main_benchmarks_streamed():
    """The scale child generates the main bench's rows (same keys, same values in key order),
    chunk by chunk: the digests agree at a size spanning several chunks."""
    import hashlib

    from slatedb.bench import db_workload_scale as scale_child
    from slatedb.bench.db_workload_sqlite import workload

    n = 2 * scale_child.CHUNK + 7
    digest = hashlib.sha256()
    for _start, keys, values in scale_child.chunks(n):
        for k, v in zip(keys, values):
            digest.update(k)
            digest.update(v)
    assert digest.hexdigest() == workload(n)["digest"]


def test_scale_sizes_parse():
    from slatedb.bench.scale import parse_size, size_label

    assert [parse_size(s) for s in ("100k", "1M", "10M", "2500", "1_000")] == [100_000, 10**6, 10**7, 2500, 1000]
    assert [size_label(n) for n in (100_000, 10**6, 10**7, 2500)] == ["100k", "1M", "10M", "2.5k"]
    with pytest.raises(ValueError):
        parse_size("1.5")


def test_scale_curve_runs_ours_and_a_peer_at_tiny_sizes(tmp_path, capsys):
    out = tmp_path / "scale.json"
    rc = bench.main(["--scale", "--scale-sizes", "2k,5k", "--scale-engines", "ours,sqlite3", "--scale-gets", "300",
                     "--no-pin", "--tmpdir", str(tmp_path), "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    lines = printed.splitlines()
    for engine in ("ours", "sqlite3"):
        for size in ("2k", "5k"):
            row = next(line for line in lines if line.startswith(f"| {engine} ") and f"| {size} " in line)
            assert row.count("/s") == 5 and "MB" in row, row  # five rates and the peak RSS
        ratio = next(line for line in lines if line.startswith(f"| {engine} ") and "| 5k / 2k " in line)
        assert ratio.count("x |") == 6, ratio  # five rates and the RSS, 5k over 2k
    assert "data checks: 4 of 4 runs OK" in printed
    bound = [line for line in lines if line.strip().startswith("ours 5k: peak RSS")]
    assert bound and "vs bound" in bound[0] and "memtables" in bound[0] and ": holds" in bound[0]
    assert "our settings (the defaults): " in printed and out.exists()


def test_scale_curve_says_when_it_skips_an_engine(tmp_path, capsys):
    rc = bench.main(["--scale", "--scale-sizes", "1k,50k", "--scale-engines", "sqlite3", "--scale-gets", "100",
                     "--scale-cap-min", "0.00001", "--no-pin", "--tmpdir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert rc == 0, printed
    row = next(line for line in printed.splitlines() if line.startswith("| sqlite3 ") and "| 50k " in line)
    assert "skipped: projected" in row and "min" in row


def test_wrong_data_in_the_scale_curve_fails_the_run(tmp_path, capsys, monkeypatch):
    real = bench.run_child

    def tampered(cmd, engine, timeout_s):
        res, err = real(cmd, engine, timeout_s)
        res["checks"]["hit_values_ok"] -= 1  # one get returned another value than was written
        return res, err

    monkeypatch.setattr(bench, "run_child", tampered)
    rc = bench.main(["--scale", "--scale-sizes", "1k", "--scale-engines", "sqlite3", "--scale-gets", "100",
                     "--no-pin", "--tmpdir", str(tmp_path)])
    printed = capsys.readouterr().out
    assert rc == 1 and "sqlite3 FAILED" in printed and "wrong data: hit_values_ok=99 (want 100)" in printed


def test_scale_report_merges_the_json_of_separate_runs(tmp_path, capsys):
    """ours and a peer run apart (e.g. ours at 10M on its own), reported in one table."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for engine, out in (("sqlite3", a), ("ours", b)):
        assert bench.main(["--scale", "--scale-sizes", "1k", "--scale-engines", engine, "--scale-gets", "100",
                           "--no-pin", "--tmpdir", str(tmp_path), "--json", str(out)]) == 0
    capsys.readouterr()
    assert bench.main(["--scale-report", f"{a},{b}"]) == 0
    printed = capsys.readouterr().out
    assert "| ours " in printed and "| sqlite3 " in printed and "data checks: 2 of 2 runs OK" in printed


def test_reads_during_compaction_runs_end_to_end(tmp_path, capsys):
    """A smoke run of ``python -m slatedb.bench.reads_during_compaction`` (tiny: one L0 SST, so
    no compaction happens; the measurement itself is minutes)."""
    from slatedb.bench import reads_during_compaction

    assert reads_during_compaction.main(["--n", "2000", "--seconds", "1", "--l0-mib", "1",
                                         "--tmpdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "compactor running" in out and "compactor off" in out and "ratio" in out


def test_cold_gets_builds_then_times_reopened_gets(tmp_path, capsys, monkeypatch):
    """A smoke run of ``python -m slatedb.bench.cold_gets`` (tiny: 500 keys, 200 gets a phase);
    a wrong answer exits non-zero."""
    from slatedb.bench import cold_gets

    monkeypatch.setattr(cold_gets, "GETS", 200)
    path = str(tmp_path / "db")
    assert cold_gets.main(["build", path, "--n", "500"]) == 0
    assert cold_gets.main(["run", path, "--n", "500", "--runs", "2", "--hot"]) == 0
    out = capsys.readouterr().out
    assert "loaded 500 keys" in out and "run 2/2" in out
    assert "median: hit" in out and "miss" in out and "hot" in out
    with pytest.raises(SystemExit, match="wrong data"):
        cold_gets.main(["run", path, "--n", "1000", "--runs", "1"])  # keys 500.. were never written
