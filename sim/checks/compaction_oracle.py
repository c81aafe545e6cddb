"""COMPACT-9: a committed sorted run equals a single-process compaction of the same spec.

The oracle runs the production merge (:class:`slatedb.compactor.executor.Executor`) of the job's
input SSTs, as listed in the manifest its commit replaced, in this process at check time: one
range (no subcompactions), no resume, the job's persisted ``retention_min_seq``, outputs never
cut, every catalogue switch off (a production runtime), its output SST written to a scratch
store and never into the world's bucket. The committed run must hold exactly its rows, version
for version, in the same order: whatever the ranges, the workers, the reclaims, the crashes and
resumes of the distributed run, the result is the one a single process gives.

Unlike RESUME-1's independent merge (which gives up on merge operands and expiring rows), this
oracle judges any input the production merge accepts; it cannot see a bug of the merge itself
(RESUME-1 does), only of everything around it.
"""

from __future__ import annotations

from typing import Sequence

from ulid import ULID

from slatedb.compactor.executor import Executor, Job, is_bottom
from slatedb.format.sst import SstOptions
from slatedb.format.types import CompactedSsTable, ManifestV2, TieredCompactionSpec
from slatedb.lsm.view import sst_key
from slatedb.format.sst_reader import SstReader
from slatedb.manifest.compaction import CompactionSpec
from slatedb.objstore.base import OVERWRITE, GetResult, ObjectMeta, ObjectStore, PutMode
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.errors import ObjectNotFoundError
from slatedb.merge_operator import MergeFn
from slatedb.row import Row, RowKind
from slatedb.runtime.production import ProductionRuntime

#: (key, seq, kind, value, expire_ts_ms) of one row.
RowTuple = tuple


class ScratchWrites(ObjectStore):
    """Reads from ``base`` (and from what was written here); writes stay here."""

    def __init__(self, base: ObjectStore) -> None:
        self.base = base
        self.url = base.url
        self.scratch = MemoryStore(MemoryBucket(), lambda: 0, url=base.url)

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        try:
            return await self.scratch.get(key, byte_range)
        except ObjectNotFoundError:
            return await self.base.get(key, byte_range)

    async def head(self, key: str) -> ObjectMeta:
        try:
            return await self.scratch.head(key)
        except ObjectNotFoundError:
            return await self.base.head(key)

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        return await self.scratch.put(key, data, mode)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        return await self.base.list(prefix)

    async def delete(self, key: str) -> None:
        await self.scratch.delete(key)

    def open_url(self, url: str) -> ObjectStore:
        return self.base.open_url(url)


def as_tuple(row: Row) -> RowTuple:
    return (row.key, row.seq, int(row.kind), row.value, row.expire_ts_ms)


async def sst_rows(store: ObjectStore, sst_id: ULID) -> list[Row]:
    reader = await SstReader.open(store, sst_key(sst_id))
    out: list[Row] = []
    async for rows in reader.scan_blocks():
        out.extend(rows)
    return out


async def single_process_rows(store: ObjectStore, spec: TieredCompactionSpec, base: ManifestV2,
                              retention_min_seq: int, now_ms: int = 0,
                              merge_operator: "MergeFn | None" = None) -> list[RowTuple]:
    """The rows a single-process compaction of ``spec`` over ``base`` writes (production merge,
    with the world's merge operator if it has one)."""
    scratch = ScratchWrites(store)
    runtime = ProductionRuntime("compaction-oracle")
    cspec = CompactionSpec.from_format(spec)
    job = Job(compaction_id=runtime.new_ulid(), spec=cspec, manifest=base, retention_min_seq=retention_min_seq,
              bottom=is_bottom(base, cspec), now_ms=now_ms, max_sst_size_bytes=1 << 62, sst_options=SstOptions())

    async def ignore(_outputs: tuple[CompactedSsTable, ...]) -> None:
        return None

    outputs = await Executor(scratch, runtime, merge_operator).run(job, ignore)
    rows: list[RowTuple] = []
    for o in outputs:
        rows.extend(as_tuple(r) for r in await sst_rows(scratch, o.id))
    return rows


def compare(cid: object, mid: int, got: Sequence[RowTuple], expected: Sequence[RowTuple]) -> None:
    """COMPACT-9: ``got`` (the committed run's rows, in run order) is ``expected`` exactly."""
    if list(got) == list(expected):
        return
    at = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
    seen_got = got[at][:2] if at < len(got) else "end"
    seen_exp = expected[at][:2] if at < len(expected) else "end"
    raise AssertionError(f"COMPACT-9: compaction {cid} (manifest {mid}) committed {len(got)} rows, a single-process "
                         f"compaction of its spec {len(expected)}; first difference at row {at}: committed "
                         f"{seen_got}, single-process {seen_exp}")



def purged_early(got: Sequence[RowTuple], expected: Sequence[RowTuple], clock_ms: int) -> list[RowTuple]:
    """The values a single-process compaction keeps (``expected``) whose expiry the database's
    clock ``clock_ms`` (the latest ``last_l0_clock_tick``: the writer's time) has not reached and
    which ``got`` does not hold as values: turned into tombstones or dropped (COMPACT-12's
    suspects; :func:`expiry_message` once the whole run is what a later clock gives)."""
    values = {(k, s) for k, s, kind, _v, _e in got if kind == int(RowKind.VALUE)}
    return [row for row in expected if row[2] == int(RowKind.VALUE) and row[4] is not None and row[4] > clock_ms
            and (row[0], row[1]) not in values]


def expiry_message(cid: object, mid: int, row: RowTuple, clock_ms: int) -> str:
    key, seq, _kind, _value, expire = row
    return (f"COMPACT-12: compaction {cid} (manifest {mid}) purged {key!r}@{seq}, which expires at {expire} ms; the "
            f"database's clock (its writer's last L0 flush) was at most {clock_ms} ms, {(expire - clock_ms) / 1000:.0f} "
            "s before")
