"""``require_latest`` (slatedb/manifest/missing.py): what admin tools and the CLI open through.
They never create: an empty path is "no database", data without a manifest is lost manifests,
and a database is its latest manifest."""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import ManifestsMissingError, NotFoundError
from slatedb.format.types import ManifestV2
from slatedb.manifest.missing import require_latest
from slatedb.manifest.store import ManifestStore
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def test_require_latest() -> None:
    store = memory_store()
    ms = ManifestStore(store, ProductionRuntime())
    with pytest.raises(NotFoundError, match="no database"):
        trio.run(require_latest, ms)
    store.put_now("wal/00000000000000000001.sst", b"")
    with pytest.raises(ManifestsMissingError):
        trio.run(require_latest, ms)
    trio.run(ms.try_write, 1, ManifestV2(initialized=True))
    trio.run(ms.try_write, 2, ManifestV2(initialized=True, writer_epoch=4))
    got = trio.run(require_latest, ms)
    assert got.id == 2 and got.manifest.writer_epoch == 4
