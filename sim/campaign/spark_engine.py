"""The Spark engine of ``sim sweep --engine spark``: each seed is a Spark task.

Every task calls the very :func:`sim.campaign.sweep.run_seed` the local engine calls, so a seed's verdict
and trace digest do not depend on the engine (``tests/test_sim_spark.py`` checks it seed by
seed). The rows become a DataFrame, written as a Parquet table (one row per seed; the columns of
:data:`sim.campaign.sweep.ROW_FIELDS`), and come back to the driver for the same summary table as the local
engine.

The session runs in local mode (``local[*]``) unless ``--master`` names another master. It keeps
to this machine's rules: driver bound to 127.0.0.1, no web UI, log level ERROR, and the Python
workers run this interpreter (``PYSPARK_PYTHON``, unless already set). pyspark is imported
lazily: the local engine never needs it, and a missing pyspark or Java is one clear error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any, Iterable, Iterator

from slatedb.runtime.production import ProductionRuntime

from sim.campaign.sweep import Progress, Scenario, SweepReport, _write_row, run_seed

_WALL = ProductionRuntime("sim-spark")

#: Seeds per Spark partition stay at one (fine-grained balancing: seeds differ 40x in cost) up to
#: this many partitions; past it seeds are grouped.
MAX_PARTITIONS = 4096

DEFAULT_MASTER = "local[*]"

#: Spark's log4j2 configuration for sweeps: errors only, to stderr (Spark's own default is WARN
#: plus a banner, which would drown the progress bar).
LOG4J2 = """\
rootLogger.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


class SparkUnavailable(RuntimeError):
    """pyspark or Java is missing; the message says how to get them."""


def _check_available() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable("the spark engine needs pyspark: install the project's spark extra "
                               "(pip install -e '.[spark]'; ./just sets it up), or use --engine local") from None
    java_home = os.environ.get("JAVA_HOME")
    if not (shutil.which("java") or (java_home and os.path.exists(os.path.join(java_home, "bin", "java")))):
        raise SparkUnavailable("the spark engine needs Java 17 or newer (java on PATH or JAVA_HOME): "
                               "e.g. apt-get install -y openjdk-17-jre-headless, or use --engine local")


def schema() -> Any:
    """The Parquet table's schema: one row per seed."""
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("seed", T.LongType(), False),
        T.StructField("workload", T.StringType(), False),
        T.StructField("ok", T.BooleanType(), False),
        T.StructField("digest", T.StringType(), False),
        T.StructField("events", T.LongType(), False),
        T.StructField("virtual_s", T.DoubleType(), False),
        T.StructField("faults", T.MapType(T.StringType(), T.LongType()), False),
        T.StructField("violations", T.ArrayType(T.StringType()), False),
        T.StructField("invariants", T.ArrayType(T.StringType()), False),
        T.StructField("wall_s", T.DoubleType(), False),
        T.StructField("replay", T.StringType(), False),
        T.StructField("probes", T.MapType(T.StringType(), T.LongType()), False),  # coverage probe -> hits
    ])


@contextlib.contextmanager
def spark_session(master: str = DEFAULT_MASTER, *, app_name: str = "sim-sweep") -> Iterator[Any]:
    """A Spark session for sweeps, stopped on exit (its JVM too)."""
    _check_available()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from pyspark import SparkContext

    owns_jvm = SparkContext._gateway is None
    conf_dir = tempfile.mkdtemp(prefix="sim-spark-")
    try:
        log4j = os.path.join(conf_dir, "log4j2.properties")
        with open(log4j, "w") as f:
            f.write(LOG4J2)
        builder = (SparkSession.builder.master(master).appName(app_name)
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
                   .config("spark.pyspark.driver.python", os.environ["PYSPARK_DRIVER_PYTHON"])
                   .config("spark.python.worker.reuse", "true")
                   .config("spark.sql.session.timeZone", "UTC")
                   .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
                   .config("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}"))
        spark = builder.getOrCreate()
        try:
            spark.sparkContext.setLogLevel("ERROR")
            yield spark
        finally:
            spark.stop()
            if owns_jvm:
                _stop_jvm()
    finally:
        shutil.rmtree(conf_dir, ignore_errors=True)


def _stop_jvm() -> None:
    """Stop the JVM this process launched for Spark (``spark.stop()`` leaves it running until
    Python exits); by its own process handle, nothing else."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _poll_progress(sc: Any, done: Any, failed: Any, bar: Progress, stop: threading.Event) -> None:
    """Redraw the bar from the accumulators, which the driver merges as each task finishes."""
    while not stop.wait(0.25):
        bar.update(min(done.value, bar.total), failed.value)


def sweep_on(spark: Any, scenario: Scenario, seeds: Iterable[int], *, parquet: str | None = "sim-results.parquet",
             out: IO[str] | None = None, progress: bool = True) -> SweepReport:
    """Run ``seeds`` as Spark tasks on an existing session; write the Parquet table (unless
    ``parquet`` is None) and return the rows in seed order."""
    seeds = list(seeds)
    sc = spark.sparkContext
    done, failed = sc.accumulator(0), sc.accumulator(0)

    def task(seed: int) -> tuple:
        row = run_seed(scenario, seed)
        done.add(1)
        if not row["ok"]:
            failed.add(1)
        return (row["seed"], row["workload"], row["ok"], row["digest"], row["events"], row["virtual_s"],
                row["faults"], row["violations"], row["invariants"], row["wall_s"], row["replay"], row["probes"])

    bar = Progress(len(seeds), label="spark", enabled=progress)
    stop = threading.Event()
    poller = threading.Thread(target=_poll_progress, args=(sc, done, failed, bar, stop), daemon=True)
    start = _WALL.monotonic_s()
    poller.start()
    try:
        rdd = sc.parallelize(seeds, min(len(seeds), MAX_PARTITIONS)).map(task)
        df = spark.createDataFrame(rdd, schema()).persist()
        if parquet:
            df.write.mode("overwrite").parquet(parquet)
        collected = df.collect()
        df.unpersist()
    finally:
        stop.set()
        poller.join()
    wall = _WALL.monotonic_s() - start
    bar.update(len(collected), sum(1 for r in collected if not r["ok"]))
    bar.close()
    rows = sorted((_plain(r.asDict(recursive=True)) for r in collected), key=lambda r: r["seed"])
    for row in rows:
        _write_row(out, row)
    return SweepReport(rows, wall, sc.defaultParallelism, "spark")


def _plain(row: dict) -> dict:
    row["faults"] = dict(sorted((row["faults"] or {}).items()))
    row["violations"] = list(row["violations"] or [])
    row["invariants"] = list(row["invariants"] or [])
    row["probes"] = dict(sorted((row.get("probes") or {}).items()))
    return row


def sweep_spark(scenario: Scenario, seeds: Iterable[int], *, master: str = DEFAULT_MASTER,
                parquet: str | None = "sim-results.parquet", out: IO[str] | None = None,
                progress: bool = True, ledger_parquet: str | None = None, ledger_kind: str = "sweep") -> SweepReport:
    """Start a session on ``master``, sweep, stop it. Session start-up is reported apart. With
    ``ledger_parquet``, the campaign's summary row is appended to that Parquet ledger
    (:mod:`sim.campaign.ledger`) through the same session."""
    start = _WALL.monotonic_s()
    with spark_session(master) as spark:
        started = _WALL.monotonic_s() - start
        report = sweep_on(spark, scenario, seeds, parquet=parquet, out=out, progress=progress)
        if ledger_parquet:
            from sim.campaign import ledger
            ledger.append_parquet(spark, ledger_parquet, ledger.from_report(report, scenario, ledger_kind))
    return SweepReport(report.rows, report.wall_s, report.cores, report.engine, startup_s=started)
