"""``slatedb check`` on S3 (SeaweedFS, started and stopped by PID by tests/servers.py): a
database our engine wrote is clean, an SST deleted under it is GC-4; the CLI reads the standard
AWS variables."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.objstore import resolve_store
from tests import servers

from .helpers import REPO


@pytest.fixture(scope="module")
def s3():
    gen = servers.seaweedfs()
    server = next(gen)
    servers.create_bucket(server, "check")
    yield server
    gen.close()


def test_check_on_s3(s3) -> None:
    url = "s3://check/db"
    opts = s3.options()
    with slatedb.Db.open(url, {"l0_sst_size_bytes": 2048, "compactor_options": None}, store_options=opts) as db:
        for i in range(200):
            db.put(b"k%04d" % i, b"v" * 40)
        db.flush(wal=False)
    store = resolve_store(url, options=opts)
    report = slatedb.check(url, deep=True, store=store)
    assert report.healthy, report.describe()
    m = trio.run(admin.read_manifest, store).manifest
    victim = m.l0[0].sst_id
    trio.run(store.delete, f"compacted/{victim}.sst")
    (f,) = slatedb.check(url, store=resolve_store(url, options=opts)).findings
    assert (f.invariant, f.object) == ("GC-4", f"compacted/{victim}.sst")
    env = dict(os.environ, AWS_ENDPOINT_URL=s3.endpoint_url, AWS_REGION=servers.REGION,
               AWS_ACCESS_KEY_ID=servers.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=servers.SECRET_KEY)
    cli = subprocess.run([sys.executable, "-m", "slatedb.cli", "check", "--path", url, "--no-garbage"],
                         capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert cli.returncode == 1 and cli.stdout.startswith(f"GC-4 compacted/{victim}.sst: "), cli.stdout + cli.stderr
    empty = subprocess.run([sys.executable, "-m", "slatedb.cli", "check", "--path", "s3://check/nothing"],
                           capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert empty.returncode == 2, empty.stdout + empty.stderr
