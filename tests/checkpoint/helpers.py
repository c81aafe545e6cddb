"""Helpers of the checkpoint tests: a runtime with a settable clock, and a DbReader-like read
of what a checkpoint pins (the pinned manifest's SSTs, then its WAL range)."""

from __future__ import annotations

from slatedb.lsm.view import sst_key
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.sst import decode_all_rows
from slatedb.format.types import ManifestV2
from slatedb.format.wal_sst import decode_wal_sst
from slatedb.manifest.store import manifest_key
from slatedb.objstore.memory import MemoryStore
from slatedb.row import RowKind
from slatedb.runtime.production import ProductionRuntime
from slatedb.wal.writer import wal_key


class ClockRuntime(ProductionRuntime):
    """The production runtime with a wall clock the test moves (``advance``)."""

    def __init__(self, name: str = "admin", start_ms: int = 1_700_000_000_000) -> None:
        super().__init__(name)
        self.now = start_ms

    def now_ms(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


def manifest_at(store: MemoryStore, manifest_id: int) -> ManifestV2:
    key = manifest_key(manifest_id)
    return decode_manifest_v2(store.get_now(key).data, key)


def pinned_contents(store: MemoryStore, manifest_id: int) -> dict[bytes, bytes]:
    """What a reader of manifest ``manifest_id`` sees: the newest row of each key among the SSTs
    it references (L0 and sorted runs) and the WAL objects in ``(replay_after_wal_id,
    wal_id_last_seen]``; deleted keys left out. A WAL object missing from the range fails."""
    m = manifest_at(store, manifest_id)
    rows = []
    for view in (*m.l0, *(v for run in m.compacted for v in run.ssts)):
        key = sst_key(view.sst_id)
        rows.extend(decode_all_rows(store.get_now(key).data, key))
    for wal_id in range(m.replay_after_wal_id + 1, m.wal_id_last_seen + 1):
        key = wal_key(wal_id)
        rows.extend(decode_wal_sst(store.get_now(key).data, key).rows)
    newest: dict[bytes, object] = {}
    for row in sorted(rows, key=lambda r: r.seq):
        newest[row.key] = row
    return {k: r.value for k, r in newest.items() if r.kind is RowKind.VALUE}  # type: ignore[attr-defined]
