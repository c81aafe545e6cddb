"""Issue 22 item 5: a metrics registry readable as a dict and in the Prometheus text format
(prometheus_client), and one ``slatedb.*`` log line per background event worth knowing."""

from __future__ import annotations

import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

import slatedb
from slatedb.runtime.metrics import Metrics
from slatedb.runtime.production import ProductionRuntime

S = {"flush_interval": "1h", "compactor_options": None, "garbage_collector_options": None}


def test_counters_and_histograms_follow_what_the_database_did(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        for i in range(50):
            db.put(b"k%02d" % i, b"v")
        batch = slatedb.WriteBatch()
        batch.put(b"a", b"1")
        batch.delete(b"b")
        db.write(batch)
        for i in range(7):
            db.get(b"k%02d" % i)
        db.get_key_value(b"a")
        db.flush()
        db.flush(wal=False)
        m = db.metrics()
        assert m["puts"] == 52 and m["gets"] == 8
        assert m["wal_writes"] == 1 and m["wal_rows"] == 52
        assert m["l0_flushes"] == 1 and m["l0_flush_bytes"] > 52 * 3
        assert m["wal_write"]["count"] == 1 and m["l0_flush"]["count"] == 1
        assert sum(m["l0_flush"]["buckets"].values()) == 1 and m["l0_flush"]["sum"] > 0
        text = db.metrics_prometheus()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["slatedb_puts"].samples[0].value == 52
    assert families["slatedb_gets"].samples[0].value == 8
    hist = families["slatedb_l0_flush_seconds"]
    assert hist.type == "histogram"
    count = [s.value for s in hist.samples if s.name.endswith("_count")]
    inf = [s.value for s in hist.samples if s.labels.get("le") == "+Inf"]
    assert count == [1.0] and inf == [1.0]


def test_durations_are_differences_of_the_runtime_monotonic_clock(tmp_path) -> None:
    """``wal_write`` and ``l0_flush`` observe how long the write took on the runtime's
    monotonic clock: with a clock that never moves every duration is 0, never the clock's
    reading itself."""

    class Frozen(ProductionRuntime):
        def monotonic_s(self) -> float:
            return 5000.0

    with slatedb.Db.open(f"file://{tmp_path}", S, runtime=Frozen()) as db:
        db.put(b"k", b"v")
        db.flush()
        db.flush(wal=False)
        m = db.metrics()
    assert m["wal_write"]["count"] >= 1 and m["l0_flush"]["count"] == 1
    assert m["wal_write"]["sum"] == 0 and m["l0_flush"]["sum"] == 0


def test_a_reopened_database_counts_from_zero(tmp_path) -> None:
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        db.put(b"k", b"v")
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        assert db.metrics()["puts"] == 0
        db.put(b"k2", b"v")
        assert db.metrics()["puts"] == 1


def test_histogram_buckets_and_the_collector() -> None:
    m = Metrics()
    for s in (0.0005, 0.003, 0.003, 100.0):
        m.observe("wal_write", s)
    m.inc("retries", 2)
    d = m.as_dict()
    assert d["wal_write"]["buckets"][0.001] == 1 and d["wal_write"]["buckets"][0.005] == 2
    assert d["wal_write"]["buckets"][float("inf")] == 1 and d["retries"] == 2
    text = m.prometheus_text()
    assert 'slatedb_wal_write_seconds_bucket{le="0.005"} 3.0' in text
    assert "slatedb_retries_total 2.0" in text


def test_background_events_are_logged_under_slatedb_loggers(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="slatedb")
    with slatedb.Db.open(f"file://{tmp_path}", S) as db:
        db.put(b"k", b"v")
        db.flush(wal=False)
    old = slatedb.Db.open(f"file://{tmp_path}", S)
    new = slatedb.Db.open(f"file://{tmp_path}", S)
    old.put(b"x", b"y")
    try:
        old.flush()
    except slatedb.FencedError:
        pass
    old.close()
    new.close()
    by_logger = {}
    for r in caplog.records:
        by_logger.setdefault(r.name, []).append(r.getMessage())
    assert any(m.startswith("commit ") and "edit=add_l0" in m for m in by_logger["slatedb.flush"])
    writer = by_logger["slatedb.writer"]
    assert any(m.startswith("writer_epoch epoch=2") for m in writer)
    assert any(m.startswith("halt ") for m in writer)  # the fenced writer says so, at WARNING
    assert any(r.levelno == logging.WARNING and r.name == "slatedb.writer" for r in caplog.records)
    assert "slatedb.wal" not in by_logger  # WAL writes are DEBUG


def test_several_databases_export_through_one_registry_with_labels() -> None:
    """A service exporting two databases' metrics through its Prometheus registry: found that
    the only collector (``Metrics.collector()``, not reachable from a ``Db``) had no labels, and a
    registry refuses two collectors of the same metric names whatever their labels. Now
    ``slatedb.metrics_collector({name: db, ...})`` is one collector with a sample per database
    (sync and async front-ends), and ``db.metrics_collector(**labels)`` one database's."""
    import asyncio

    from prometheus_client import CollectorRegistry, generate_latest

    import slatedb.aio as aio

    registry = CollectorRegistry(auto_describe=True)  # as prometheus_client.REGISTRY
    a = slatedb.Db.open("memory://metrics-labels-a")
    try:
        async def open_b():
            return await aio.Db.open("memory://metrics-labels-b")

        b = asyncio.run(open_b())
        a.put(b"k", b"v", durable=True)
        registry.register(slatedb.metrics_collector({"orders": a, "users": b}))
        text = generate_latest(registry).decode()
        assert 'slatedb_puts_total{db="orders"} 1.0' in text and 'slatedb_puts_total{db="users"} 0.0' in text
        assert 'slatedb_wal_write_seconds_count{db="orders"} 1.0' in text
        assert 'slatedb_wal_write_seconds_bucket{db="users",le="+Inf"} 0.0' in text
        assert text.count("# TYPE slatedb_puts_total counter") == 1  # one family, a sample per database
        one = CollectorRegistry(auto_describe=True)
        one.register(a.metrics_collector(db="orders", tier="hot"))
        assert 'slatedb_puts_total{db="orders",tier="hot"} 1.0' in generate_latest(one).decode()
        for bad in ({"1x": "a"}, {"__db": "a"}, {"le": "a"}, {"db": 3}):
            with pytest.raises(slatedb.InvalidArgumentError, match="metric label"):
                a.metrics_collector(**bad)
        for bad_call in (lambda: slatedb.metrics_collector({}), lambda: slatedb.metrics_collector({"x": object()}),
                         lambda: slatedb.metrics_collector({"a": a}, label="le")):
            with pytest.raises(slatedb.InvalidArgumentError):
                bad_call()
        asyncio.run(b.close())
    finally:
        a.close()


def test_a_plain_registry_refuses_a_second_collector_of_the_same_names() -> None:
    """A service registered ``db.metrics_collector(db="one")`` and ``db2.metrics_collector(db="two")``
    in its own ``prometheus_client.CollectorRegistry()`` (no ``auto_describe``, the constructor's
    default): found that both were accepted and every family was exported twice (two ``# HELP``
    and ``# TYPE`` lines per metric name, an exposition Prometheus rejects), since the collector
    had no ``describe()``. Now it describes its families, so every registry refuses the second
    collector at ``register``, as ``prometheus_client.REGISTRY`` did; the docs' way to export
    several databases is one ``slatedb.metrics_collector({name: db})``."""
    from prometheus_client import CollectorRegistry, generate_latest

    with slatedb.Db.open("memory://metrics-plain-a") as a, slatedb.Db.open("memory://metrics-plain-b") as b:
        registry = CollectorRegistry()
        registry.register(a.metrics_collector(db="one"))
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            registry.register(b.metrics_collector(db="two"))
        text = generate_latest(registry).decode()
        assert text.count("# HELP slatedb_puts_total ") == 1 and 'slatedb_puts_total{db="one"} 0.0' in text
        both = CollectorRegistry()
        both.register(slatedb.metrics_collector({"one": a, "two": b}))
        with pytest.raises(ValueError, match="Duplicated timeseries"):
            both.register(a.metrics_collector())
