"""``slatedb clone --source URL[@CHECKPOINT][:RANGE] ...`` as a subprocess on file:// databases,
and the admin functions behind it."""

from __future__ import annotations

import json

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import InvalidArgumentError
from slatedb.projection import KeyRange
from slatedb.projection.create import CloneSource, parse_clone_source
from tests.test_cli_admin import QUIET, make_db, ok, one_line_error, slatedb_cli

pytestmark = pytest.mark.xdist_group("projection")


def scan(url: str) -> dict[bytes, bytes]:
    with slatedb.Db.open(url, settings=QUIET) as db:
        return dict(db.scan())


def test_parse_clone_source():
    cp = "01740ee5-6459-44af-9a45-85deb6e468e3"
    assert parse_clone_source("file:///tmp/db") == CloneSource("file:///tmp/db")
    assert parse_clone_source(f"s3://b/x@{cp}") == CloneSource("s3://b/x", cp)
    assert parse_clone_source(f"s3://b/x@{cp}:a..m") == CloneSource("s3://b/x", cp, KeyRange(b"a", b"m"))
    assert parse_clone_source("http://h:9000/db:..\\x3a\\x00") == CloneSource("http://h:9000/db", None,
                                                                              KeyRange(None, b":\x00"))
    assert parse_clone_source("memory://x/y:k5..") == CloneSource("memory://x/y", None, KeyRange(b"k5", None))
    # A port is not a range: the last ':' starts one only when ".." follows it.
    assert parse_clone_source("http://h:9000/db") == CloneSource("http://h:9000/db")
    assert parse_clone_source(f"http://h:9000/db@{cp}") == CloneSource("http://h:9000/db", cp)
    for bad in ("", "file:///db@not-a-uuid", "file:///db:m..a"):
        with pytest.raises(InvalidArgumentError):
            parse_clone_source(bad)
    with pytest.raises(InvalidArgumentError, match=r"^'not-a-uuid' in source 'file:///db@not-a-uuid' is not a checkpoint UUID$"):
        parse_clone_source("file:///db@not-a-uuid")  # the error names what follows the '@'
    assert str(parse_clone_source(f"s3://b/x@{cp}:a..\\xff")) == f"s3://b/x@{cp}:a..\\xff"


def test_split_and_merge_from_the_command_line(tmp_path):
    src = make_db(tmp_path / "src", 60)  # keys k000..k059
    full = scan(src)
    cp = json.loads(ok(src, "--json", "create-checkpoint", "-n", "rescale"))["id"]
    left, right, merged = (f"file://{tmp_path}/{n}" for n in ("left", "right", "merged"))
    out = json.loads(ok(left, "--json", "clone", "--source", f"{src}@{cp}:..k030"))
    assert out["sources"] == [f"{src}@{cp}:..k030"] and out["manifest"]["writer_epoch"] >= 1
    assert ok(right, "clone", "--source", f"{src}@{cp}:k030..").startswith("projected into ")
    assert scan(left) == {k: v for k, v in full.items() if k < b"k030"}
    assert scan(right) == {k: v for k, v in full.items() if k >= b"k030"}
    text = ok(merged, "clone", "--source", right, "--source", left)
    assert text.startswith("united 2 sources into ") and "last_l0_seq" in text
    m = json.loads(ok(merged, "--json", "read-manifest"))
    assert m["writer_epoch"] == 0 and len(m["external_dbs"]) == 1  # both shards at one checkpoint
    assert scan(merged) == full
    # typed one-line errors, exit code 2 for bad input
    one_line_error(slatedb_cli(f"file://{tmp_path}/x", "clone", "--source", left, "--source", left), 2, "duplicate")
    one_line_error(slatedb_cli(f"file://{tmp_path}/x", "clone", "--source", src, "--source", left), 2,
                   "overlapping key ranges")
    one_line_error(slatedb_cli(left, "clone", "--source", f"{left}:a..b"), 2, "differ")
    one_line_error(slatedb_cli(f"file://{tmp_path}/x", "clone", "--source", f"{src}:m..a"), 2, "empty key range")
    one_line_error(slatedb_cli(f"file://{tmp_path}/x", "clone"), 2, "--source")
    one_line_error(slatedb_cli(f"file://{tmp_path}/x", "clone", "--source", src, "--parent-path", src), 2,
                   "not both")


def test_admin_project_and_union_functions(tmp_path):
    src = make_db(tmp_path / "src", 20)
    full = scan(src)
    a, b, u = (f"file://{tmp_path}/{n}" for n in "abu")
    trio.run(admin.project, a, src, "..k010")
    trio.run(admin.project, b, src, KeyRange(b"k010", None))
    stored = trio.run(admin.union, u, [a, b])
    assert stored.manifest.initialized and scan(u) == full
