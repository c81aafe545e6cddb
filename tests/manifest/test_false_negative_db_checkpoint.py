"""RFC 004's boundary false negative on ``Db.create_checkpoint`` (issue 15, item 1 acceptance).

A manifest create that landed can be reported *not committed*: its boundary read comes back after
another process built on it and GC moved the boundary past it. The update is then retried on a
fresh read, which already holds the checkpoint. Before the typed edits (commit d7c21d3) the
writer's own copy of the checkpoint change had no "already applied" check and this test found a
**second** checkpoint in the manifest (an orphan pin nobody knows about, without a lifetime: it
would keep its manifest and SSTs forever). With ``AddCheckpoint`` applied through
``ManifestStore.commit`` exactly one checkpoint is added and it is the one returned.
"""

from __future__ import annotations

import slatedb
from slatedb import CheckpointScope
from slatedb.objstore.base import OVERWRITE
from slatedb.objstore.memory import MemoryBucket, MemoryStore
from slatedb.runtime.production import ProductionRuntime

from ..checkpoint.helpers import manifest_at
from ..db.helpers import latest_manifest

QUIET = {"compactor_options": None, "flush_interval": "1h", "l0_sst_size_bytes": 4096, "l0_max_ssts": 64}
BOUNDARY = "gc/manifest.boundary"


class LateBoundaryStore(MemoryStore):
    """While ``armed``: the next manifest create lands, then, before its boundary read returns,
    another process writes the next manifest on top of it (an identical copy) and GC advances
    the boundary to the id just created: the writer's boundary read reports ``N+1 <= B``."""

    armed = False
    created: int | None = None
    fired = 0

    async def put(self, key, data, mode=OVERWRITE):
        out = await super().put(key, data, mode)
        if self.armed and key.startswith("manifest/"):
            self.created = int(key.split("/")[1].split(".")[0])
        return out

    async def get(self, key, byte_range=None):
        if key == BOUNDARY and self.armed and self.created is not None:
            n = self.created
            self.armed, self.created = False, None
            self.fired += 1
            src = f"manifest/{n:020d}.manifest"
            self.put_now(f"manifest/{n + 1:020d}.manifest", self.get_now(src).data)  # built on it
            self.put_now(BOUNDARY, str(n).encode("ascii"))  # GC passed it
        return await super().get(key, byte_range)


def test_retried_db_create_checkpoint_after_a_boundary_false_negative_adds_one_checkpoint():
    store = LateBoundaryStore(MemoryBucket(), ProductionRuntime().now_ms, url="memory://fn")
    with slatedb.Db.open("memory://fn", settings=QUIET, store=store) as db:
        db.put(b"k", b"v")
        store.armed = True
        got = db.create_checkpoint(CheckpointScope.DURABLE)
        assert store.fired == 1  # the false negative really happened
        latest_id, latest = latest_manifest(store)
        user = [c for c in latest.checkpoints if c.metadata is None]
        assert [c.id for c in user] == [got.id], f"{len(user)} checkpoints after one create_checkpoint"
        # The checkpoint returned pins a manifest that exists and holds it.
        assert any(c.id == got.id for c in manifest_at(store, got.manifest_id).checkpoints)
        assert db.get(b"k") == b"v"
