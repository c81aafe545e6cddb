"""S3 failures in the middle of a run, against a real SeaweedFS (issue 25 item 3).

Each test gets its own SeaweedFS (started here, stopped by its PID): the tests delete its bucket
and freeze it with SIGSTOP.

- A bucket deleted while a writer runs: the next call raises :class:`BucketNotFoundError`
  (before: ``SlateDBError: background task failed: AssertionError()`` from the manifest poller).
- No credentials anywhere: an immediate :class:`CredentialsMissingError` (before: retried as
  transient, 10 times, 8-11 s).
- A frozen endpoint (SIGSTOP): a durable put raises :class:`ObjectStoreRetriesExhaustedError`
  within the retry deadline, the connect and read timeouts counted in it (before: 241 s for a
  180 s bound, each attempt waiting out the 60 s read timeout).
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import trio

import slatedb
from slatedb.errors import (
    BucketNotFoundError,
    CredentialsMissingError,
    InvalidDbStateError,
    ObjectStoreRetriesExhaustedError,
    PermanentObjectStoreError,
    TransientObjectStoreError,
)
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.objstore.retry import create_if_absent, retry_transient
from slatedb.runtime import RetryPolicy
from slatedb.runtime.production import ProductionRuntime
from tests import servers

from .test_s3_errors import within

QUIET = {"compactor_options": None, "garbage_collector_options": None, "flush_interval": "20ms",
         "manifest_poll_interval": "100ms"}


@pytest.fixture
def server():
    gen = servers.seaweedfs()
    srv = next(gen)
    servers.create_bucket(srv, "midrun")
    try:
        yield srv
    finally:
        try:
            os.kill(srv.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        gen.close()


def _client(srv):
    import boto3

    return boto3.client("s3", endpoint_url=srv.endpoint_url, region_name=servers.REGION,
                        aws_access_key_id=servers.ACCESS_KEY, aws_secret_access_key=servers.SECRET_KEY)


def test_a_bucket_deleted_under_a_running_writer_raises_bucket_not_found(server) -> None:
    db = slatedb.Db.open("s3://midrun/db", settings=QUIET, store_options=server.options())
    try:
        db.put(b"a", b"1", durable=True)
        client = _client(server)
        for obj in client.list_objects_v2(Bucket="midrun").get("Contents", []):
            client.delete_object(Bucket="midrun", Key=obj["Key"])
        client.delete_bucket(Bucket="midrun")
        time.sleep(1.0)  # several manifest polls meet the missing bucket

        def put() -> None:
            db.put(b"b", b"2", durable=True)

        err, _ = within(60, put)
        if isinstance(err, InvalidDbStateError):
            # A poll listed the bucket empty while SeaweedFS was still deleting it, and the root
            # check right after still found it (seen on a loaded machine): the objects vanished
            # first, which is what that error says ("destroyed or deleted while open").
            assert "no manifest file left under s3://midrun/db/manifest/" in str(err), repr(err)
        else:
            assert isinstance(err, BucketNotFoundError), repr(err)
            assert "bucket midrun does not exist" in str(err) and server.endpoint_url in str(err)
        err, _ = within(30, lambda: db.get(b"zzz-not-cached"))
        assert err is None or isinstance(err, (BucketNotFoundError, slatedb.SlateDBError)), repr(err)
    finally:
        db.abort()


def test_no_credentials_is_an_immediate_typed_error(server, monkeypatch, tmp_path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    options = {"endpoint_url": server.endpoint_url, "region": servers.REGION}
    err, took = within(60, lambda: slatedb.Db.open("s3://midrun/nocreds", settings=QUIET, store_options=options))
    assert isinstance(err, CredentialsMissingError) and isinstance(err, PermanentObjectStoreError), repr(err)
    assert "no credentials" in str(err) and "AWS_ACCESS_KEY_ID" in str(err), str(err)
    assert took < 5, took


DEADLINE_S = 6.0


def test_a_frozen_endpoint_gives_up_within_the_retry_deadline(server) -> None:
    """The documented bound is 180 s (default policy); the test uses the same code with a 6 s
    deadline. Before the fix one attempt alone waited out the 60 s read timeout."""
    rt = ProductionRuntime("frozen", RetryPolicy(max_retries=10, deadline_s=DEADLINE_S, log=True))
    db = slatedb.Db.open("s3://midrun/frozen", settings=QUIET, store_options=server.options(), runtime=rt)
    try:
        db.put(b"a", b"1", durable=True)
        os.kill(server.pid, signal.SIGSTOP)
        err, took = within(120, lambda: db.put(b"b", b"2", durable=True))
        assert isinstance(err, ObjectStoreRetriesExhaustedError), repr(err)
        assert f"retry deadline {DEADLINE_S:g} s" in str(err), str(err)
        assert took <= DEADLINE_S + 3, took
    finally:
        os.kill(server.pid, signal.SIGCONT)
        db.abort()


class HangingStore(MemoryStore):
    """Every call waits forever (an endpoint that accepted the connection and never answers)."""

    async def put(self, key, data, mode=None):
        await trio.sleep_forever()

    async def get(self, key, byte_range=None):
        await trio.sleep_forever()


@pytest.mark.parametrize("op", ["create_if_absent", "retry_transient"])
def test_the_deadline_counts_a_hanging_attempt(op) -> None:
    rt = ProductionRuntime("hang", RetryPolicy(max_retries=10, deadline_s=0.5, log=False))
    store = HangingStore(MemoryBucket(), rt.now_ms)

    async def main():
        if op == "create_if_absent":
            await create_if_absent(store, rt, "wal/00000000000000000001.sst", b"x")
        else:
            await retry_transient(rt, lambda: store.get("k"), what="get k")

    t0 = time.monotonic()
    with pytest.raises(ObjectStoreRetriesExhaustedError) as e:
        trio.run(main)
    assert time.monotonic() - t0 < 2.5
    assert isinstance(e.value.__cause__, TransientObjectStoreError) and "no answer within" in str(e.value)
