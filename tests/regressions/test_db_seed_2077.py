"""db seed 2077: the first writer's boundary check after creating manifest 1 stalled for 726
virtual s; meanwhile two writers opened the database, wrote manifests 2..5 and GC advanced
``gc/manifest.boundary`` to 4. The boundary read then said "id 1 is behind the boundary" (RFC
004's false negative) and ``ObjectVersionBehindBoundaryError`` escaped ``Db.open``. Manifest 1
did land and the database exists: ``create_initial`` now answers "someone else got there" (None)
and open goes on from the latest manifest, as after a conflict.
"""

from __future__ import annotations

import trio

from slatedb.format.types import ManifestV2
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from sim.scenarios.db import run_db_workload
from tests.db.helpers import memory_store


def test_seed_2077_passes():
    result = run_db_workload(2077)
    assert result.ok, result.violations


def test_create_initial_behind_the_boundary_is_not_an_error():
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())

    async def main():
        # Others opened and wrote manifests up to 5 (GC never deletes the latest) and GC passed
        # id 1 before our post-create boundary read.
        await ms.try_write(5, ManifestV2(initialized=True))
        await ms.advance_boundary(4)
        return await ms.create_initial(ManifestV2(initialized=True))

    assert trio.run(main) is None
