"""Distributed compaction on Spark: the driver is the coordinator and the worker that holds
each job's claim; every subcompaction range is a Spark task (docs/spark.md "Distributed
compaction", spec/protocols/compaction.md W1-W6).

* The driver runs :class:`slatedb.compactor.Compactor` (coordinator: epoch, validation,
  reclaim, commit) whose local worker claims Scheduled jobs, plans their ranges and records
  progress; :class:`SparkRanges` runs each range as a one-partition Spark job, all ranges of a
  job at once (Spark runs concurrent jobs submitted from several driver threads).
* A task merges its range over the input SSTs clipped to ``[lo, hi)`` from the range's resume
  point and writes output SSTs under fresh ULIDs (never older than the job id), returning
  their handles. It never writes ``.compactions``: the driver's heartbeat records a range's
  outputs when its task returns (the heartbeat is the only writer of progress).
* A failed task attempt is retried by Spark from the same resume point; the outputs of the
  failed attempt (and of a losing speculative attempt, or of an executor lost mid-task) are
  never recorded, so never committed: GC collects them once older than ``min_age``.
* A driver that dies mid-job stops heartbeating: the next coordinator reclaims the job after
  ``worker_heartbeat_timeout`` and a new worker resumes it, re-running only the ranges whose
  outputs were not recorded (a recorded range restarts after its last output's last key).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Any, Iterator, Mapping, Sequence

import trio

from slatedb.compactor.compactor import Compactor
from slatedb.compactor.executor import Executor, Job
from slatedb.compactor.worker import OnOutput, RangeTask
from slatedb.config import Settings
from slatedb.format.types import CompactedSsTable
from slatedb.merge_operator import merge_operator_of

from slatedb.objstore.url import resolve_store
from slatedb.api.args import coerce_settings
from slatedb.compactor.service import max_retries_of, serve
from slatedb.errors import FencedError, InvalidArgumentError, SlateDBError
from slatedb.runtime import opened, with_max_retries
from slatedb.runtime.production import ProductionRuntime

from .io import run_io

class SparkTaskError(SlateDBError):
    """A subcompaction range's Spark task failed on every attempt Spark made: the message names
    the compaction, the range and the task's own error (its class and message, as the Python
    worker reported it); Spark's exception is the ``__cause__``. Nothing of the range is
    recorded; the job's claim lapses and a later coordinator reclaims it."""

    def __init__(self, compaction_id: Any, index: int, cause: BaseException) -> None:
        text = str(cause).split("JVM stacktrace:")[0]  # the Python worker's traceback comes first
        found = (re.findall(r"^(slatedb\.[\w.]*: .*)$", text, re.M)
                 or re.findall(r"^([\w.]*(?:Error|Exception)\w*: .*)$", text, re.M))
        what = found[-1] if found else (text.strip().splitlines() or [type(cause).__name__])[0]
        super().__init__(f"the Spark task of compaction {compaction_id} range {index} failed on every attempt: "
                         f"{what[:2000]}")


def _run_range(url: str, store_options: Mapping[str, str] | None, index: int, job: Job,
               fail_dir: str | None = None, merge_operator: Any = None,
               max_retries: int | None = None) -> tuple[int, tuple, float]:
    """One Spark task: merge one range, write its outputs, return their handles. ``fail_dir``
    (tests): a file ``fail-<range>`` there makes this attempt fail after its first output SST,
    once (the file is removed), so Spark retries the task; a file holding ``exit`` kills the
    task's Python worker process instead (``os._exit``: an executor lost mid-task). Returns
    (range index, output handles, seconds the task spent in the store and the merge).
    ``max_retries``: the store calls' ``object_store_max_retries`` (None: the default)."""
    import os

    marker = os.path.join(fail_dir, f"fail-{index}") if fail_dir else None

    async def fn(store, rt) -> tuple[CompactedSsTable, ...]:
        async def on_output(outputs: tuple[CompactedSsTable, ...]) -> None:
            if marker is not None and os.path.exists(marker):
                with open(marker) as f:
                    how = f.read().strip()
                os.remove(marker)
                if how == "exit":
                    os._exit(17)  # the worker process dies with its output written, unreported
                raise RuntimeError(f"injected failure of range {index} after output {outputs[-1].id}")
        return await Executor(store, rt, merge_operator_of(merge_operator)).run(job, on_output)

    seconds = [0.0]

    async def timed(store, rt) -> tuple[CompactedSsTable, ...]:
        t0 = rt.monotonic_s()
        try:
            return await fn(store, rt)
        finally:
            seconds[0] = rt.monotonic_s() - t0

    outputs = run_io(url, store_options, timed, max_retries=max_retries)
    return index, outputs, seconds[0]


class SparkRanges:
    """A :class:`~slatedb.compactor.worker.RangeRunner` running each range as a Spark task."""

    def __init__(self, spark: Any, url: str, store_options: Mapping[str, str] | None = None, *,
                 fail_dir: str | None = None, merge_operator: Any = None, max_retries: int | None = None) -> None:
        self.spark = spark
        #: Each task's ``object_store_max_retries`` (None: the default); :func:`run_spark_compactor`
        #: gives the settings' to the runner it makes.
        self.max_retries = max_retries
        #: Shipped to every task in its closure (cloudpickled: a lambda works); None keeps
        #: merge operands unmerged (spec/protocols/merge.md MERGE-6).
        self.merge_operator = merge_operator_of(merge_operator)
        self.fail_dir = fail_dir
        self.url = url
        self.store_options = dict(store_options) if store_options else None
        self.tasks_run = 0
        #: Per finished range: the seconds inside its task (store and merge), by the task's runtime.
        self.timings: list[float] = []

    def _submit(self, task: RangeTask) -> tuple[CompactedSsTable, ...]:
        url, opts, fail_dir, op, retries = self.url, self.store_options, self.fail_dir, self.merge_operator, self.max_retries
        sc = self.spark.sparkContext
        sc.setJobGroup(f"slatedb-compaction-{task.job.compaction_id}-{task.index}",
                       f"compaction {task.job.compaction_id} range {task.index}", interruptOnCancel=True)
        rdd = sc.parallelize([(task.index, task.job)], 1)
        try:
            (result,) = rdd.map(lambda t: _run_range(url, opts, t[0], t[1], fail_dir, op, retries)).collect()
        except SlateDBError:
            raise
        except Exception as e:  # pyspark's PythonException / Py4JJavaError: the job failed
            raise SparkTaskError(task.job.compaction_id, task.index, e) from e
        self.timings.append(result[2])
        self.tasks_run += 1
        return result[1]

    async def run_ranges(self, tasks: Sequence[RangeTask], on_output: OnOutput) -> list[tuple[CompactedSsTable, ...]]:
        results: dict[int, tuple[CompactedSsTable, ...]] = {}
        # A range whose outputs are recorded and complete still runs (it writes nothing after
        # its last key): the task cannot know it finished.

        async def one(t: RangeTask) -> None:
            outs = await trio.to_thread.run_sync(self._submit, t, abandon_on_cancel=True)
            results[t.index] = outs
            if outs != t.job.resume_outputs:
                await on_output(t.index, outs)  # the heartbeat records the range's outputs

        async with trio.open_nursery() as nursery:
            for t in tasks:
                nursery.start_soon(one, t)
        return [results[t.index] for t in tasks]


async def run_spark_compactor(spark: Any, url: str, settings: Settings | None = None, *, once: bool = True,
                              store_options: Mapping[str, str] | None = None, runtime: Any = None,
                              runner: SparkRanges | None = None, merge_operator: Any = None) -> Any:
    """The coordinator with a Spark-backed worker on ``url`` (trio). ``once``: until idle;
    otherwise until fenced or cancelled, going on after store outages
    (slatedb/compactor/service.py). ``object_store_max_retries`` (the compactor's, else the
    database's) bounds the driver's store calls and, when the runner is made here, each task's."""
    settings = coerce_settings(settings)
    if not isinstance(once, bool):
        raise InvalidArgumentError(f"once must be True or False, not {once!r}")
    max_retries = max_retries_of(settings)
    rt = with_max_retries(runtime or ProductionRuntime("compactor"), max_retries)
    store = resolve_store(url, options=store_options, clock_ms=rt.now_ms)
    try:
        c = Compactor(store, rt, settings, runner=runner or SparkRanges(spark, url, store_options,
                                                                        merge_operator=merge_operator,
                                                                        max_retries=max_retries),
                      merge_operator=merge_operator)
        try:
            await c.start()  # the open's short pauses (a wrong endpoint fails within seconds)
        except FencedError:
            if once:
                raise
            return c  # a newer compactor took over first (as Compactor.run)
        opened(rt)  # fenced in: the pauses of an open database from now on (slatedb.admin.run_compactor)
        if once:
            await c.run_until_idle(leave_new_l0=True)
        else:
            await serve(c)
        return c
    finally:
        with trio.CancelScope(shield=True):
            await store.aclose()


def run_compactor(spark: Any, url: str, settings: Settings | None = None, *, once: bool = True,
                  merge_operator: Any = None, **store_options: Any) -> Any:
    """``slatedb.spark.run_compactor(spark, url)``: compact the database at ``url`` with the
    driver as coordinator and one Spark task per subcompaction range. Returns the compactor
    (its ``stats``). ``merge_operator``: folds merge operands (else they stay unmerged)."""
    opts = {k: str(v) for k, v in store_options.items()} or None
    return trio.run(lambda: run_spark_compactor(spark, url, settings, once=once, store_options=opts,
                                                merge_operator=merge_operator))


#: The master URLs Spark accepts (``SparkContext``'s ``master``): anything else is refused here,
#: before a JVM starts and prints its stack trace for a typo.
_MASTER = re.compile(r"local(\[(\*|[0-9]+)(,[0-9]+)?\])?|local-cluster\[[0-9]+,[0-9]+,[0-9]+\]|yarn"
                     r"|(spark|mesos)://\S+|k8s://\S+")


def check_spark_master(master: str) -> str:
    """``master`` when it is a Spark master URL, else :class:`InvalidArgumentError` naming the forms."""
    if not isinstance(master, str) or _MASTER.fullmatch(master) is None:
        raise InvalidArgumentError(f"Spark master {master!r} is not a Spark master URL: local, local[N], local[*], "
                                   "local[N,M], local-cluster[N,C,M], spark://HOST:PORT, yarn, k8s://..., mesos://...")
    return master


@contextlib.contextmanager
def spark_session_for(master: str) -> Iterator[Any]:
    """A Spark session on ``master`` bound to 127.0.0.1, without UI, stopped on exit."""
    check_spark_master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName("slatedb-compactor")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


async def spark_compactor_cli(url: str, settings: Settings | None, *, once: bool, master: str,
                              merge_operator: Any = None, runtime: Any = None) -> Any:
    """``slatedb run-compactor --engine spark``: a Spark session on ``master`` for the run."""
    with spark_session_for(master) as spark:
        return await run_spark_compactor(spark, url, settings, once=once, merge_operator=merge_operator,
                                         runtime=runtime)
