"""How long retries pause: 10 ms doubling to 2 s while a database opens and in tools that only
look (a wrong endpoint fails within seconds, ``test_s3_errors.py``); once a writer or a reader
has opened, 100 ms doubling to 15 s, the official engine's ``object_store`` ``BackoffConfig``,
so the default 10 retries ride out about a minute of outage (before: about 7 s, after which a
WAL write gave up and the database stopped; measured by SIGKILLing SeaweedFS under a writer)."""

from __future__ import annotations

import random
import threading

import pytest
import trio

import slatedb
from slatedb.errors import TransientObjectStoreError
from slatedb.objstore.memory import MemoryBucket
from slatedb.objstore.retry import retry_transient
from slatedb.runtime import opened
from slatedb.runtime.production import PRODUCTION_RETRIES, ProductionRuntime
from tests.db.helpers import OutageStore

QUIET = {"compactor_options": None, "garbage_collector_options": None, "flush_interval": "1h",
         "manifest_poll_interval": "1h"}


class PausesRecorded(ProductionRuntime):
    """Production policy, seeded jitter, and pauses recorded instead of slept."""

    def __init__(self) -> None:
        super().__init__("pauses")
        self._rng = random.Random(7)  # type: ignore[assignment]
        self.pauses: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        await trio.lowlevel.checkpoint()


def _pauses_until_exhausted(rt: PausesRecorded) -> list[float]:
    async def fail():
        raise TransientObjectStoreError("k", "down")

    async def main():
        with pytest.raises(slatedb.errors.ObjectStoreRetriesExhaustedError):
            await retry_transient(rt, fail, what="get k")

    rt.pauses.clear()
    trio.run(main)
    return list(rt.pauses)


def test_pauses_are_short_until_a_database_has_opened_then_those_of_object_store() -> None:
    rt = PausesRecorded()
    rt.retry_policy = PRODUCTION_RETRIES
    quick = _pauses_until_exhausted(rt)
    assert len(quick) == 10 and 0.005 <= quick[0] <= 0.015 and max(quick) <= 2.0 * 1.5
    assert sum(quick) < 12
    opened(rt)
    assert (rt.retry_policy.backoff_min_s, rt.retry_policy.backoff_max_s) == (0.1, 15.0)
    slow = _pauses_until_exhausted(rt)
    assert len(slow) == 10 and 0.05 <= slow[0] <= 0.15 and max(slow) > 7.5 and max(slow) <= 15.0 * 1.5
    assert sum(slow) > 30  # the 10 retries span about a minute (0.1 + 0.2 + ... + 12.8 + 15, jittered)
    # the pauses double from one retry to the next (jitter of 0.5x-1.5x around each)
    for i, p in enumerate(slow):
        nominal = min(15.0, 0.1 * 2 ** i)
        assert 0.5 * nominal <= p <= 1.5 * nominal, (i, p)


def test_a_policy_without_open_pauses_keeps_its_own(tmp_path) -> None:
    rt = PausesRecorded()
    rt.retry_policy = slatedb.runtime.RetryPolicy(max_retries=3)  # the simulator's bounded clients: no open pauses
    opened(rt)
    assert (rt.retry_policy.backoff_min_s, rt.retry_policy.backoff_max_s) == (0.01, 2.0)


def test_an_open_writer_and_reader_run_under_the_long_pauses(tmp_path) -> None:
    url = f"file://{tmp_path}"
    with slatedb.Db.open(url, QUIET) as db:
        policy = db._core.runtime.retry_policy
        assert (policy.backoff_min_s, policy.backoff_max_s, policy.max_retries) == (0.1, 15.0, 10)
        db.put(b"k", b"v", durable=True)
        with slatedb.DbReader.open(url, settings={"object_store_max_retries": 4}) as reader:
            policy = reader._core.runtime.retry_policy
            assert (policy.backoff_min_s, policy.backoff_max_s, policy.max_retries) == (0.1, 15.0, 4)


def test_an_open_writer_rides_out_an_outage_its_retries_span(tmp_path) -> None:
    """Three retries: 10-15-30-60 ms pauses would give up within 0.11 s of a 0.3 s outage (the
    WAL write fails and the database stops); pauses of at least 50 + 100 + 200 ms outlast it."""
    bucket = MemoryBucket()
    store = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://outage")
    settings = dict(QUIET, object_store_max_retries=3)
    with slatedb.Db.open("memory://outage", settings, store=store) as db:
        db.put(b"before", b"1", durable=True)
        store.down = True
        threading.Timer(0.3, lambda: setattr(store, "down", False)).start()
        db.put(b"during", b"2", durable=True)  # its WAL object lands once the store is back
        assert db.get(b"during") == b"2"
    again = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://outage")
    with slatedb.Db.open("memory://outage", QUIET, store=again) as db:
        assert db.get(b"before") == b"1" and db.get(b"during") == b"2"
