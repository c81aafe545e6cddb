"""WAL writer with epoch fencing (RFC 001 "Writer Protocol"), and WAL replay.

Steps (numbers as in ``spec/protocols/wal-fencing.md``):

* open (steps 2-5, :meth:`WalWriter.fence`): list ``wal/`` and take the first free id ``n``;
  create the empty fence object there. If the id is taken, re-read the manifest: a newer
  ``writer_epoch`` means we are fenced (halt); otherwise an older writer took the slot, so try
  ``n + 1``. Once the fence lands at ``F``, re-read the manifest **once more** and halt if a
  newer writer exists: without that re-check a writer can "successfully" fence above a newer
  writer's fence and acknowledge writes the newer writer never replays (the model's
  ``UNSAFE_NO_EPOCH_RECHECK`` counterexample to DUR-1).
* write (step 7, :meth:`WalWriter.write`): create the next id; on success the rows are
  durable. "Exists" means either a newer writer's fence (re-read the manifest: halt) or an
  older writer's fence that raced ours (skip the id).

The same-epoch case of the RFC ("another writer with the same epoch": panic) cannot arise from
a lost reply, because :func:`~slatedb.objstore.retry.create_if_absent` recognises our own
earlier success by content. A fence is 0 bytes, so for fences "the object is ours" and "an
older writer's fence" look alike; both are safe to take as ours, since any writer below us
halts on its next manifest read and any writer above us is caught by the re-check.
"""

from __future__ import annotations

from typing import Sequence

from slatedb.errors import CorruptionError, FencedError, ObjectNotFoundError
from slatedb.format.sst import SstOptions
from slatedb.format.wal_sst import FENCE_BYTES, decode_wal_sst, encode_wal_sst_fast
from slatedb.format.layout import WAL_DIR, WAL_SUFFIX, parse_id, wal_key  # noqa: F401 (re-exported)
from slatedb.manifest.store import ManifestStore, read_boundary_versioned
from slatedb.objstore.base import ObjectStore
from slatedb.objstore.retry import create_if_absent, retry_transient
from slatedb.row import Row
from slatedb.runtime import Runtime, probes, switches

async def list_wal_ids(store: ObjectStore, runtime: Runtime) -> list[int]:
    metas = await retry_transient(runtime, lambda: store.list(WAL_DIR), what="list wal/")
    ids = [parse_id(m.key, WAL_DIR, WAL_SUFFIX) for m in metas]
    return sorted(i for i in ids if i is not None)


class WalWriter:
    """Writes WAL objects for the writer of epoch ``epoch``. Build it with :meth:`fence`."""

    def __init__(
        self,
        store: ObjectStore,
        runtime: Runtime,
        manifests: ManifestStore,
        epoch: int,
        fence_id: int,
        sst_options: SstOptions,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.manifests = manifests
        self.epoch = epoch
        #: The id of our fence object (``F``): WAL ids below it are replayed at open.
        self.fence_id = fence_id
        #: The highest WAL id this writer holds (its fence, then its last data object).
        self.last_id = fence_id
        self.sst_options = sst_options
        self.halted = False

    # -- fencing ----------------------------------------------------------------------------

    @classmethod
    async def fence(
        cls,
        store: ObjectStore,
        runtime: Runtime,
        manifests: ManifestStore,
        epoch: int,
        floor_id: int,
        sst_options: SstOptions,
    ) -> "WalWriter":
        """Steps 2-5: write our fence at the first free id above ``floor_id`` (the manifest's
        ``max(replay_after_wal_id, wal_id_last_seen)``: objects at or below it may be GC'd)."""
        ids = await list_wal_ids(store, runtime)
        n = max([floor_id, *ids]) + 1
        while True:
            key = wal_key(n)
            if await create_if_absent(store, runtime, key, FENCE_BYTES):
                runtime.event("create", path=key, outcome="ok", epoch=epoch, fence=True)
                break
            runtime.event("create", path=key, outcome="exists", epoch=epoch, fence=True)
            runtime.probe(probes.WAL_FENCE_SLOT_TAKEN)
            await cls._halt_if_newer(manifests, runtime, epoch)
            n += 1
        # Step 5: a newer writer may have fenced below us before we listed (see module doc).
        recheck = _bug_no_recheck if switches.NO_EPOCH_RECHECK in runtime.bugs else cls._halt_if_newer
        await recheck(manifests, runtime, epoch)
        runtime.event("fence_written", epoch=epoch, id=n)
        return cls(store, runtime, manifests, epoch, n, sst_options)

    @staticmethod
    async def _halt_if_newer(manifests: ManifestStore, runtime: Runtime, epoch: int) -> None:
        latest = await manifests.read_latest_required()
        current = latest.manifest.writer_epoch
        assert current >= epoch, f"manifest writer_epoch {current} went below our epoch {epoch} (FENCE-4)"
        if current > epoch:
            runtime.event("halt", epoch=epoch, newer=current)
            raise FencedError(f"writer epoch {epoch} was fenced by a writer with epoch {current}")

    async def outlived_destroy(self, bumped_id: int, listed: list[int], *, boundary_files: bool = True) -> bool:
        """DESTROY-7 after an epoch bump and this fence (spec/protocols/destroy.md "Concurrent
        writers of metadata"; destroy seed 409). Called when the listing ``listed`` read after
        the fence lacks manifest ``bumped_id - 1``, the base of the bump (then the latest): it was
        deleted after the bump landed, either by a GC, which first makes the boundary durable at
        or above it (BOUNDARY-1), or by a destroyer that removed the database while the bump was
        on the wire, so that the bump and the fence landed on an emptied root. The boundary below
        the base (or nothing listed at all) is the second case: the fence and the manifest are
        deleted again (the manifest last) and True returned; the caller refuses. With boundary
        files off there is no proof while our manifest is listed: False, as GC's own look."""
        rt, base = self.runtime, bumped_id - 1
        if listed and not boundary_files:
            return False
        boundary, _etag = await read_boundary_versioned(self.store, rt, self.manifests.boundary_key)
        if listed and boundary >= base:
            return False  # a GC deleted the base behind its boundary: the database lives
        rt.probe(probes.WRITER_OPEN_OUTLIVED_DESTROY)
        rt.event("writer_open_outlived_destroy", manifest=bumped_id, boundary=boundary)
        if switches.WRITER_KEEPS_OPEN_AFTER_DESTROY in rt.bugs and listed:  # catalogued bug (sim/scenarios/catalogue.py)
            return False
        self.halted = True
        for key in (wal_key(self.fence_id), self.manifests.key(bumped_id)):
            await retry_transient(rt, lambda k=key: self.store.delete(k), what=f"delete {key}")
            rt.event("delete", path=key, why="open outlived destroy")
        return True

    # -- writing ----------------------------------------------------------------------------

    async def write(self, rows: Sequence[Row], keep: list | None = None) -> int:
        """Step 7: write ``rows`` (non-empty, in seq order) as the next WAL object; return its id.

        When this returns, the rows are durable and below every later writer's fence (DUR-1).
        Raises :class:`FencedError` (and stays halted) when a newer writer took over. ``keep``:
        where the encode appends the columns it extracted (:func:`encode_wal_sst_fast`).
        """
        assert rows, "empty WAL write"
        if self.halted:
            raise FencedError(f"writer epoch {self.epoch} is fenced")
        data = encode_wal_sst_fast(rows, self.sst_options, keep).data
        n = self.last_id + 1
        # A taken slot: read the manifest epoch (halt if newer), else skip it; the catalogued
        # bug fence-ignored skips it without reading the epoch.
        taken = _bug_no_recheck if switches.FENCE_IGNORED in self.runtime.bugs else self._halt_if_newer
        while True:
            if self.halted:  # FENCE-3: learned meanwhile (e.g. from the manifest poller)
                raise FencedError(f"writer epoch {self.epoch} is fenced")
            key = wal_key(n)
            if await create_if_absent(self.store, self.runtime, key, data, stop=self._stop_reason):
                self.runtime.event("create", path=key, outcome="ok", epoch=self.epoch, fence=False)
                self.last_id = n
                return n
            self.runtime.event("create", path=key, outcome="exists", epoch=self.epoch, fence=False)
            try:
                await taken(self.manifests, self.runtime, self.epoch)
            except FencedError:
                self.runtime.probe(probes.WAL_WRITE_FENCED)
                self.halted = True
                raise
            # An older writer's fence raced ours into this slot (FENCE-2 keeps it empty).
            self.runtime.probe(probes.WAL_WRITE_SLOT_OLDER_FENCE)
            n += 1

    def _stop_reason(self) -> BaseException | None:
        return FencedError(f"writer epoch {self.epoch} is fenced") if self.halted else None


async def _bug_no_recheck(manifests: ManifestStore, runtime: Runtime, epoch: int) -> None:
    """Catalogued bugs ``no-epoch-recheck`` (after its fence lands) and ``fence-ignored`` (at a
    taken WAL slot) (sim/scenarios/catalogue.py): the writer does not read the manifest epoch where
    :meth:`WalWriter._halt_if_newer` would."""


def in_l0(seq: int, last_l0_seq: int) -> bool:
    """Whether a WAL row of ``seq`` is in L0 already by a manifest's ``last_l0_seq`` (DUR-4,
    spec/protocols/wal-fencing.md): at or below it, unless it is 0, the value of a database that
    flushed nothing (both engines number rows from 1; a row of seq 0, which the format allows,
    is kept rather than lost)."""
    return seq <= last_l0_seq and last_l0_seq > 0


async def replay_wal(
    store: ObjectStore, runtime: Runtime, after_id: int, before_id: int,
    *, after_seq: int, manifests: ManifestStore | None = None, epoch: int | None = None,
) -> tuple[list[Row], int]:
    """Rows of WAL objects with ``after_id < id < before_id``, in id order (fences are empty),
    but those L0 holds by ``after_seq`` (:func:`in_l0`).

    ``after_seq`` is the manifest's ``last_l0_seq`` (0: every row): rows at or below it are in L0
    already (DUR-4, spec/protocols/wal-fencing.md). A WAL object above the replay point may hold
    some: the official engine records the replay point of a memtable's freeze, which may be taken
    before the WAL object of its last writes lands. Replayed again, such a row would sit above
    its own L0 copy, or above what a compaction folded it into at the same seq: an operand
    shadowing its fold, the older operands and the base lost.

    Returns the rows and the number of objects read. A missing id inside the range is
    corruption: WAL ids are contiguous (FENCE-1) and GC keeps everything above
    ``replay_after_wal_id``. Unless we were fenced meanwhile: a writer replaying at open
    (``manifests`` and its ``epoch`` given) whose read of an object stalls while a newer writer
    opens, flushes the same rows to L0, advances ``replay_after_wal_id`` past it and its GC
    deletes it, finds the object gone; that is :class:`FencedError`, not corruption (the rows
    are safe in the newer writer's L0; found by db seed 581).
    """
    rows: list[Row] = []
    count = 0
    for wal_id in range(after_id + 1, before_id):
        key = wal_key(wal_id)
        try:
            got = await retry_transient(runtime, lambda: store.get(key), what=f"get {key}")
        except ObjectNotFoundError:
            if manifests is not None and epoch is not None:
                await WalWriter._halt_if_newer(manifests, runtime, epoch)  # FencedError when fenced
            raise CorruptionError(key, None, f"WAL object missing from the replay range ({after_id}, {before_id})") from None
        wal = decode_wal_sst(bytes(got.data), key)
        rows.extend(r for r in wal.rows if not in_l0(r.seq, after_seq))
        count += 1
        if wal.is_fence:
            runtime.probe(probes.WAL_REPLAY_FENCE)
        runtime.event("replay", path=key, rows=len(wal.rows), fence=wal.is_fence)
    return rows, count
