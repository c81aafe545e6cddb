"""One read task: a ``DbReader`` on the checkpoint, a merge over its range, Arrow batches out.

The merge is the engine's own (:class:`slatedb.lsm.scan.MergeScan`, the sources
``DbCore.scan_merge`` builds) with one change: it hands out the winning row of each key, so a
task can also return its sequence number and expiry.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterator

from slatedb.lsm.scan import MemSource, MergeScan, NeedIO, SstSource
from slatedb.lsm.view import KeyBounds
from slatedb.merge import resolve_versions
from slatedb.merge_operator import load_merge_operator
from slatedb.reader import DbReader
from slatedb.row import Row, RowKind

from .io import run_io
from .options import SourceOptions
from .snapshot import refresh_if_due


class RowMergeScan(MergeScan):
    """A :class:`MergeScan` whose batches are the visible :class:`Row` of each key."""

    PAIRS = False

    def _emit(self, out: list) -> None:  # type: ignore[override]
        row = self._best
        self._best = None
        if row is None:
            return
        if row.kind is RowKind.VALUE:
            if row.expire_ts_ms is None or row.expire_ts_ms > self._now_ms:
                out.append(row)
        elif row.kind is RowKind.MERGE_OPERAND:  # folded (MERGE-1), or MergeOperatorMissingError
            got = resolve_versions(sorted(self._group or [row], key=lambda r: -r.seq), self._op, self._now_ms, self._max_seq)
            if got is not None:
                out.append(got)


def scan_rows(reader: DbReader, bounds: KeyBounds, batch_rows: int) -> Iterator[list[Row]]:
    """Batches of visible rows of ``reader`` within ``bounds``, in key order."""
    core = reader.core
    rs = core.read_state
    max_seq = core.last_seq
    now = core.runtime.now_ms()
    sources: list[Any] = [
        MemSource(m.iter_range(bounds.lo, bounds.hi, start_inclusive=bounds.lo_inclusive,
                               end_inclusive=bounds.hi_inclusive, reverse=False, max_seq=max_seq))
        for m in rs.mems if not m.is_empty
    ]
    ceiling = rs.view.seq_ceiling
    sources.extend(SstSource([h], bounds, False, ceiling) for h in rs.view.l0)
    sources.extend(SstSource(run.ssts, bounds, False, ceiling) for run in rs.view.runs)
    merge = RowMergeScan(sources, reverse=False, max_seq=max_seq, now_ms=now, op=core.merge_operator)
    portal = reader._portal
    while True:
        try:
            batch = merge.next_batch(batch_rows)
        except NeedIO as e:
            source = e.source
            r, first, last = source.io_request()
            source.supply(first, portal(core.load_blocks, r, first, last))
            continue
        if not batch:
            return
        yield batch


class LeaseKeeper:
    """While a task runs, keep a driver-made checkpoint alive (refresh when half is left)."""

    def __init__(self, opts: SourceOptions, checkpoint_id: uuid.UUID) -> None:
        self.opts = opts
        self.checkpoint_id = checkpoint_id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _refresh(self) -> None:
        lifetime = self.opts.checkpoint_lifetime_s
        run_io(self.opts.url, self.opts.store_dict,
               lambda store, rt: refresh_if_due(store, rt, self.checkpoint_id, lifetime))

    def __enter__(self) -> "LeaseKeeper":
        self._refresh()  # at task start: a job in its later waves keeps its snapshot

        def loop() -> None:
            while not self._stop.wait(max(1.0, self.opts.checkpoint_lifetime_s / 4)):
                try:
                    self._refresh()
                except BaseException as e:  # noqa: BLE001 - reported by the task
                    self.error = e
                    return

        self._thread = threading.Thread(target=loop, name="slatedb-spark-lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def read_split(opts: SourceOptions, checkpoint_id: str, lo: bytes | None, hi: bytes | None, lease: bool) -> Iterator[Any]:
    """Arrow record batches of one split (``[lo, hi)`` within the option bounds)."""
    import pyarrow as pa

    cid = uuid.UUID(checkpoint_id)
    bounds = opts.bounds.intersect(KeyBounds(lo, True, hi, False))
    fields = [pa.field("key", pa.binary()), pa.field("value", pa.binary())]
    if opts.include_seq:
        fields.append(pa.field("seq", pa.int64()))
    if opts.include_expiry:
        fields.append(pa.field("expire_ts_ms", pa.int64()))
    schema = pa.schema(fields)
    keeper = LeaseKeeper(opts, cid) if lease else None
    if keeper is not None:
        keeper.__enter__()
    try:
        if bounds.is_empty():
            return
        op = None if opts.merge_operator is None else load_merge_operator(opts.merge_operator)
        with DbReader.open(opts.url, cid, store_options=opts.store_dict, merge_operator=op) as reader:
            for rows in scan_rows(reader, bounds, opts.batch_rows):
                cols = [pa.array([r.key for r in rows], pa.binary()), pa.array([r.value for r in rows], pa.binary())]
                if opts.include_seq:
                    cols.append(pa.array([r.seq for r in rows], pa.int64()))
                if opts.include_expiry:
                    cols.append(pa.array([r.expire_ts_ms for r in rows], pa.int64()))
                yield pa.RecordBatch.from_arrays(cols, schema=schema)
                if keeper is not None and keeper.error is not None:
                    raise keeper.error
    finally:
        if keeper is not None:
            keeper.__exit__(None, None, None)
