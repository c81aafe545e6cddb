"""SlateDB as a Spark data source (docs/spark.md).

* :func:`register` makes ``spark.read.format("slatedb")`` and ``df.write.format("slatedb")``
  available in a session.
* :func:`read` is the driver-owned snapshot: a checkpoint made now, refreshed while the block
  runs, deleted when it ends (failure included), and a DataFrame pinned to it.
* :func:`bulk_load` range-partitions and sorts a DataFrame by key, then loads it.
* :func:`run_compactor` compacts with the driver as coordinator and one Spark task per
  subcompaction range.
* :func:`load_sharded` makes a new database from a DataFrame: one shard database per key range,
  united into one (the union route); :func:`collect_shards` removes shards no longer used.
* :func:`collect_loads` removes what loads whose driver died left behind (every load's begin
  does it too).

pyspark is imported only by the functions that need it.
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from typing import Any, Iterator, Mapping

from slatedb.errors import InvalidArgumentError

from .io import run_io
from .load import DEFAULT_ABANDONED_AFTER_S, SEQ_HEADROOM, DuplicateKeyError, LoadEndedError, LoadRefusedError
from .options import DEFAULT_CHECKPOINT_LIFETIME_S, parse_options
from .plan import Split, plan_splits
from .sharded import DEFAULT_SHARD_MIN_AGE_S
from .sharded import collect_shards as _collect_shards
from .snapshot import establish, refresh_if_due, release

__all__ = ["DuplicateKeyError", "LoadEndedError", "LoadRefusedError", "SEQ_HEADROOM", "Split", "bulk_load",
           "collect_loads", "collect_shards", "load_sharded", "plan_splits", "read", "register", "run_compactor"]


def run_compactor(spark: Any, url: str, settings: Any = None, *, once: bool = True, **store_options: Any) -> Any:
    """Distributed compaction: this driver coordinates (and holds each job's claim) and every
    subcompaction range runs as a Spark task (docs/spark.md "Distributed compaction")."""
    from .compaction import run_compactor as _run

    return _run(spark, url, settings, once=once, **store_options)


def register(spark: Any) -> None:
    """Register the ``slatedb`` data source in ``spark`` (a SparkSession)."""
    from .source import SlateDbDataSource

    spark.dataSource.register(SlateDbDataSource)


def _str_options(options: Mapping[str, Any]) -> dict[str, str]:
    return {k: (v if isinstance(v, str) else str(v)) for k, v in options.items() if v is not None}


@contextlib.contextmanager
def read(spark: Any, url: str, *, checkpoint_lifetime_s: float = DEFAULT_CHECKPOINT_LIFETIME_S,
         **options: Any) -> Iterator[Any]:
    """``with slatedb.spark.read(spark, url) as df:`` a DataFrame of the database as of now.

    The driver makes a checkpoint (lifetime ``checkpoint_lifetime_s``), refreshes it from a
    thread every quarter lifetime while the block runs (so long jobs keep their snapshot), and
    deletes it when the block exits, by an exception too. Every action on ``df`` in the block
    reads the same rows. ``options`` are the read options of docs/spark.md.
    """
    opts = parse_options({"url": url, "checkpoint_lifetime_s": str(checkpoint_lifetime_s), **_str_options(options)})
    cid, _stored = run_io(opts.url, opts.store_dict, lambda s, rt: establish(s, rt, checkpoint_lifetime_s))
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep() -> None:
        while not stop.wait(max(0.5, checkpoint_lifetime_s / 4)):
            try:
                run_io(opts.url, opts.store_dict, lambda s, rt: refresh_if_due(s, rt, cid, checkpoint_lifetime_s))
            except BaseException as e:  # noqa: BLE001 - reported when the block ends
                errors.append(e)
                return

    thread = threading.Thread(target=keep, name="slatedb-spark-checkpoint", daemon=True)
    thread.start()
    try:
        register(spark)
        read_options = {"url": url, "checkpoint": str(cid), **_str_options(options)}
        yield spark.read.format("slatedb").options(**read_options).load()
    finally:
        stop.set()
        thread.join()
        run_io(opts.url, opts.store_dict, lambda s, rt: release(s, rt, cid))
    if errors:
        raise errors[0]


def _check_partitions(partitions: Any) -> None:
    """``partitions`` of a load: None (the DataFrame's count) or a whole number >= 1. Spark took
    0 for the default, failed on a negative one with its own error, and took a string for a
    column name."""
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, numbers.Integral)
                                   or partitions < 1):
        raise InvalidArgumentError(f"partitions must be a whole number >= 1, got {partitions!r} "
                                   "(or None: as many as the DataFrame has)")


def _check_write_options(url: str, options: Mapping[str, Any]) -> None:
    """The write options and URL of a load, checked at the call as Spark's writer set-up checks
    them (there they came wrapped in an AnalysisException, after Spark sampled the DataFrame)."""
    from slatedb.objstore.url import check_store_url

    opts = parse_options({"url": url, **_str_options(options)}, writing=True)
    check_store_url(opts.url, opts.store_dict or None)


def bulk_load(df: Any, url: str, *, mode: str = "append", partitions: int | None = None, **options: Any) -> None:
    """Load ``df`` (columns ``key``, ``value``: binary) into the database at ``url``:
    range-partitioned by key into ``partitions`` (default: the DataFrame's), sorted within each,
    so every task writes SSTs of its own key range and the commit has nothing to cross-check."""
    if mode not in ("append", "overwrite"):
        raise InvalidArgumentError(f"mode must be 'append' or 'overwrite', got {mode!r}")
    from .source import _check_write_schema

    _check_write_schema(df.schema)  # at the call, typed: not Spark's error from repartitionByRange
    _check_partitions(partitions)
    _check_write_options(url, options)
    register(df.sparkSession)
    n = int(partitions) if partitions is not None else max(1, df.rdd.getNumPartitions())
    ordered = df.repartitionByRange(n, "key").sortWithinPartitions("key")
    ordered.write.format("slatedb").mode(mode).options(url=url, **_str_options(options)).save()


def load_sharded(df: Any, url: str, *, partitions: int | None = None, **options: Any) -> None:
    """Make a new database at ``url`` from ``df`` (columns ``key``, ``value``: binary) by the
    union route: range-partitioned by key into ``partitions`` (default: the DataFrame's), each
    task writes its sorted rows as a database of its own under ``<url>/shards/`` (no WAL, one
    sorted run), and the driver unites the shards into the database at ``url`` (which must not
    exist yet). See docs/spark.md "Sharded loads"."""
    from .source import _check_write_schema

    _check_write_schema(df.schema)
    _check_partitions(partitions)
    _check_write_options(url, {**options, "sharded": "true"})
    register(df.sparkSession)
    n = int(partitions) if partitions is not None else max(1, df.rdd.getNumPartitions())
    ordered = df.repartitionByRange(n, "key").sortWithinPartitions("key")
    ordered.write.format("slatedb").mode("append").options(url=url, sharded="true", **_str_options(options)).save()


def collect_shards(url: str, *, min_age_s: float = DEFAULT_SHARD_MIN_AGE_S, **store_options: Any) -> list[str]:
    """Delete the shard databases under ``<url>/shards/`` that the database at ``url`` no longer
    references (its GC detached them after its compactor rewrote their rows), once their latest
    manifest is ``min_age_s`` old. Returns their URLs."""
    return run_io(url, _str_options(store_options) or None, lambda s, rt: _collect_shards(s, rt, min_age_s=min_age_s))


def collect_loads(url: str, *, abandoned_after_s: float = DEFAULT_ABANDONED_AFTER_S, **store_options: Any) -> list[str]:
    """Remove what failed loads into ``url`` left behind (docs/spark.md "Failure behaviour"):
    the files of task attempts killed while they staged, and everything of a load whose
    driver died (plain and sharded) once its plan is ``abandoned_after_s`` old (default a day;
    0 when you know no load into ``url`` is running). Every load's begin does the same with
    the default. Returns the load ids cleaned."""
    from .load import collect_loads as _collect_loads
    from .sharded import collect_ended_shards

    async def go(store: Any, rt: Any) -> list[str]:
        cleaned = await _collect_loads(store, rt, abandoned_after_s=abandoned_after_s)
        shards = await collect_ended_shards(store, rt)
        return sorted(set(cleaned) | set(shards))

    return run_io(url, _str_options(store_options) or None, go)
