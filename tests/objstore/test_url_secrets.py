"""A store URL carrying credentials (``s3://bkt/db?...&secret_access_key=S``, as docs/objstore.md
allows) is shown without them wherever it is rendered: error messages, ``repr`` of a ``Db`` /
``DbReader``, ``slatedb.check`` reports, CLI output, ``slatedb.*`` log lines. Found opening such
a URL on SeaweedFS: ``Db.open(url, create="never")`` raised "no database at s3://bkt/db?...
&secret_access_key=slatedb-test-secret", ``repr(db)`` and ``repr(reader)`` showed it, the check
report's ``url`` and ``slatedb --path URL check`` printed it, and a clone of a database in
another bucket wrote it into its manifest (``ExternalDb.path``, read back by anyone who can
read the bucket). Only the URL parameters' values and a user-info part are hidden; the store
keeps its URL (a clone's parent in the same bucket is reached with the same credentials)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
import trio

import slatedb
import slatedb.aio
from slatedb import admin
from slatedb.objstore import resolve_store
from slatedb.redact import redact_text, shown_url
from tests import servers

SECRET = servers.SECRET_KEY


@pytest.mark.parametrize("url, shown", [
    ("s3://b/db?region=r&secret_access_key=S&session_token=T", "s3://b/db?region=r&secret_access_key=***&session_token=***"),
    ("s3://KEY:S@b/db", "s3://***@b/db"),
    ("s3://b/db?endpoint_url=http://u:S@h:1&SECRET_ACCESS_KEY=S", "s3://b/db?endpoint_url=http://***@h:1&SECRET_ACCESS_KEY=***"),
    ("s3://[b/db?secret_access_key=S", "s3://[b/db?secret_access_key=***"),  # does not parse: by pattern
    ("file:///d/db?fsync=false", "file:///d/db?fsync=false"),
    ("memory://x/db", "memory://x/db"),
])
def test_shown_url_hides_user_info_and_secret_values(url, shown) -> None:
    assert shown_url(url) == shown
    assert "S" not in shown_url(url).replace("SECRET_ACCESS_KEY", "").replace("s3", "")
    assert redact_text(f"no database at {url} (no manifest)") .count("***") == shown.count("***")


@pytest.fixture(scope="module")
def s3():
    gen = servers.seaweedfs()
    server = next(gen)
    for bucket in ("secrets", "secretsparent"):
        servers.create_bucket(server, bucket)
    yield server
    gen.close()


def _url(server, path: str) -> str:
    return (f"s3://{path}?endpoint_url={server.endpoint_url}&region={servers.REGION}"
            f"&access_key_id={servers.ACCESS_KEY}&secret_access_key={SECRET}")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_messages_reprs_reports_and_logs_hide_the_secret(s3) -> None:
    from slatedb.runtime.production import ProductionRuntime

    url = _url(s3, "secrets/db")
    with pytest.raises(slatedb.NotFoundError) as info:
        slatedb.Db.open(url, create="never")
    assert SECRET not in str(info.value) and "secret_access_key=***" in str(info.value)
    root, lines = logging.getLogger("slatedb"), _Lines()
    levels = {name: logging.getLogger(name).level for name in ("slatedb", "slatedb.events")}
    root.addHandler(lines)
    for name in levels:
        logging.getLogger(name).setLevel(logging.DEBUG)
    try:
        with slatedb.Db.open(url, {"compactor_options": None}) as db:
            db.put(b"k", b"v", durable=True)
            assert SECRET not in repr(db) and "s3://secrets/db?" in repr(db)
            cp = db.create_checkpoint()
        with slatedb.DbReader.open(url, cp.id) as reader:
            assert SECRET not in repr(reader) and reader.get(b"k") == b"v"

        async def aio_reprs() -> list[str]:
            async with slatedb.aio.DbReader.open(url, cp.id) as r:
                async with slatedb.aio.Db.open(url, {"compactor_options": None}) as w:
                    return [repr(r), repr(w)]

        shown = trio.run(aio_reprs)
        assert all("s3://secrets/db?" in x and SECRET not in x for x in shown), shown
        report = slatedb.check(url)
        assert SECRET not in json.dumps(report.to_json()) and SECRET not in "\n".join(report.lines())
        trio.run(admin.create_clone_from_sources, _url(s3, "secrets/union"), [f"{url}@{cp.id}"])
        ProductionRuntime().event("union", union_step="begin", dest=url)  # an event with a URL field, logged
    finally:
        root.removeHandler(lines)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    assert lines.lines and [line for line in lines.lines if "dest=s3://secrets/db?" in line and "secret_access_key=***" in line]
    assert not [line for line in lines.lines if SECRET in line]


def test_cli_output_hides_the_secret(s3) -> None:
    url = _url(s3, "secrets/cli")
    with slatedb.Db.open(url, {"compactor_options": None}) as db:
        db.put(b"k", b"v", durable=True)
    slatedb_cli = os.path.join(os.path.dirname(sys.executable), "slatedb")
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    for args in (["check"], ["--json", "check"], ["clone", "--parent-path", url], ["read-manifest", "--id", "999"]):
        path = _url(s3, "secrets/cli-clone") if args[0] == "clone" else url
        p = subprocess.run([slatedb_cli, "--path", path, *args], capture_output=True, text=True, env=env, timeout=120)
        assert p.stdout + p.stderr and SECRET not in p.stdout + p.stderr, (args, p.stdout, p.stderr)


def test_a_clone_in_another_bucket_keeps_no_secret_in_its_manifest_and_still_reads(s3) -> None:
    parent, clone = _url(s3, "secretsparent/p"), _url(s3, "secrets/clone")
    with slatedb.Db.open(parent, {"compactor_options": None}) as db:
        db.put(b"k", b"v", durable=True)
        db.flush(wal=False)
    stored = trio.run(admin.create_clone, clone, parent)
    [ext] = stored.manifest.external_dbs
    assert SECRET not in ext.path and "access_key_id" not in ext.path
    assert ext.path.startswith("s3://secretsparent/p?endpoint_url=")
    store = resolve_store(clone)
    assert SECRET not in json.dumps(admin.manifest_json(trio.run(admin.read_manifest, store)))
    with slatedb.Db.open(clone, {"compactor_options": None}) as db:
        assert db.get(b"k") == b"v"  # the parent's SST, reached with the clone's credentials
