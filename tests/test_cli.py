"""The console scripts, run as subprocesses the way a user runs them."""

from __future__ import annotations

import json
import os
import re
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
    r = run("sim", "dst", "--workload", "store", "--seeds", "0..5", "--ops", "300", "--jobs", "2", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^store\s+0\.\.5\s+6\s+0\s", r.stdout, re.M), r.stdout
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


def test_slatedb_compaction_commands(tmp_path):
    import slatedb

    with slatedb.Db.open(f"file://{tmp_path}", settings={"l0_sst_size_bytes": 4096, "compactor_options": None,
                                                        "l0_max_ssts": 100}) as db:
        for i in range(1500):
            db.put(b"k%05d" % i, b"v" * 30)
    url = f"file://{tmp_path}"
    full = run("slatedb", "--path", url, "submit-compaction", "--request", "Full")
    assert full.returncode == 0, full.stderr
    submitted = json.loads(full.stdout)
    assert submitted["status"] == "Submitted" and submitted["spec"]["destination"] == 0
    bad = run("slatedb", "--path", url, "submit-compaction", "--request",
              '{"Spec": {"sources": [{"SortedRun": 9}], "destination": 9}}')
    bad_id = json.loads(bad.stdout)["id"]
    ran = run("slatedb", "--path", url, "run-compactor", "--once")
    assert ran.returncode == 0, ran.stderr
    stats = json.loads(ran.stdout)
    assert stats["completed"] == 1 and stats["failed"] == 1 and stats["epoch"] == 1
    failed = json.loads(run("slatedb", "--path", url, "read-compaction", "--id", bad_id).stdout)
    assert failed["status"] == "Failed" and "not in the database" in failed["reason"]
    latest = json.loads(run("slatedb", "--path", url, "read-compactions").stdout)
    assert latest["compactor_epoch"] == 1
    files = [json.loads(line) for line in run("slatedb", "--path", url, "list-compactions", "--start", "2").stdout.splitlines()]
    assert files and all(f["id"] >= 2 for f in files) and files[-1] == latest
    # Errors: one line, no traceback, meaningful exit codes.
    for args, code in ((["read-compaction", "--id", "not-a-ulid"], 2),
                       (["read-compaction", "--id", "01ARZ3NDEKTSV4RRFFQ69G5FAV"], 1),
                       (["submit-compaction", "--request", "{nope"], 2),
                       (["read-compactions", "--id", "999"], 1)):
        r = run("slatedb", "--path", url, *args)
        assert r.returncode == code, (args, r.returncode, r.stderr)
        assert r.stderr.startswith("slatedb: error:") and r.stderr.count("\n") == 1, r.stderr
    assert run("slatedb", "--path", url, "submit-compaction", "--help").returncode == 0


def test_both_tools_run_as_python_modules(tmp_path):
    """``python -m slatedb`` and ``python -m sim``: the tools where the console scripts are not on
    PATH (a virtualenv that is not activated). Before: "No module named slatedb.__main__"."""
    (tmp_path / "manifest").mkdir()
    (tmp_path / "manifest" / "00000000000000000001.manifest").write_bytes(b"xyz")
    r = subprocess.run([sys.executable, "-m", "slatedb", "--path", f"file://{tmp_path}", "list-objects", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["key"] == "manifest/00000000000000000001.manifest"
    bad = subprocess.run([sys.executable, "-m", "slatedb", "--path", "ftp://nowhere", "list-objects"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "unsupported store URL scheme" in bad.stderr
    a = subprocess.run([sys.executable, "-m", "sim", "run", "--seed", "9", "--ops", "300"],
                       capture_output=True, text=True, timeout=300)
    b = run("sim", "run", "--seed", "9", "--ops", "300")
    assert a.returncode == 0 and "PASS" in a.stdout, a.stdout + a.stderr
    assert a.stdout.split("trace ")[1][:16] == b.stdout.split("trace ")[1][:16]


def test_slatedb_version_names_the_package_and_the_formats(capsys):
    """``slatedb --version`` (there was none: argparse said the arguments --path and a command
    are required) and ``slatedb.__version__`` (there was none either)."""
    import pytest

    import slatedb
    from slatedb import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.strip() == f"slatedb-py {slatedb.__version__} (SlateDB 0.17 formats)"
    assert slatedb.__version__ and slatedb.__version__[0].isdigit()
