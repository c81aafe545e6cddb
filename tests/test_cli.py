"""The console scripts, run as subprocesses the way a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

BIN = os.path.dirname(sys.executable)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, args[0]), *args[1:]], capture_output=True, text=True, timeout=300)


def test_sim_run_replays_a_seed_exactly():
    a = run("sim", "run", "--seed", "9", "--ops", "500")
    b = run("sim", "run", "--seed", "9", "--ops", "500")
    assert a.returncode == 0, a.stdout + a.stderr
    assert "PASS" in a.stdout and a.stdout.split("trace ")[1][:16] == b.stdout.split("trace ")[1][:16]


def test_sim_dst_campaign_summary_and_json_lines(tmp_path):
    out = tmp_path / "results.jsonl"
    r = run("sim", "dst", "--seeds", "0..5", "--ops", "300", "--jobs", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "runs            6" in r.stdout and "failures        0" in r.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(row["seed"] for row in rows) == list(range(6)) and all(row["ok"] for row in rows)


def test_slatedb_list_objects(tmp_path):
    (tmp_path / "manifest").mkdir()
    (tmp_path / "manifest" / "00000000000000000001.manifest").write_bytes(b"xyz")
    r = run("slatedb", "--path", f"file://{tmp_path}", "list-objects", "--json")
    assert r.returncode == 0, r.stderr
    row = json.loads(r.stdout)
    assert row["key"] == "manifest/00000000000000000001.manifest" and row["size_bytes"] == 3


def test_slatedb_bad_url_is_one_line_error():
    r = run("slatedb", "--path", "ftp://nowhere", "list-objects")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "unsupported store URL scheme 'ftp'" in r.stderr
    assert "Traceback" not in r.stderr
