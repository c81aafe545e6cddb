"""The ``slatedb`` data source for PySpark's Python Data Source API (pyspark >= 4.0).

``spark.read.format("slatedb")``: partitions are planned on the driver from the manifest a
checkpoint pins (:mod:`slatedb.spark.plan`); each task reads its key range through a
``DbReader`` on that checkpoint (:mod:`slatedb.spark.scan`).

``df.write.format("slatedb").mode("append" | "overwrite")``: the bulk load of
:mod:`slatedb.spark.load` (begin on the driver when the write is planned, stage in each task,
one commit on the driver, abort deletes what was staged).

Key bounds are options (``start``/``end``), not pushed filters: this reader does not implement
``pushFilters``, so nothing a query pushes can stay behind on a reader object that Spark reuses
for the next query on the same DataFrame (the 4.x pushdown path keeps pushed filters there).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from slatedb.errors import InvalidArgumentError
from slatedb.format.sst import SstOptions

from .io import run_io
from .load import LoadPlan, TaskResult, begin_load, cleanup_load, commit_load, stage_sorted
from .options import SourceOptions, parse_options
from .plan import plan_splits
from .scan import read_split
from .sharded import ShardedPlan, abort_sharded, begin_sharded, collect_shards, commit_sharded, stage_shard
from .snapshot import establish, pinned


class SlateDbPartition(InputPartition):
    def __init__(self, index: int, lo: bytes | None, hi: bytes | None, checkpoint_id: str, lease: bool) -> None:
        super().__init__(index)
        self.index = index
        self.lo = lo
        self.hi = hi
        self.checkpoint_id = checkpoint_id
        self.lease = lease

    def __repr__(self) -> str:
        return f"SlateDbPartition({self.index}, {self.lo!r}..{self.hi!r})"


class SlateDbReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts

        async def plan(store: Any, rt: Any) -> tuple[uuid.UUID, Any, bool]:
            if opts.checkpoint is not None:
                return opts.checkpoint, await pinned(store, rt, opts.checkpoint), False
            cid, stored = await establish(store, rt, opts.checkpoint_lifetime_s)
            return cid, stored, True

        cid, stored, lease = run_io(opts.url, opts.store_dict, plan)
        splits = plan_splits(stored.manifest, opts.bounds, opts.split_size_bytes)
        return [SlateDbPartition(s.index, s.lo, s.hi, str(cid), lease) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SlateDbPartition)
        yield from read_split(self.opts, partition.checkpoint_id, partition.lo, partition.hi, partition.lease)


@dataclasses.dataclass
class SlateDbCommitMessage(WriterCommitMessage):
    result: Any  # TaskResult, or ShardResult for a sharded load


def _check_read_schema(schema: Any, opts: SourceOptions) -> None:
    """A schema given with ``spark.read.schema(...)`` must be the source's own (the columns and
    types the options make): the tasks return exactly those columns, and Spark failed each task
    with DATA_SOURCE_RETURN_SCHEMA_MISMATCH after it had read its range."""
    from pyspark.sql.types import BinaryType, LongType

    expected = [("key", BinaryType()), ("value", BinaryType())]
    expected += [("seq", LongType())] if opts.include_seq else []
    expected += [("expire_ts_ms", LongType())] if opts.include_expiry else []
    if [(f.name, f.dataType) for f in schema.fields] != expected:
        raise InvalidArgumentError(
            f"the slatedb source reads the schema {opts.schema_ddl()!r} (with these options), not the one given "
            f"with .schema(): {', '.join(f'{f.name} {f.dataType.simpleString()}' for f in schema.fields)!r}; "
            "leave .schema() out and cast or select the columns after load()")


def _check_write_schema(schema: Any) -> None:
    from pyspark.sql.types import BinaryType

    names = {f.name: f for f in schema.fields}
    extra = sorted(set(names) - {"key", "value"})
    if "key" not in names or "value" not in names or extra:
        raise InvalidArgumentError(f"a slatedb load takes columns key and value (binary), got {sorted(names)}")
    for name in ("key", "value"):
        if not isinstance(names[name].dataType, BinaryType):
            raise InvalidArgumentError(f"column {name!r} must be binary, got {names[name].dataType.simpleString()}"
                                       " (cast it: F.col(...).cast('binary'))")


class SlateDbWriter(DataSourceArrowWriter):
    def __init__(self, opts: SourceOptions, plan: LoadPlan | ShardedPlan) -> None:
        self.opts = opts
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> SlateDbCommitMessage:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyspark import TaskContext

        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        attempt = ctx.attemptNumber() if ctx is not None else 0
        batches = [b for b in iterator if b.num_rows]
        if batches:
            table = pa.Table.from_batches(batches).select(["key", "value"])
            if pc.any(pc.is_null(table["key"])).as_py():
                raise InvalidArgumentError(f"a key is null (partition {partition})")
            table = table.take(pc.sort_indices(table, sort_keys=[("key", "ascending")]))
            keys, values = table["key"].to_pylist(), table["value"].to_pylist()
        else:
            keys, values = [], []
        opts, plan = self.opts, self.plan
        sst_options = SstOptions(block_size_bytes=opts.block_size_bytes)
        stage: Any = stage_shard if isinstance(plan, ShardedPlan) else stage_sorted
        result = run_io(opts.url, opts.store_dict, lambda store, rt: stage(
            store, rt, plan, partition, attempt, keys, values, sst_options=sst_options,
            sst_size_bytes=opts.sst_size_bytes))
        return SlateDbCommitMessage(result)

    def commit(self, messages: list[Any]) -> None:
        opts, plan = self.opts, self.plan
        results = [None if m is None else m.result for m in messages]

        if isinstance(plan, ShardedPlan):
            async def united(store: Any, rt: Any) -> Any:
                try:
                    done = await commit_sharded(store, rt, plan, results)
                except BaseException:
                    await abort_sharded(store, rt, plan)
                    raise
                await collect_shards(store, rt, min_age_s=0)  # losing attempts, dead drivers' leftovers
                return done

            run_io(opts.url, opts.store_dict, united)
            return

        async def go(store: Any, rt: Any) -> Any:
            try:
                return await commit_load(store, rt, plan, results)
            finally:
                await cleanup_load(store, rt, plan.load_id)  # other attempts' SSTs; all of them if refused

        run_io(opts.url, opts.store_dict, go)

    def abort(self, messages: list[Any]) -> None:
        opts, plan = self.opts, self.plan
        if isinstance(plan, ShardedPlan):
            run_io(opts.url, opts.store_dict, lambda store, rt: abort_sharded(store, rt, plan))
            return
        run_io(opts.url, opts.store_dict, lambda store, rt: cleanup_load(store, rt, plan.load_id))


class SlateDbDataSource(DataSource):
    """``spark.read.format("slatedb")`` / ``df.write.format("slatedb")`` (see docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "slatedb"

    def schema(self) -> str:
        return parse_options(self.options).schema_ddl()

    def reader(self, schema: Any) -> DataSourceReader:
        opts = parse_options(self.options)
        _check_read_schema(schema, opts)
        return SlateDbReader(opts)

    def writer(self, schema: Any, overwrite: bool) -> SlateDbWriter:
        opts = parse_options(self.options, writing=True)
        _check_write_schema(schema)
        if opts.sharded:
            if overwrite:
                raise InvalidArgumentError("a sharded load creates a new database: use mode('append'), not overwrite")
            return SlateDbWriter(opts, run_io(opts.url, opts.store_dict, begin_sharded))
        plan = run_io(opts.url, opts.store_dict, lambda store, rt: begin_load(store, rt, overwrite=overwrite))
        return SlateDbWriter(opts, plan)
