"""The long-running services (``slatedb run-compactor``, ``slatedb run-gc``; ``slatedb.admin.
run_compactor`` and ``run_gc``) pause between retries as an open ``Db`` does once they have
opened: 100 ms doubling to 15 s (``RetryPolicy.open_backoff_s``), about a minute of outage
ridden out by the default 10 retries. Their open keeps the short pauses (10 ms doubling to 2 s: a
wrong endpoint fails within seconds), and so does one pass of GC (``once``: a scheduled job the
next run redoes). Before: both services kept the short pauses for as long as they ran, so a
7-second outage exhausted a call's retries; a compactor's failing tick stopped the service."""

from __future__ import annotations

import threading

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import ObjectStoreRetriesExhaustedError
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime
from tests.compactor.helpers import WRITER, compactor_settings
from tests.db.helpers import OutageStore

SHORT = (0.01, 2.0)
LONG = (0.1, 15.0)


def _backoff(rt: ProductionRuntime) -> tuple[float, float]:
    return rt.retry_policy.backoff_min_s, rt.retry_policy.backoff_max_s


def _database(n_l0: int = 3) -> MemoryBucket:
    bucket = MemoryBucket()
    store = MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://svc")
    with slatedb.Db.open("memory://svc", settings=WRITER, store=store) as db:
        for r in range(n_l0):
            for i in range(50):
                db.put(b"k%03d" % i, b"v%d" % r)
            db.flush()
    return bucket


def _l0_count(bucket: MemoryBucket) -> int:
    from tests.compactor.helpers import latest_manifest

    return len(latest_manifest(MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://svc"))[1].l0)


class Started(ProductionRuntime):
    """Production pauses; calls ``at_start`` when the compactor has fenced in (its
    ``compactor_started`` event), and keeps the policy its fencing ran under."""

    def __init__(self, at_start=lambda: None) -> None:
        super().__init__("compactor")
        self.at_start = at_start
        self.policy_at_start: tuple[float, float] | None = None

    def event(self, kind: str, **fields) -> None:
        if kind == "compactor_started":
            self.policy_at_start = _backoff(self)
            self.at_start()


@pytest.mark.parametrize("once", [True, False])
def test_a_compactor_fences_in_with_the_short_pauses_and_runs_with_the_long_ones(once) -> None:
    bucket = _database()
    store = MemoryStore(bucket, ProductionRuntime().now_ms, url="memory://svc")
    rt = Started()

    async def main() -> None:
        if once:
            await admin.run_compactor(store, compactor_settings(), once=True, runtime=rt)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: admin.run_compactor(store, compactor_settings(), runtime=rt))
            while _l0_count(bucket):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert rt.policy_at_start == SHORT and _backoff(rt) == LONG and rt.retry_policy.max_retries == 10
    assert _l0_count(bucket) == 0


def test_a_compactor_whose_store_is_down_from_the_start_gives_up_with_the_short_pauses() -> None:
    """The open is not slowed down: a store that never answers fails the start within seconds."""
    store = OutageStore(_database(), ProductionRuntime().now_ms, url="memory://svc")
    store.down = True
    rt = ProductionRuntime("compactor")
    with pytest.raises(ObjectStoreRetriesExhaustedError):
        trio.run(lambda: admin.run_compactor(store, compactor_settings(object_store_max_retries=3), runtime=rt))
    assert _backoff(rt) == SHORT


def test_a_compactor_service_rides_out_an_outage_its_retries_span() -> None:
    """Three retries: 10-15-30-60 ms pauses give up within 0.11 s of a 0.3 s outage (the tick's
    read raises and the service stops); pauses of at least 50 + 100 + 200 ms outlast it."""
    bucket = _database()
    store = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://svc")

    def outage() -> None:
        store.down = True
        threading.Timer(0.3, lambda: setattr(store, "down", False)).start()

    rt = Started(at_start=outage)  # down from the moment it has fenced in

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: admin.run_compactor(store, compactor_settings(object_store_max_retries=3),
                                                           runtime=rt))
            while store.down or _l0_count(bucket):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert _l0_count(bucket) == 0


class Errors(Started):
    """Keeps the ``compactor_error`` events; puts the store back up at the first one."""

    def __init__(self, store: OutageStore) -> None:
        super().__init__(at_start=lambda: setattr(store, "down", True))
        self.store = store
        self.errors: list[dict] = []

    def event(self, kind: str, **fields) -> None:
        super().event(kind, **fields)
        if kind == "compactor_error":
            self.errors.append(fields)
            self.store.down = False


def test_a_compactor_service_goes_on_after_an_outage_past_its_retries() -> None:
    """Found: one call that exhausted its retries (an outage longer than they span) stopped
    ``run-compactor`` for good, and a writer without a compactor of its own then waited forever
    once L0 was full. Now the service logs it, waits and goes on."""
    bucket = _database()
    store = OutageStore(bucket, ProductionRuntime().now_ms, url="memory://svc")
    rt = Errors(store)  # down from the moment it has fenced in, up again once it gave up a call

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: admin.run_compactor(store, compactor_settings(object_store_max_retries=1),
                                                           runtime=rt))
            while not rt.errors or _l0_count(bucket):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert _l0_count(bucket) == 0
    assert "ObjectStoreRetriesExhaustedError" in rt.errors[0]["error"], rt.errors
    assert "compacting again" in rt.errors[0]["going_on"]


def test_a_gc_service_runs_with_the_long_pauses_and_one_pass_with_the_short_ones() -> None:
    store = MemoryStore(_database(), ProductionRuntime().now_ms, url="memory://svc")
    one_pass = ProductionRuntime("gc")
    trio.run(lambda: admin.run_gc(store, once=True, runtime=one_pass))
    assert _backoff(one_pass) == SHORT

    service = ProductionRuntime("gc")

    async def main() -> None:
        with trio.move_on_after(0.05):
            await admin.run_gc(store, runtime=service)

    trio.run(main)
    assert _backoff(service) == LONG and service.retry_policy.max_retries == 10
