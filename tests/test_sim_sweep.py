"""Sweeps (``sim dst`` / ``sim sweep``): result rows, the summary table, failures by invariant,
replay commands, the exit code, the progress bar and the one-core benchmark."""

from __future__ import annotations

import io
import json
import re
import os
import subprocess
import sys

import pytest

import sim.campaign.sweep as sweep
from sim import cli
from sim.campaign.sweep import Scenario, invariant_of, parse_seeds, run_seed, summarize, sweep_local

BIN = os.path.dirname(sys.executable)
STORE = Scenario(workload="store", ops=300, clients=4)


def test_rows_json_lines_and_summary_of_a_store_sweep() -> None:
    out = io.StringIO()
    report = sweep_local(STORE, range(6), jobs=2, out=out, progress=False)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(r["seed"] for r in lines) == list(range(6))
    assert [r["seed"] for r in report.rows] == list(range(6))  # returned in seed order
    for row in report.rows:
        assert set(sweep.ROW_FIELDS) <= set(row)
        assert row["ok"] and row["violations"] == [] and row["workload"] == "store"
        assert len(row["digest"]) == 64 and row["events"] > 0 and row["virtual_s"] > 0 and row["wall_s"] > 0
        assert row["replay"] == f"./just sim run --seed {row['seed']} --workload store --ops 300 --clients 4"
    # Worker processes and this process give the same verdict and digest for every seed.
    here = sweep_local(STORE, range(6), jobs=1, progress=False).rows
    assert [(r["seed"], r["ok"], r["digest"], r["events"]) for r in here] == \
        [(r["seed"], r["ok"], r["digest"], r["events"]) for r in report.rows]

    s = summarize(report)
    assert (s.runs, s.failures, s.by_invariant, s.cores, s.engine) == (6, 0, {}, 2, "local")
    assert sum(s.faults.values()) == sum(sum(r["faults"].values()) for r in report.rows) > 0
    assert s.virtual_s == pytest.approx(sum(r["virtual_s"] for r in report.rows))
    assert s.compression == pytest.approx(s.virtual_s / report.wall_s)
    assert s.compression_per_core == pytest.approx(s.compression / 2)
    assert s.seeds_per_minute == pytest.approx(6 * 60 / report.wall_s)
    table = sweep.format_summary(s, STORE)
    for label in ("scenario", "engine", "runs            6", "failures        0", "by invariant    -",
                  "faults injected", "faults by kind", "virtual time", "wall time", "compression",
                  "seeds/minute"):
        assert label in table, table
    assert sweep.format_failures(report.rows) == ""


@pytest.mark.parametrize("violation, expected", [
    ("InvariantViolation: FENCE-3 violated at 1.0 w1 ack: w1 acknowledged after it halted", "FENCE-3"),
    ("AssertionError: DUR-1: acknowledged durable write b'x' of b'k' (seq 4) lost", "DUR-1"),
    ("InvariantViolation: BOUNDARY-3 violated at 2.0 w2 commit: wal id 7 committed", "BOUNDARY-3"),
    ("LIN: history not linearizable at op 17", "LIN"),
    ("AssertionError: liveness: writers still running after 21600 virtual s", "liveness"),
    ("FencedError: writer fenced by epoch 3", "FencedError"),
    ("KeyError: 'k001'", "KeyError"),
    ("c2 read k3=b'x', possible {b'y'}", "oracle"),
    ("counter=7, acked=6, unknown=0", "oracle"),
])
def test_invariant_of_a_violation(violation: str, expected: str) -> None:
    assert invariant_of(violation) == expected


#: Synthetic verdicts: seed -> violations. Module level, so worker processes can pickle it.
FAKE = {
    3: ["InvariantViolation: FENCE-3 violated at 1.2 w1 ack: w1 acknowledged after it halted"],
    5: ["AssertionError: DUR-1: acknowledged durable write b'w1:3' of b'k001' (seq 9) lost",
        "InvariantViolation: FENCE-3 violated at 3.4 w2 put: w2 sent a create of wal/9.sst after it halted"],
    8: ["ValueError: synthetic"],
}


def fake_run_seed(scenario: Scenario, seed: int) -> dict:
    violations = FAKE.get(seed, [])
    return sweep._row(scenario, seed, not violations, f"{seed:064x}", 100 + seed, 10.0 * seed,
                      {"fault.transient": 2, "crash": seed % 2}, violations, 0.01)


@pytest.mark.parametrize("jobs", [1, 2])
def test_failures_are_counted_by_invariant_and_each_prints_its_replay(jobs: int) -> None:
    db = Scenario(workload="db")
    report = sweep_local(db, range(10), jobs=jobs, progress=False, run=fake_run_seed)
    s = summarize(report)
    assert s.runs == 10 and s.failures == 3
    # A seed counts once per invariant it violated (seed 5 violated two).
    assert s.by_invariant == {"FENCE-3": 2, "DUR-1": 1, "ESCAPE-1": 1}
    assert s.faults == {"fault.transient": 20, "crash": 5}
    assert s.virtual_s == pytest.approx(450.0)
    table = sweep.format_summary(s, db)
    assert "failures        3" in table and "by invariant    FENCE-3 2, " in table
    assert "faults injected 25" in table and "faults by kind  fault.transient 20, crash 5" in table
    failures = sweep.format_failures(report.rows).splitlines()
    assert failures == [
        "FAIL seed 3: " + FAKE[3][0], "  replay: ./just sim run --seed 3 --workload db",
        "  trace:  " + f"{3:064x}"[:16] + " (the replay prints the same)",
        "FAIL seed 5: " + FAKE[5][0], "  replay: ./just sim run --seed 5 --workload db",
        "  trace:  " + f"{5:064x}"[:16] + " (the replay prints the same)",
        "FAIL seed 8: ESCAPE-1: a simulated process ended with an exception: " + FAKE[8][0],
        "  replay: ./just sim run --seed 8 --workload db",
        "  trace:  " + f"{8:064x}"[:16] + " (the replay prints the same)",
    ]


def test_cli_sweep_exits_non_zero_and_prints_replays_when_a_seed_fails(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(sweep, "run_seed", fake_run_seed)
    out = tmp_path / "r.jsonl"
    code = cli.main(["sweep", "--seeds", "0..9", "--workload", "db", "--jobs", "1", "--out", str(out)])
    text = capsys.readouterr()
    assert code == 1
    assert "runs            10" in text.out and "failures        3" in text.out
    assert "by invariant    FENCE-3 2" in text.out
    assert "replay: ./just sim run --seed 5 --workload db" in text.out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["ok"] for r in rows].count(False) == 3
    assert next(r for r in rows if r["seed"] == 5)["invariants"] == ["DUR-1", "FENCE-3"]
    assert "10/10" in text.err  # the progress bar, on stderr
    # All seeds passing: exit 0, and dst runs the same run_seed (its table: tests/test_sim_dst.py).
    monkeypatch.setattr(sweep, "run_seed", lambda scenario, seed: fake_run_seed(scenario, 0))
    assert cli.main(["dst", "--seeds", "0..2", "--workload", "db", "--jobs", "1"]) == 0
    assert re.search(r"^db\s.*\s3\s+0\s", capsys.readouterr().out, re.M)


def test_a_seed_that_raises_is_a_failure_named_by_its_exception(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("sim.scenarios.store.run_store_workload", boom)  # looked up per run (sim.scenarios.registry)
    row = run_seed(STORE, 4)
    assert not row["ok"] and row["violations"] == ["harness: the scenario raised RuntimeError: boom"]
    assert row["invariants"] == ["harness"]
    assert row["replay"].startswith("./just sim run --seed 4 --workload store")


@pytest.mark.parametrize("violation, named", [
    ("CorruptionError: corrupt object wal/6.sst: missing", "ESCAPE-1: a simulated process ended with an exception: "
                                                          "CorruptionError: corrupt object wal/6.sst: missing"),
    ("KeyError: 'k001'", "ESCAPE-1: a simulated process ended with an exception: KeyError: 'k001'"),
    ("InvariantViolation: FENCE-3 violated at 1.0 w1 ack", "InvariantViolation: FENCE-3 violated at 1.0 w1 ack"),
    ("AssertionError: liveness: stuck", "AssertionError: liveness: stuck"),
    ("LIN: key k1 not linearizable", "LIN: key k1 not linearizable"),
    ("harness: the scenario raised RuntimeError: boom", "harness: the scenario raised RuntimeError: boom"),
    ("c2 read k3=b'x', possible {b'y'}", "c2 read k3=b'x', possible {b'y'}"),
])
def test_an_escaping_exception_is_named_never_a_bare_type(violation: str, named: str) -> None:
    assert sweep.name_violation(violation) == named
    inv = invariant_of(named)
    assert inv in ("ESCAPE-1", "FENCE-3", "liveness", "LIN", "harness", "oracle")
    row = sweep._row(STORE, 1, False, "", 0, 0.0, {}, [violation], 0.0)
    assert row["invariants"] == [inv] and row["violations"] == [named]


def test_replay_commands_carry_what_the_run_depends_on() -> None:
    assert Scenario(workload="db").replay(17) == "./just sim run --seed 17 --workload db"
    assert Scenario(workload="db", faults="none", bugs=("b2", "b1")).replay(3) == \
        "./just sim run --seed 3 --workload db --faults none --bug b1 --bug b2"
    assert Scenario().replay(2) == "./just sim run --seed 2 --workload store --ops 2000 --clients 6"


def test_seed_ranges() -> None:
    assert parse_seeds("0..19") == range(20) and parse_seeds("5") == range(5) and parse_seeds("7..7") == range(7, 8)
    for bad in ("x", "3..1", "1..b"):
        with pytest.raises(ValueError):
            parse_seeds(bad)


def test_progress_without_a_terminal_prints_a_line_per_tenth() -> None:
    stream = io.StringIO()
    bar = sweep.Progress(20, stream=stream)
    for done in range(1, 21):
        bar.update(done, failures=done // 10)
    bar.update(20, 2)  # a repeated final update prints nothing more
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 and "\r" not in stream.getvalue()
    assert lines[-1].startswith("sweep [" + "#" * 24 + "] 20/20 failures 2")


def test_bench_reports_compression_and_seeds_per_minute() -> None:
    result = sweep.bench(STORE, range(3), pin=False, progress=False)
    assert len(result.rows) == 3 and result.compression == pytest.approx(result.virtual_s / result.wall_s)
    text = sweep.format_bench(result, STORE, range(3))
    assert "one core" in text and "target >= 1000x" in text and "seeds/minute" in text


def test_cli_sweep_and_bench_as_subprocesses(tmp_path) -> None:
    out = tmp_path / "results.jsonl"
    r = subprocess.run([os.path.join(BIN, "sim"), "sweep", "--seeds", "0..3", "--workload", "db", "--jobs", "2",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs            4" in r.stdout and "failures        0" in r.stdout and "seeds/minute" in r.stdout
    assert "4/4" in r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["seed"] for row in rows) == [0, 1, 2, 3]
    assert all(row["workload"] == "db" and row["replay"].endswith("--workload db") for row in rows)

    r = subprocess.run([os.path.join(BIN, "sim"), "bench", "--seeds", "0..1", "--workload", "store", "--ops", "200"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compression" in r.stdout and "seeds/minute" in r.stdout



async def _loop_for_ever(_world, _nursery) -> None:
    """A world's process that never ends: virtual time runs on for ever, and it swallows what it
    can (as an engine's background task does with its errors)."""
    import trio

    while True:
        try:
            await trio.sleep(1.0)
        except Exception:  # noqa: BLE001 - the guard must get through this
            pass


def _looping_world(seed, **_kwargs):
    from sim.world.harness import Scenario as World, run_world

    return run_world(World("loop", lambda setup: object(), _loop_for_ever, virtual_limit_s=None), seed)


def test_a_seed_past_its_wall_limit_fails_named_and_the_campaign_goes_on(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sim.scenarios.store.run_store_workload", _looping_world)
    row = run_seed(Scenario(workload="store", ops=300, clients=4, seed_limit_s=0.3), 5)
    assert not row["ok"] and row["invariants"] == ["liveness"] and row["wall_s"] < 5
    assert row["violations"][0].startswith("liveness: seed 5 of store ran over its wall limit of 0.3 s")
    assert Scenario(workload="store", seed_limit_s=0.3) == Scenario(workload="store")  # a guard, not the run
    # The main job (one worker here) reports it and goes on to the next seed.
    assert cli.main(["dst", "--seeds", "0..1", "--workload", "store", "--jobs", "1", "--seed-limit-s", "0.2",
                     "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert "ran over its wall limit of 0.2 s" in out and "seed 1 of store" in out
    monkeypatch.undo()
    row = run_seed(Scenario(workload="store", ops=300, clients=4, seed_limit_s=20), 0)
    assert row["ok"] and row["digest"] == run_seed(STORE, 0)["digest"]  # the next world runs as ever
