"""``ready_to_destroy`` (slatedb/gc/destroyed.py, RFC 000): destroyed, past the grace, and no
active checkpoint, with checkpoint expiry judged in whole seconds like everywhere else in GC."""

from __future__ import annotations

import uuid

import pytest

from slatedb.format.types import Checkpoint, ManifestV2
from slatedb.gc import GarbageCollector
from slatedb.gc.destroyed import ready_to_destroy
from slatedb.manifest.store import StoredManifest
from slatedb.runtime.production import ProductionRuntime
from tests.db.helpers import memory_store


def stored(destroyed_at_s: int, *expiries_s: int) -> StoredManifest:
    cps = tuple(Checkpoint(uuid.UUID(int=i + 1), 1, e) for i, e in enumerate(expiries_s))
    return StoredManifest(3, ManifestV2(initialized=True, destroyed_at_s=destroyed_at_s, checkpoints=cps))


def test_destroy_waits_for_the_grace_and_for_checkpoints_to_expire_in_whole_seconds() -> None:
    assert not ready_to_destroy(stored(0), 10_000_000, 0)  # not destroyed
    assert not ready_to_destroy(stored(100), 100_000, 0)  # at the grace's end: not past it
    assert ready_to_destroy(stored(100), 100_001, 0)
    assert not ready_to_destroy(stored(100), 150_000, 60)
    # a checkpoint expiring at second 200 still pins throughout second 200 (expired once older than now)
    assert not ready_to_destroy(stored(100, 200), 200_500, 0)
    assert ready_to_destroy(stored(100, 200), 201_000, 0)
    assert not ready_to_destroy(stored(100, 0), 10_000_000, 0)  # 0 never expires


def test_a_negative_delete_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="db_delete_grace_s"):
        GarbageCollector(memory_store(), ProductionRuntime(), db_delete_grace_s=-0.5)
    GarbageCollector(memory_store(), ProductionRuntime(), db_delete_grace_s=0)
