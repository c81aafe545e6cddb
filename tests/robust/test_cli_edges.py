"""Issue 16 item 5: CLI edges. Bad ids and ranges are bad input (exit 2) with a one-line error;
list commands on a path without a database answer like the other commands (exit 1); output
piped into ``head`` ends quietly; durations accept what people type; absurd lifetimes and empty
checkpoint names are refused. Item 4's last point: unrelated ``SLATEDB_*`` variables (the CLI's
own ``SLATEDB_DEBUG``) do not break ``run-gc`` / ``run-compactor``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import slatedb
from slatedb import cli
from slatedb.checkpoint import parse_duration
from slatedb.errors import InvalidArgumentError

BIN = os.path.join(os.path.dirname(sys.executable), "slatedb")
REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = cli.main(list(argv))
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str, *fragments: str) -> None:
    assert err.startswith("slatedb") and ": error: " in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert "unexpected" not in err, err
    for f in fragments:
        assert f in err, (f, err)


@pytest.fixture(scope="module")
def db_url(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("clidb")
    url = f"file://{path}"
    with slatedb.Db.open(url, {"l0_sst_size_bytes": 1024, "garbage_collector_options": None}) as db:
        for i in range(200):
            db.put(b"k%04d" % i, b"v" * 50)
        db.flush(wal=False)
    return url


@pytest.mark.parametrize("argv, fragment", [
    (["read-compactions", "--id", "-1"], "--id"),
    (["read-compactions", "--id", "1" * 24], "--id"),
    (["read-compaction", "--id", "01K000000000000000000000AA", "--compactions-id", "-4"], "--compactions-id"),
    (["read-manifest", "--id", "-3"], "--id"),
    (["read-manifest", "--id", "9" * 30], "--id"),
    (["list-manifests", "--start", "-1"], "--start"),
    (["list-compactions", "--end", "-2"], "--end"),
    (["list-manifests", "--start", "5", "--end", "3"], "--start 5 is above --end 3"),
    (["list-compactions", "--start", "9", "--end", "2"], "--start 9 is above --end 2"),
    (["create-checkpoint", "--name", ""], "name"),
    # An empty name matches no checkpoint (none can have it): exit 0 and nothing listed looked
    # like "there are none"; refused as create-checkpoint refuses it.
    (["list-checkpoints", "--name", ""], "name"),
    (["list-checkpoints", "-n", "  "], "name"),
    (["create-checkpoint", "--lifetime", "1000000years"], "lifetime"),
    (["create-checkpoint", "--lifetime", "0s"], "lifetime"),
    (["create-checkpoint", "--lifetime", "soon"], "duration"),
    # Found recorded Submitted (exit 0), then failed by the compactor: refused at the call.
    (["submit-compaction", "--request", '{"Spec": {"sources": [], "destination": 0}}'], "at least one source"),
    (["submit-compaction", "--request", '{"sources": [{"SortedRun": 0}, {"SortedRun": 0}], "destination": 0}'],
     "duplicate sources"),
    # Found ignored: the local engine ran (exit 0), the operator believing it ran on Spark.
    (["run-compactor", "--once", "--spark-master", "local[2]"], "--engine spark"),
    # Found: "give either --source or --parent-path" for --source with --parent-checkpoint, no --parent-path.
    (["clone", "--source", "file:///nowhere/db", "--parent-checkpoint", "00000000-0000-0000-0000-000000000000"],
     "URL@CHECKPOINT"),
    # Found: exit 1, "unexpected PySparkRuntimeError" and the JVM's stack trace for a typo.
    (["run-compactor", "--once", "--engine", "spark", "--spark-master", "bogus://x"], "not a Spark master URL"),
    (["run-compactor", "--once", "--engine", "spark", "--spark-master", "local[two]"], "not a Spark master URL"),
])
def test_bad_input_is_exit_2(capsys, db_url, argv, fragment) -> None:
    code, out, err = run(capsys, "--path", db_url, *argv)
    assert code == 2, (code, out, err)
    one_line(err, fragment)
    assert out == ""


_SPEC = '{"Spec": {"sources": [{"SortedRun": 3}], "destination": 3}}'


@pytest.mark.parametrize("argv", [
    ["list-manifests"], ["list-compactions"], ["read-manifest"], ["list-checkpoints"],
    # Found answering otherwise: submit-compaction wrote a .compactions file at the empty path
    # (exit 0; Db.open then refused the path as a database whose manifests were lost), "Full"
    # and run-compactor exited 2, run-gc exited 0 ("nothing to do"), a hard destroy 0
    # ("destroyed URL"), read-compaction(s) said "no .compactions file yet".
    ["submit-compaction", "--request", _SPEC], ["submit-compaction", "--request", "Full"],
    ["read-compactions"], ["read-compaction", "--id", "01K000000000000000000000AA"],
    ["run-compactor", "--once"], ["run-gc", "--once"], ["destroy"], ["destroy", "--soft"],
    ["create-checkpoint"], ["delete-checkpoint", "-i", "01740ee5-6459-44af-9a45-85deb6e468e3"],
])
def test_no_database_is_exit_1_for_every_command(capsys, tmp_path, argv) -> None:
    code, out, err = run(capsys, "--path", f"file://{tmp_path}/nothing", *argv)
    assert code == 1, (code, out, err)
    one_line(err, "no database at")
    assert out == "" and not (tmp_path / "nothing").exists()  # nothing written there


async def test_submit_compaction_writes_nothing_where_there_is_no_database() -> None:
    """``admin.submit_compaction`` of a spec on a path with no database raised nothing and wrote
    a ``.compactions`` file there. Now it raises ``NotFoundError``; with data but no manifest,
    ``ManifestsMissingError``; in both cases it writes nothing."""
    from slatedb import admin
    from slatedb.errors import ManifestsMissingError, NotFoundError
    from slatedb.objstore import resolve_store

    store = resolve_store("memory://submit-nothing")
    with pytest.raises(NotFoundError, match="no database"):
        await admin.submit_compaction(store, _SPEC)
    assert await store.list("") == []
    await store.put("wal/00000000000000000001.sst", b"")
    with pytest.raises(ManifestsMissingError):
        await admin.submit_compaction(store, _SPEC)
    assert [m.key for m in await store.list("")] == ["wal/00000000000000000001.sst"]
    await store.aclose()


def test_ranges_that_are_fine(capsys, db_url) -> None:
    code, out, err = run(capsys, "--path", db_url, "--json", "list-manifests", "--start", "1", "--end", "1")
    assert code == 0 and [json.loads(line)["id"] for line in out.splitlines()] == [1], (out, err)
    code, out, err = run(capsys, "--path", db_url, "list-manifests", "--start", "10000", "--end", "10000")
    assert code == 0 and out == "" and err == ""  # a valid range with nothing in it


@pytest.mark.parametrize("text, seconds", [
    ("1.5h", 5400.0), ("90s", 90.0), ("5", 5.0), ("2.5", 2.5), ("1day 30min", 88200.0), ("1h30m", 5400.0),
    ("0.5 days", 43200.0), ("100ms", 0.1),
])
def test_durations_people_type(text, seconds) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "h", "1.2.3h", "-5s", "5 parsecs", "1e400", "nan"])
def test_bad_durations(bad) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_duration(bad)


def test_lifetime_as_typed_reaches_the_checkpoint(capsys, db_url) -> None:
    import time

    code, out, err = run(capsys, "--path", db_url, "--json", "create-checkpoint", "-l", "1.5h", "-n", "x")
    assert code == 0, err
    got = json.loads(out)
    assert abs(got["expire_time_s"] - (time.time() + 5400)) < 60


def test_output_piped_into_head_ends_quietly(db_url) -> None:
    got = subprocess.run(f"'{BIN}' --path '{db_url}' list-objects | head -1", shell=True, capture_output=True,
                         text=True, timeout=120)
    assert got.stdout.count("\n") == 1, got.stdout
    assert got.stderr == "", got.stderr


@pytest.mark.parametrize("command", [["run-gc", "--once"], ["run-compactor", "--once"]])
def test_unrelated_slatedb_variables_do_not_break_run_commands(db_url, command) -> None:
    env = {**os.environ, "SLATEDB_DEBUG": "1", "SLATEDB_SOMETHING_ELSE": "x"}
    got = subprocess.run([BIN, "--path", db_url, *command], capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 0, got.stderr
    # A misspelt *setting* still fails loudly (exit 2), naming the variable.
    env = {**os.environ, "SLATEDB_FLUSH_INTERVALL": "1s"}
    got = subprocess.run([BIN, "--path", db_url, *command], capture_output=True, text=True, timeout=120, env=env)
    assert got.returncode == 2 and "SLATEDB_FLUSH_INTERVALL" in got.stderr, got.stderr


async def test_the_admin_api_refuses_bad_ids_too(tmp_path) -> None:
    """The same checks one level down (what the CLI's AssertionError came from)."""
    from slatedb import admin
    from slatedb.objstore import resolve_store

    store = resolve_store(f"file://{tmp_path}")
    for bad in (-1, 10**24, "3"):
        with pytest.raises(InvalidArgumentError, match="compactions id"):
            await admin.read_compactions(store, bad)
        with pytest.raises(InvalidArgumentError, match="manifest id"):
            await admin.read_manifest(store, bad)


def test_path_after_the_command_works_for_every_command(capsys, db_url) -> None:
    """``slatedb --help`` says --path is "also accepted after the command": found true of
    ``check`` only; ``slatedb list-checkpoints --path URL`` was "unrecognized arguments" (exit
    2). Now every command takes it; two different values are refused rather than one ignored."""
    import argparse

    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in sub.choices.items():
        assert any("--path" in a.option_strings for a in parser._actions), name
    code, out, err = run(capsys, "read-manifest", "--path", db_url, "--json")
    assert code == 0 and json.loads(out)["id"] >= 1, (code, out, err)
    assert run(capsys, "--path", db_url, "list-manifests", "--path", db_url)[0] == 0
    code, out, err = run(capsys, "--path", db_url, "list-manifests", "--path", db_url + "/other")
    assert code == 2 and out == ""
    one_line(err, "--path given twice")


@pytest.mark.parametrize("argv, named", [
    (("--bogus",), "slatedb: "),
    (("--path", "memory://x", "--once"), "slatedb: "),
    (("--path", "memory://x", "list-checkpoints", "--bogus"), "slatedb list-checkpoints: "),
    (("list-manifests", "--path", "memory://x", "--bogus", "3"), "slatedb list-manifests: "),
])
def test_an_unknown_option_is_named_before_a_missing_command(capsys, argv, named) -> None:
    """``slatedb --bogus`` said "the following arguments are required: <command>", hiding the
    typo (argparse checks the required command first); an option of a command given without it
    (``--once``) alike. The unknown option is named, by the parser of the command it was given to
    (``slatedb <command>: error: ...``, as docs/admin.md says of option errors; it was
    ``slatedb: error: ...``)."""
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    one_line(err, "unrecognized arguments: " + next(a for a in argv if a in ("--bogus", "--once")))
    assert err.startswith(named), err
    assert "required" not in err, err


def test_a_missing_command_is_still_named(capsys) -> None:
    code, out, err = run(capsys, "--path", "memory://x")
    assert code == 2
    one_line(err, "required: <command>")


def test_list_manifests_and_list_compactions_list_beside_a_damaged_latest_manifest(capsys, tmp_path) -> None:
    """An operator whose latest manifest no longer decodes lists the manifests to pick one to
    read (``read-manifest --id N`` reads an older one). ``list-manifests`` decoded the latest
    first and failed with its CorruptionError (exit 1), though it only lists."""
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url) as db:  # its compactor writes a .compactions file
        db.put(b"k", b"v")
    ids = sorted(int(p.stem) for p in (tmp_path / "manifest").iterdir())
    (tmp_path / "manifest" / f"{ids[-1]:020d}.manifest").write_bytes(b"\x00\x02\xff")
    code, out, err = run(capsys, "--path", url, "list-manifests")
    assert code == 0, (code, out, err)
    assert [int(line.split()[0]) for line in out.splitlines()] == ids
    code, out, err = run(capsys, "--path", url, "list-compactions")  # likewise: it reads no manifest
    assert code == 0 and json.loads(out.splitlines()[-1])["id"] >= 1, (code, out, err)
    code, out, err = run(capsys, "--path", url, "read-manifest")  # reading it still names the damage
    assert code == 1 and "corrupt object manifest/" in err, (code, err)
    assert run(capsys, "--path", f"file://{tmp_path}/nothing", "list-manifests")[0] == 1  # still: no database
