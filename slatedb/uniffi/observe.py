"""``DefaultMetricsRecorder`` (and the recorder interfaces), ``init_logging`` and ``LogCallback``.

Metrics: a :class:`DefaultMetricsRecorder` given to ``DbBuilder.with_metrics_recorder`` reports
this engine's counters and histograms under ``slatedb.db.<name>`` (``slatedb.db.puts``,
``slatedb.db.wal_write`` ...; this engine's metric set, docs/metrics.md, not the official's
names), next to whatever the application registered on it. Logging: ``init_logging`` routes the
``slatedb.*`` loggers (standard ``logging``) to a :class:`LogCallback` as ``LogRecord`` values."""

from __future__ import annotations

import bisect
import logging
import threading
from typing import Any

from slatedb.runtime.metrics import COUNTERS, HISTOGRAMS
from slatedb.uniffi.errors import Error, refused
from slatedb.uniffi.values import HistogramMetricValue, LogLevel, LogRecord, Metric, MetricLabel, MetricValue


class Counter:
    def increment(self, value: int) -> None:
        raise NotImplementedError


class Gauge:
    def set(self, value: int) -> None:
        raise NotImplementedError


class UpDownCounter:
    def increment(self, value: int) -> None:
        raise NotImplementedError


class Histogram:
    def record(self, value: float) -> None:
        raise NotImplementedError


class MetricsRecorder:
    """The recorder interface (``register_counter`` ...). Only a :class:`DefaultMetricsRecorder`
    can be given to a builder here."""


class _Instrument(Counter, Gauge, UpDownCounter, Histogram):
    def __init__(self, kind: str, boundaries: list[float] | None = None) -> None:
        self.kind = kind
        self.value: float = 0
        self.boundaries = list(boundaries or [])
        self.buckets = [0] * (len(self.boundaries) + 1)
        self.count = 0
        self.sum = 0.0
        self.min = float("inf")
        self.max = float("-inf")
        self._lock = threading.Lock()

    def increment(self, value: int) -> None:
        if self.kind == "counter" and value < 0:
            raise Error.Invalid("a counter only increases")
        with self._lock:
            self.value += value

    def set(self, value: int) -> None:
        with self._lock:
            self.value = value

    def record(self, value: float) -> None:
        with self._lock:
            self.buckets[bisect.bisect_left(self.boundaries, value)] += 1
            self.count += 1
            self.sum += value
            self.min = min(self.min, value)
            self.max = max(self.max, value)

    def metric_value(self) -> Any:
        if self.kind == "histogram":
            return MetricValue.HISTOGRAM(HistogramMetricValue(
                count=self.count, sum=self.sum, min=self.min if self.count else 0.0,
                max=self.max if self.count else 0.0, boundaries=list(self.boundaries), bucket_counts=list(self.buckets)))
        return {"counter": MetricValue.COUNTER, "gauge": MetricValue.GAUGE,
                "up_down_counter": MetricValue.UP_DOWN_COUNTER}[self.kind](int(self.value))


def _labels(labels: Any) -> tuple:
    out = []
    for label in labels or []:
        if not isinstance(label, MetricLabel):
            raise Error.Invalid(f"labels must be MetricLabel values, not {type(label).__name__}")
        out.append((label.key, label.value))
    return tuple(sorted(out))


class DefaultMetricsRecorder(MetricsRecorder):
    """An in-memory recorder: register instruments, read them back with :meth:`snapshot`."""

    def __init__(self) -> None:
        self._own: dict[tuple, tuple[str, _Instrument]] = {}
        self._engines: list[Any] = []
        self._lock = threading.Lock()

    def _register(self, kind: str, name: str, description: str | None, labels: Any,
                  boundaries: list[float] | None = None) -> _Instrument:
        key = (name, _labels(labels))
        with self._lock:
            got = self._own.get(key)
            if got is None:
                got = (description or "", _Instrument(kind, boundaries))
                self._own[key] = got
            return got[1]

    def register_counter(self, name: str, description: str | None, labels: list) -> Counter:
        return self._register("counter", name, description, labels)

    def register_gauge(self, name: str, description: str | None, labels: list) -> Gauge:
        return self._register("gauge", name, description, labels)

    def register_up_down_counter(self, name: str, description: str | None, labels: list) -> UpDownCounter:
        return self._register("up_down_counter", name, description, labels)

    def register_histogram(self, name: str, description: str | None, labels: list,
                           boundaries: list[float]) -> Histogram:
        return self._register("histogram", name, description, labels, sorted(boundaries))

    def bind(self, db: Any) -> None:
        """Report the engine of ``db`` (one of our aio ``Db`` / ``DbReader``) too."""
        with self._lock:
            self._engines.append(db)

    def snapshot(self) -> list[Metric]:
        out = [Metric(name=name, labels=[MetricLabel(key=k, value=v) for k, v in labels], description=desc,
                      value=inst.metric_value())
               for (name, labels), (desc, inst) in list(self._own.items())]
        for db in list(self._engines):
            values = db.core.metrics() if hasattr(db.core, "metrics") else {}
            for name, value in values.items():
                full = f"slatedb.db.{name}"
                if isinstance(value, dict):
                    bounds = [b for b in value["buckets"] if b != float("inf")]
                    mv = MetricValue.HISTOGRAM(HistogramMetricValue(
                        count=value["count"], sum=value["sum"], min=0.0, max=0.0, boundaries=bounds,
                        bucket_counts=list(value["buckets"].values())))
                    desc = HISTOGRAMS.get(name, ("",))[0]
                else:
                    mv = MetricValue.COUNTER(int(value))
                    desc = COUNTERS.get(name, "")
                out.append(Metric(name=full, labels=[], description=desc, value=mv))
        return out

    def metrics_by_name(self, name: str) -> list[Metric]:
        return [m for m in self.snapshot() if m.name == name]

    def metric_by_name_and_labels(self, name: str, labels: list) -> Metric | None:
        want = _labels(labels)
        for m in self.metrics_by_name(name):
            if _labels(m.labels) == want:
                return m
        return None


def attach_recorder(recorder: Any) -> DefaultMetricsRecorder:
    if not isinstance(recorder, DefaultMetricsRecorder):
        raise refused(f"a custom MetricsRecorder ({type(recorder).__name__})", "use DefaultMetricsRecorder")
    return recorder


class LogCallback:
    """Implement ``log(record: LogRecord)`` to receive log records (``init_logging``)."""

    def log(self, record: LogRecord) -> None:
        raise NotImplementedError


_LEVELS = {LogLevel.OFF: logging.CRITICAL + 10, LogLevel.ERROR: logging.ERROR, LogLevel.WARN: logging.WARNING,
           LogLevel.INFO: logging.INFO, LogLevel.DEBUG: logging.DEBUG, LogLevel.TRACE: 5}


def _level_of(levelno: int) -> Any:
    if levelno >= logging.ERROR:
        return LogLevel.ERROR
    if levelno >= logging.WARNING:
        return LogLevel.WARN
    if levelno >= logging.INFO:
        return LogLevel.INFO
    if levelno >= logging.DEBUG:
        return LogLevel.DEBUG
    return LogLevel.TRACE


class _CallbackHandler(logging.Handler):
    def __init__(self, callback: LogCallback) -> None:
        super().__init__()
        self._cb = callback

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._cb.log(LogRecord(level=_level_of(record.levelno), target=record.name, message=record.getMessage(),
                                   module_path=record.module, file=record.pathname, line=record.lineno))
        except Exception:  # noqa: BLE001 - a failing callback must not break the engine
            self.handleError(record)
        except BaseException as e:
            # SystemExit, GeneratorExit, or a KeyboardInterrupt the callback raised itself: on the
            # runtime thread it ended the engine's trio run ("the database was aborted"). Reported
            # as any failing handler; a Ctrl-C on the main thread still interrupts (as MERGE-7).
            if isinstance(e, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                raise
            self.handleError(record)


_initialized = False
_init_lock = threading.Lock()


def init_logging(level: Any, callback: LogCallback | None) -> None:
    """Route the ``slatedb`` loggers at ``level`` and above to ``callback`` (or to standard
    error); once per process (again: ``Error.Invalid``)."""
    global _initialized
    if not isinstance(level, LogLevel):
        raise TypeError(f"level must be a LogLevel, not {type(level).__name__}")
    if callback is not None and not isinstance(callback, LogCallback):
        raise TypeError(f"callback must subclass LogCallback, not {type(callback).__name__}")
    with _init_lock:
        if _initialized:
            raise Error.Invalid("logging already initialized")
        _initialized = True
    log = logging.getLogger("slatedb")
    log.setLevel(_LEVELS[level])
    handler: logging.Handler = _CallbackHandler(callback) if callback is not None else logging.StreamHandler()
    log.addHandler(handler)
    log.propagate = False
