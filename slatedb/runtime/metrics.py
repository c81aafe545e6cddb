"""Metrics and logging of a production engine (issue 22 item 5).

:class:`Metrics` is the registry one :class:`~slatedb.runtime.production.ProductionRuntime`
carries (one per opened ``Db`` / ``DbReader`` unless a runtime is shared): counters and
histograms updated by the engine where things happen (puts, gets, WAL writes, L0 flushes,
compactions, GC deletes, object-store retries). Read it as a dict (:meth:`Metrics.as_dict`) or in
the Prometheus text format (:meth:`Metrics.prometheus_text`, built by ``prometheus_client``;
:meth:`Metrics.collector` registers it into your own ``CollectorRegistry``).

:func:`log_event` turns the runtime's protocol events into one ``logging`` line each under
``slatedb.*`` loggers: ``slatedb.flush`` (L0 flushes), ``slatedb.wal`` (WAL writes, DEBUG),
``slatedb.compactor``, ``slatedb.gc``, ``slatedb.writer`` (epochs, fencing, close),
``slatedb.reader``, ``slatedb.objstore`` (retries exhausted), ``slatedb.manifest`` (commits,
DEBUG). The simulator's runtime records events in its trace instead and has no metrics.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import re
import threading
from typing import Any, Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from slatedb.errors import InvalidArgumentError
from slatedb.redact import redact_text

#: name -> description (``slatedb_<name>_total`` in Prometheus).
COUNTERS = {
    "puts": "rows written (puts, deletes and batch operations)",
    "gets": "point reads (get, get_key_value)",
    "wal_writes": "WAL SSTs written",
    "wal_rows": "rows written to WAL SSTs",
    "l0_flushes": "memtables flushed to L0 SSTs",
    "l0_flush_bytes": "bytes of L0 SSTs written",
    "compactions": "compactions committed",
    "compaction_bytes": "bytes of compaction outputs (data, filters and indexes)",
    "gc_deletes": "objects deleted by GC",
    "gc_passes": "GC passes",
    "retries": "object-store requests retried",
    "retries_exhausted": "object-store requests that failed after every retry",
}
#: name -> (description, bucket upper bounds in seconds) (``slatedb_<name>_seconds``).
HISTOGRAMS = {
    "wal_write": ("WAL SST write latency", (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)),
    "l0_flush": ("L0 flush latency (SST upload and manifest commit)",
                 (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)),
}


class Histogram:
    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1


class Metrics:
    """Counters and histograms of one engine (see the module docstring). ``inc`` and
    ``observe`` may be called from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, float] = dict.fromkeys(COUNTERS, 0)
        self.histograms = {name: Histogram(bounds) for name, (_d, bounds) in HISTOGRAMS.items()}
        #: counters the engine computes when read (``puts``: from sequence numbers, so the
        #: write path pays nothing for it)
        self.derived: dict[str, Any] = {}
        # ``gets`` is counted on the read path's hot path: one ``next`` of an itertools.count
        # (a single C call, atomic under the GIL) instead of a lock and a dict update.
        gets = itertools.count()
        #: Count one point read (any thread).
        self.count_get = gets.__next__
        self.derived["gets"] = lambda: int(repr(gets)[len("count("):-1])

    def inc(self, name: str, n: float = 1) -> None:
        with self._lock:
            self.counters[name] += n

    def observe(self, name: str, seconds: float) -> None:
        with self._lock:
            self.histograms[name].observe(seconds)

    def as_dict(self) -> dict[str, Any]:
        """``{counter: value, histogram: {"count", "sum", "buckets": {upper bound: count}}}``
        (bucket counts per bucket, not cumulative; ``inf`` holds the rest)."""
        with self._lock:
            out: dict[str, Any] = dict(self.counters)
            for name, fn in self.derived.items():
                out[name] = fn()
            for name, h in self.histograms.items():
                bounds = [*h.bounds, float("inf")]
                out[name] = {"count": h.count, "sum": h.sum, "buckets": dict(zip(bounds, h.counts))}
            return out

    def collector(self, labels: Mapping[str, str] | None = None) -> "_Collector":
        """A ``prometheus_client`` collector of these metrics (``registry.register(...)``),
        every sample carrying ``labels``. Label names are checked here. Several databases in
        one registry: :func:`collector_of` (one collector, a sample per database: a registry
        refuses two collectors of the same metric names, whatever their labels)."""
        return _Collector([(check_labels(labels or {}), self)])

    def prometheus_text(self) -> str:
        """These metrics in the Prometheus text exposition format."""
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.collector())
        return generate_latest(registry).decode()


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Prometheus label names and values for a collector, or :class:`InvalidArgumentError`
    naming the bad one (names as Prometheus allows, not reserved; values strings)."""
    if not isinstance(labels, Mapping):
        raise InvalidArgumentError(f"metric labels must be a mapping of names to strings, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for name, value in labels.items():
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name) or name.startswith("__") or name == "le":
            raise InvalidArgumentError(f"metric label name {name!r} is not a Prometheus label name "
                                       "([a-zA-Z_][a-zA-Z0-9_]*, not starting with __, not 'le')")
        if not isinstance(value, str):
            raise InvalidArgumentError(f"metric label {name}={value!r} must be a string")
        out[name] = value
    return out


def collector_of(named: Mapping[str, "Metrics"], label: str = "db") -> "_Collector":
    """One ``prometheus_client`` collector of several databases' metrics: each metric one
    family, a sample per database labelled ``label=<its name>``."""
    check_labels({label: ""})
    if not isinstance(named, Mapping) or not named:
        raise InvalidArgumentError("metrics of several databases: give a non-empty mapping of names to databases")
    for name in named:
        check_labels({label: name})
    return _Collector([({label: name}, m) for name, m in named.items()])


class _Collector:
    """Every metric as one family, with a sample per (labels, metrics) pair (the same label
    names in each)."""

    def __init__(self, sources: list[tuple[dict[str, str], Metrics]]) -> None:
        self._sources = sources
        self._names = list(sources[0][0]) if sources else []

    def describe(self) -> Iterator[Any]:
        """The families without samples: what any registry (not only one made with
        ``auto_describe=True``, as ``prometheus_client.REGISTRY`` is) reads at ``register`` to
        refuse a second collector of the same metric names, whose families would otherwise be
        exported twice (two ``# HELP`` lines per name, a scrape Prometheus rejects)."""
        names = self._names
        for name, desc in COUNTERS.items():
            yield CounterMetricFamily(f"slatedb_{name}", desc, labels=names)
        for name, (desc, _bounds) in HISTOGRAMS.items():
            yield HistogramMetricFamily(f"slatedb_{name}_seconds", desc, labels=names)

    def collect(self) -> Iterator[Any]:
        names = self._names
        snaps = [(list(labels.values()), m.as_dict()) for labels, m in self._sources]
        for name, desc in COUNTERS.items():
            counter = CounterMetricFamily(f"slatedb_{name}", desc, labels=names)
            for values, snap in snaps:
                counter.add_metric(values, snap[name])
            yield counter
        for name, (desc, bounds) in HISTOGRAMS.items():
            histogram = HistogramMetricFamily(f"slatedb_{name}_seconds", desc, labels=names)
            for values, snap in snaps:
                h = snap[name]
                cumulative, buckets = 0, []
                for bound, n in h["buckets"].items():
                    cumulative += n
                    buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
                histogram.add_metric(values, buckets, h["sum"])
            yield histogram


# ----------------------------------------------------------------------------------------------
# Logging and event counters
# ----------------------------------------------------------------------------------------------

_INFO, _DEBUG, _WARNING, _ERROR = logging.INFO, logging.DEBUG, logging.WARNING, logging.ERROR

#: event kind -> (logger, level, metric counter or None)
_EVENTS: dict[str, tuple[str, int, str | None]] = {
    "ack": ("slatedb.wal", _DEBUG, None),
    "writer_epoch": ("slatedb.writer", _INFO, None),
    "fence_written": ("slatedb.writer", _INFO, None),
    "halt": ("slatedb.writer", _WARNING, None),
    "closed": ("slatedb.writer", _INFO, None),
    "replay": ("slatedb.writer", _DEBUG, None),
    "checkpoint_create": ("slatedb.writer", _INFO, None),
    "compaction_commit": ("slatedb.compactor", _INFO, None),
    "compaction_invalid": ("slatedb.compactor", _WARNING, None),
    "compactor_started": ("slatedb.compactor", _INFO, None),
    "compactor_fenced": ("slatedb.compactor", _WARNING, None),
    "compactor_error": ("slatedb.compactor", _ERROR, None),
    # a job that could not run (a failing merge operator, a missing input): released, retried
    "compaction_worker_failed": ("slatedb.compactor", _ERROR, None),
    # the same job failing the same way again (a merge operator still raising): retried after a backoff
    "compaction_worker_failed_again": ("slatedb.compactor", _DEBUG, None),
    "gc_pass": ("slatedb.gc", _INFO, "gc_passes"),
    "gc_delete": ("slatedb.gc", _DEBUG, "gc_deletes"),
    "gc_error": ("slatedb.gc", _ERROR, None),
    "retry": ("slatedb.objstore", _DEBUG, "retries"),
    "retry_exhausted": ("slatedb.objstore", _ERROR, "retries_exhausted"),
    "reader_error": ("slatedb.reader", _ERROR, None),
    "reader_checkpoint": ("slatedb.reader", _INFO, None),
    "reader_checkpoint_lost": ("slatedb.reader", _WARNING, None),
    "panic": ("slatedb.writer", _ERROR, None),
}
_COMMIT_INFO = {"add_l0": "slatedb.flush", "apply_compaction": "slatedb.compactor"}


def log_event(metrics: Metrics | None, kind: str, fields: dict[str, Any]) -> None:
    """One log line (and a counter) for a runtime event of a production engine."""
    spec = _EVENTS.get(kind)
    if spec is None:
        if kind == "commit":
            name = _COMMIT_INFO.get(str(fields.get("edit")))
            logger, level = (name, _INFO) if name else ("slatedb.manifest", _DEBUG)
        else:
            logger, level = "slatedb.events", _DEBUG
        counter = None
    else:
        logger, level, counter = spec
    if metrics is not None and counter is not None:
        metrics.inc(counter)
    log = logging.getLogger(logger)
    if log.isEnabledFor(level):
        log.log(level, "%s %s", kind, redact_text(" ".join(f"{k}={v}" for k, v in fields.items())))
