"""The admin commands of ``slatedb`` (checkpoints, manifests, GC, clone, destroy), run as
subprocesses against ``file://`` databases: output (text and ``--json``), exit codes (0 ok,
1 operation failed, 2 bad input) and one-line errors without a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

import slatedb
from slatedb import cli

BIN = os.path.join(os.path.dirname(sys.executable), "slatedb")
QUIET = {"compactor_options": None, "l0_sst_size_bytes": 4096}


def slatedb_cli(url: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([BIN, "--path", url, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def ok(url: str, *args: str) -> str:
    r = slatedb_cli(url, *args)
    assert r.returncode == 0 and not r.stderr, (args, r.returncode, r.stderr)
    return r.stdout


def jsons(url: str, *args: str) -> list[dict]:
    return [json.loads(line) for line in ok(url, *args).splitlines()]


def one_line_error(r: subprocess.CompletedProcess, code: int, *fragments: str) -> None:
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith("slatedb") and ": error: " in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    for f in fragments:
        assert f in r.stderr, (f, r.stderr)


def make_db(path, n: int = 50) -> str:
    url = f"file://{path}"
    with slatedb.Db.open(url, settings=QUIET) as db:
        for i in range(n):
            db.put(b"k%03d" % i, b"v%03d" % i)
    return url


def test_checkpoint_commands(tmp_path):
    url = make_db(tmp_path / "db")
    before = time.time()
    made = json.loads(ok(url, "create-checkpoint", "-n", "nightly", "-l", "1day 30min", "--json"))
    assert made["name"] == "nightly" and uuid.UUID(made["id"]).version == 4
    assert before + 88200 <= made["expire_time_s"] <= time.time() + 88201
    copy = json.loads(ok(url, "--json", "create-checkpoint", "--source", made["id"], "--name", "copy"))
    assert copy["manifest_id"] == made["manifest_id"] and copy["expire_time_s"] is None
    text = ok(url, "create-checkpoint", "--name", "nightly")
    assert text.startswith("created checkpoint ") and "expires never" in text
    third = text.split()[2]
    nightly = jsons(url, "list-checkpoints", "-n", "nightly", "--json")
    assert [c["id"] for c in nightly] == [made["id"], third] and not any(c["expired"] for c in nightly)
    listing = ok(url, "list-checkpoints")
    # A clean close released the writer's own checkpoint (issue 25 item 1): only the three made here.
    assert len(listing.splitlines()) == 3 and "writer epoch" not in listing and made["id"] in listing
    # Refresh: a new lifetime, then none; delete.
    refreshed = json.loads(ok(url, "refresh-checkpoint", "-i", copy["id"], "-l", "10s", "--json"))
    assert refreshed["id"] == copy["id"] and time.time() + 8 <= refreshed["expire_time_s"] <= time.time() + 11
    assert "expires never" in ok(url, "refresh-checkpoint", "--id", copy["id"])
    assert ok(url, "delete-checkpoint", "-i", made["id"]) == f"deleted checkpoint {made['id']}\n"
    left = jsons(url, "--json", "list-checkpoints")
    assert made["id"] not in {c["id"] for c in left} and len(left) == 2
    assert not [c for c in left if "writer_epoch" in c]
    # While a writer is open its own checkpoint is listed with its epoch.
    with slatedb.Db.open(url, settings=QUIET):
        assert "writer epoch 2" in ok(url, "list-checkpoints")


def test_manifest_commands(tmp_path):
    url = make_db(tmp_path / "db")
    latest = json.loads(ok(url, "--json", "read-manifest"))
    assert latest["writer_epoch"] == 1 and latest["initialized"] and latest["destroyed_at_s"] is None
    assert latest["l0"] and all(len(s) == 26 for s in latest["l0"]) and latest["last_l0_seq"] == 50
    assert {"replay_after_wal_id", "wal_id_last_seen", "compacted", "checkpoints", "external_dbs"} <= set(latest)
    first = ok(url, "read-manifest", "--id", "1")
    assert first.startswith("manifest 1\n") and "L0 (0)" in first
    listed = jsons(url, "list-manifests", "--start", "2", "--end", str(latest["id"]), "--json")
    assert [m["id"] for m in listed] == list(range(2, latest["id"] + 1))
    assert listed[-1]["key"] == f"manifest/{latest['id']:020d}.manifest" and listed[-1]["size_bytes"] > 0
    assert len(ok(url, "list-manifests").splitlines()) == latest["id"]


def test_errors_are_one_line_with_meaningful_exit_codes(tmp_path, capsys):
    url = make_db(tmp_path / "db", n=1)
    cid = "01740ee5-6459-44af-9a45-85deb6e468e3"
    # As a user meets them (subprocesses) ...
    one_line_error(slatedb_cli("ftp://nowhere", "list-checkpoints"), 2, "unsupported store URL scheme")
    one_line_error(slatedb_cli(url, "delete-checkpoint", "-i", cid), 1, f"no checkpoint {cid}")
    one_line_error(slatedb_cli(url, "create-checkpoint", "-l", "7 parsecs"), 2, "malformed duration")
    one_line_error(slatedb_cli(url, "refresh-checkpoint", "-i", "not-a-uuid"), 2, "is not a UUID")
    one_line_error(slatedb_cli(url, "list-manifests", "--start", "two"), 2, "--start must be an integer id")
    # ... and the rest in-process (same code path, without the interpreter start-up).
    cases = [
        ((f"file://{tmp_path}/none", "create-checkpoint"), 1, "no database"),
        ((url, "refresh-checkpoint", "-i", cid, "-l", "1h"), 1, f"no checkpoint {cid}"),
        ((url, "create-checkpoint", "-s", cid), 1, f"no checkpoint {cid}"),
        ((url, "create-checkpoint", "--source", "1234"), 2, "is not a UUID"),
        ((url, "clone", "--parent-path", url, "--parent-checkpoint", "x"), 2, "is not a UUID"),
        ((url, "read-manifest", "--id", "999"), 1, "manifest 999 does not exist"),
        ((url, "run-gc", "--settings", str(tmp_path / "missing.toml")), 2, "does not exist"),
        ((url, "run-gc", "--settings", str(tmp_path)), 2, "is not a file"),  # was "does not exist"
        ((url, "clone", "--parent-path", url), 2, "different from its parent"),
        ((url, "run-gc", "--once", "--db-delete-grace", "soon"), 2, "malformed duration"),
        # An unset variable in a script (--path "$DB"): was "the following arguments are required: --path".
        (("", "list-checkpoints"), 2, "--path is empty"),
        (("  ", "list-checkpoints"), 2, "--path is empty"),
    ]
    for (path, *args), code, fragment in cases:
        try:
            got = cli.main(["--path", path, *args])
        except SystemExit as e:
            got = e.code
        out, err = capsys.readouterr()
        one_line_error(subprocess.CompletedProcess(args, got, out, err), code, fragment)


def test_gc_clone_and_destroy_commands(tmp_path):
    parent = make_db(tmp_path / "prod")
    child = f"file://{tmp_path}/staging"
    settings = tmp_path / "gc.json"
    settings.write_text(json.dumps({"garbage_collector_options": {
        name: {"min_age": "0s"} for name in ("manifest_options", "wal_options", "compacted_options")}}))
    stats = json.loads(ok(parent, "--json", "run-gc", "--once", "--settings", str(settings)))
    assert stats["manifests_deleted"] >= 1 and stats["deleted"] >= stats["manifests_deleted"]
    assert ok(parent, "run-gc", "--once").startswith("gc: ")
    cp = json.loads(ok(parent, "--json", "create-checkpoint", "-n", "for-staging"))
    cloned = json.loads(ok(child, "--json", "clone", "--parent-path", parent, "--parent-checkpoint", cp["id"]))
    assert cloned["manifest"]["external_dbs"][0]["source_checkpoint_id"] == cp["id"]
    with slatedb.Db.open(child, settings=QUIET) as db:
        assert db.get(b"k007") == b"v007"
        db.put(b"k007", b"staging")
    # The parent holds a final checkpoint for the clone: a hard destroy is refused.
    one_line_error(slatedb_cli(parent, "destroy"), 1, "checkpoint")
    assert ok(child, "destroy", "--soft").startswith("soft-destroyed ")
    one_line_error(slatedb_cli(child, "create-checkpoint"), 1, "destroyed")
    assert json.loads(ok(child, "--json", "read-manifest"))["destroyed_at_s"] is not None
    # GC past the grace period removes the clone and releases its final checkpoint on the parent.
    gone = json.loads(ok(child, "--json", "run-gc", "--once", "--db-delete-grace", "0s"))
    assert gone["db_destroyed"] is True
    ok(parent, "delete-checkpoint", "-i", cp["id"])
    assert ok(parent, "list-checkpoints") == ""  # the writer's own checkpoint went at its clean close
    assert json.loads(ok(parent, "--json", "destroy")) == {"destroyed": parent, "soft": False}
    assert ok(parent, "list-objects") == ""


# In-process: the help of every command, and what an unexpected exception looks like.


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_every_command_has_help_with_a_description(command, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--path", "memory://x", command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: slatedb {command}") and "--json" in out
    assert len(out.split("\n\n")[1].strip()) > 20  # the description paragraph


def test_an_unexpected_exception_is_one_line_unless_debugging(monkeypatch, capsys):
    async def boom(ns):
        raise RuntimeError("kaboom\nsecond line")

    monkeypatch.setitem(cli.COMMANDS, "list-checkpoints", boom)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    assert cli.main(["--path", "memory://x", "list-checkpoints"]) == 1
    err = capsys.readouterr().err
    assert err == "slatedb: error: unexpected RuntimeError: kaboom second line (set SLATEDB_DEBUG=1 for a traceback)\n"
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    with pytest.raises(RuntimeError):
        cli.main(["--path", "memory://x", "list-checkpoints"])
