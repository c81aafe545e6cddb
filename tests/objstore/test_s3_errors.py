"""Issue 16 item 1: S3 errors are classified and retries are bounded, against a real server.

Before: a wrong secret (403), an unreachable endpoint and a missing bucket each hung forever
without a word (every unexpected error was "transient" and retried without bound). Now
permanent errors raise at once with a typed error naming the bucket and endpoint; transient
ones retry with backoff up to ``object_store_max_retries`` (default 10) or a deadline, logging
each wait, then raise :class:`ObjectStoreRetriesExhaustedError`.

Every test runs its body in a daemon thread joined with a time limit, so a regression fails
the test instead of hanging the suite.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

import pytest
import trio

import slatedb
from slatedb.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    ObjectStoreRetriesExhaustedError,
    PermanentObjectStoreError,
)
from slatedb.objstore import resolve_store
from tests import servers

LIMIT_S = 30.0


def within(limit_s: float, fn: Callable[[], Any]) -> tuple[BaseException | None, float]:
    """Run ``fn`` in a daemon thread; (the exception it raised, seconds taken). Fails the test
    when it has not returned after ``limit_s``."""
    box: dict[str, BaseException] = {}

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001
            box["e"] = e

    t0 = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    took = time.monotonic() - t0
    if thread.is_alive():
        pytest.fail(f"still running after {limit_s} s (hangs)")
    return box.get("e"), took


def _list(url: str, options: dict[str, str]) -> None:
    """Read the latest manifest as the admin tools do (through the retry layer, production policy)."""
    from slatedb.manifest.store import ManifestStore
    from slatedb.runtime.production import ProductionRuntime

    async def main() -> None:
        store = resolve_store(url, options=options)
        try:
            await ManifestStore(store, ProductionRuntime("test")).read_latest()
        finally:
            await store.aclose()

    trio.run(main)


def _open(url: str, options: dict[str, str], settings: dict | None = None) -> None:
    with slatedb.Db.open(url, settings={"compactor_options": None, "garbage_collector_options": None, **(settings or {})},
                         store_options=options):
        pass


@pytest.mark.parametrize("how", ["list", "open"])
def test_wrong_secret_is_access_denied_at_once(seaweedfs_server, how) -> None:
    options = {**seaweedfs_server.options(), "secret_access_key": "wrong-secret"}
    fn = (lambda: _list("s3://contract/denied", options)) if how == "list" else (lambda: _open("s3://contract/denied", options))
    err, took = within(LIMIT_S, fn)
    assert isinstance(err, AccessDeniedError), repr(err)
    assert isinstance(err, PermanentObjectStoreError)
    msg = str(err)
    assert "bucket contract" in msg and seaweedfs_server.endpoint_url in msg and "403" in msg, msg
    assert took < 10, took


@pytest.mark.parametrize("how", ["list", "open"])
def test_missing_bucket_says_so(seaweedfs_server, how) -> None:
    options = seaweedfs_server.options()
    url = "s3://no-such-bucket-16/db"
    fn = (lambda: _list(url, options)) if how == "list" else (lambda: _open(url, options))
    err, took = within(LIMIT_S, fn)
    assert isinstance(err, BucketNotFoundError), repr(err)
    assert "bucket no-such-bucket-16 does not exist" in str(err) and seaweedfs_server.endpoint_url in str(err), str(err)
    assert err.bucket == "no-such-bucket-16"
    assert took < 10, took


@pytest.mark.parametrize("bucket, words", [
    ("H5", "uppercase"), ("ab", "3-63 characters"), ("has_underscore", "'_'"), ("-lead", "start and end"),
    ("192.168.1.1", "IP address"), ("a..b", "'..'"),
])
def test_a_missing_bucket_whose_name_s3_refuses_says_so(seaweedfs_server, bucket, words) -> None:
    """Found by opening ``s3://H5/db`` (and ``ab``, ``has_underscore``): "bucket H5 does not
    exist ... (create it first)" -- no such bucket can be created. The error says the name is
    not a valid S3 bucket name, and why (a hint only: servers and old AWS buckets may differ)."""
    err, _ = within(LIMIT_S, lambda: _open(f"s3://{bucket}/db", seaweedfs_server.options()))
    assert isinstance(err, BucketNotFoundError), repr(err)
    msg = str(err)
    assert f"bucket {bucket} does not exist" in msg and "not a valid S3 bucket name" in msg and words in msg, msg


def test_a_missing_bucket_with_a_valid_name_gets_no_such_note() -> None:
    assert "valid" not in str(BucketNotFoundError("", "no-such-bucket.v2", "http://127.0.0.1:1"))


def test_missing_bucket_at_the_root_check_names_no_empty_key(seaweedfs_server, capsys) -> None:
    """``slatedb --path s3://missing/x list-objects`` printed "error: : bucket missing does not
    exist ..." (the root check names no object, and the message led with an empty key)."""
    from slatedb.cli import main

    url = "s3://no-such-bucket-17/db"

    async def check() -> None:
        store = resolve_store(url, options=seaweedfs_server.options())
        try:
            await store.check_root()
        finally:
            await store.aclose()

    with pytest.raises(BucketNotFoundError) as info:
        trio.run(check)
    assert str(info.value) == f"bucket no-such-bucket-17 does not exist at {seaweedfs_server.endpoint_url} (create it first)"
    env = {"AWS_ENDPOINT_URL": seaweedfs_server.endpoint_url, "AWS_REGION": servers.REGION,
           "AWS_ACCESS_KEY_ID": servers.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": servers.SECRET_KEY}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert main(["--path", url, "list-objects"]) != 0
    assert "error: bucket no-such-bucket-17 does not exist" in capsys.readouterr().err


def test_closed_port_retries_up_to_object_store_max_retries_then_raises(caplog) -> None:
    (port,) = servers.free_port_pairs(1)
    endpoint = f"http://127.0.0.1:{port}"
    options = {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": "k", "secret_access_key": "s"}
    caplog.set_level(logging.WARNING, logger="slatedb.objstore")
    err, took = within(LIMIT_S, lambda: _open("s3://bucket/db", options, {"object_store_max_retries": 2}))
    assert isinstance(err, ObjectStoreRetriesExhaustedError), repr(err)
    msg = str(err)
    assert "after 3 attempts" in msg and endpoint in msg and "bucket bucket" in msg, msg
    assert took < 10, took
    records = [r for r in caplog.records if r.name.startswith("slatedb.objstore")]
    waits = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(waits) == 2 and all("retry" in w and endpoint in w for w in waits), waits
    # and one ERROR line when the retries run out (the observability log of issue 22 item 5)
    exhausted = [r.getMessage() for r in records if r.levelno == logging.ERROR]
    assert len(exhausted) == 1 and "retry_exhausted" in exhausted[0] and "attempt=3" in exhausted[0], exhausted


def test_closed_port_with_default_settings_returns_within_seconds() -> None:
    (port,) = servers.free_port_pairs(1)
    options = {"endpoint_url": f"http://127.0.0.1:{port}", "region": "us-east-1", "access_key_id": "k",
               "secret_access_key": "s"}
    err, took = within(LIMIT_S, lambda: _list("s3://bucket/db", options))
    assert isinstance(err, ObjectStoreRetriesExhaustedError), repr(err)
    assert "after 11 attempts" in str(err) and "object_store_max_retries=10" in str(err), str(err)
    assert took < 20, took


def test_invalid_request_is_permanent() -> None:
    from botocore.exceptions import ClientError, ParamValidationError

    from slatedb.objstore.s3 import S3Store

    store = S3Store("b", "p", endpoint_url="http://127.0.0.1:1", region="us-east-1", access_key_id="k",
                    secret_access_key="s")
    bad = ClientError({"Error": {"Code": "InvalidRequest", "Message": "nope"},
                       "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutObject")
    got = store._classify("k", bad)
    assert type(got) is PermanentObjectStoreError and "400 InvalidRequest" in str(got) and "bucket b" in str(got)
    got = store._classify("k", ParamValidationError(report="bad bucket"))
    assert type(got) is PermanentObjectStoreError
