"""``run_spark_compactor`` (``slatedb.spark.run_compactor``, ``slatedb run-compactor --engine
spark``) honours ``object_store_max_retries`` (found: ignored; the driver and every task retried
ten times whatever the settings said) and, without ``once``, goes on after a store outage past
those retries as the local service does (slatedb/compactor/service.py). No Spark session: a
stand-in runs each one-partition job in the driver, as Spark's ``map(...).collect()`` would."""

from __future__ import annotations

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import InvalidArgumentError
from slatedb.objstore import resolve_store
from slatedb.runtime.production import ProductionRuntime
from slatedb.spark import compaction
from tests.compactor.helpers import WRITER, compactor_settings


class _Rdd:
    def __init__(self, rows) -> None:
        self.rows = list(rows)

    def map(self, fn) -> "_Rdd":
        return _Rdd(fn(r) for r in self.rows)

    def collect(self) -> list:
        return self.rows


class _LocalSpark:
    """Just what ``SparkRanges`` calls: ``sparkContext.setJobGroup``, ``parallelize``."""

    @property
    def sparkContext(self) -> "_LocalSpark":
        return self

    def setJobGroup(self, *args, **kwargs) -> None:
        pass

    def parallelize(self, rows, _n) -> _Rdd:
        return _Rdd(rows)


def _database(url: str) -> None:
    with slatedb.Db.open(url, settings=WRITER) as db:
        for r in range(3):
            db.put(b"k%d" % r, b"v")
            db.flush(wal=False)


def test_the_spark_compactor_honours_object_store_max_retries(tmp_path, monkeypatch) -> None:
    url = f"file://{tmp_path}/db"
    _database(url)
    tasks: list[int | None] = []
    real = compaction.run_io

    def run_io(url, opts, fn, **kw):
        tasks.append(kw.get("max_retries"))
        return real(url, opts, fn, **kw)

    monkeypatch.setattr(compaction, "run_io", run_io)
    rt = ProductionRuntime("compactor")
    c = trio.run(lambda: compaction.run_spark_compactor(_LocalSpark(), url, compactor_settings(object_store_max_retries=3),
                                                        runtime=rt))
    assert c.stats["completed"] == 1
    assert rt.retry_policy.max_retries == 3  # the driver's calls
    assert tasks and set(tasks) == {3}  # each task's
    store = resolve_store(url)
    assert trio.run(admin.read_manifest, store).manifest.l0 == ()
    trio.run(store.aclose)


def test_the_spark_compactor_takes_settings_as_the_local_one_does_and_refuses_a_bad_once(tmp_path) -> None:
    url = f"file://{tmp_path}/db"
    _database(url)
    as_dict = {"object_store_max_retries": 2, "compactor_options": {"scheduler_options": {"min_compaction_sources": "2"}}}
    rt = ProductionRuntime("compactor")
    trio.run(lambda: compaction.run_spark_compactor(_LocalSpark(), url, as_dict, runtime=rt))
    assert rt.retry_policy.max_retries == 2
    with pytest.raises(InvalidArgumentError, match="once"):
        trio.run(lambda: compaction.run_spark_compactor(_LocalSpark(), url, None, once="no"))


def test_the_spark_compactor_service_goes_on_after_an_outage_past_its_retries(monkeypatch) -> None:
    """As ``admin.run_compactor`` (tests/objstore/test_service_retry_pauses.py): the driver's
    store down from the moment it fenced in, up again once a call gave up; then it compacts."""
    from tests.db.helpers import OutageStore
    from tests.objstore.test_service_retry_pauses import Errors

    url = "memory://spark-outage"
    _database(url)
    plain = resolve_store(url)
    store = OutageStore(plain._bucket, ProductionRuntime().now_ms, url=url)
    monkeypatch.setattr(compaction, "resolve_store", lambda *a, **kw: store)
    rt = Errors(store)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: compaction.run_spark_compactor(
                _LocalSpark(), url, compactor_settings(object_store_max_retries=1), once=False, runtime=rt))
            while not rt.errors or (await admin.read_manifest(plain)).manifest.l0:
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert "ObjectStoreRetriesExhaustedError" in rt.errors[0]["error"], rt.errors
    trio.run(plain.aclose)
