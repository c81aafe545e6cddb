"""The destroy scenario (issue 27 item 4): soft and hard destroys racing a writer, a reader,
checkpoints, a clone and GC, every DESTROY-* invariant checked; its catalogue switch and a
hand-written mutant of the destroy edit's already-applied check are caught."""

from __future__ import annotations

import pytest

from slatedb.format.manifest import encode_manifest
from slatedb.format.types import ManifestV2
from slatedb.manifest.edits import NOT_LANDED, SoftDestroy
from slatedb.objstore.memory import MemoryBucket

from sim.checks.destroy import DestroyChecks
from sim.scenarios import catalogue as bugs
from sim.scenarios.destroy import run_destroy_workload
from sim.world.invariants import InvariantViolation
from sim.world.trace import Trace

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [0, 2])
def test_destroy_seeds_pass(seed: int) -> None:
    r = run_destroy_workload(seed)
    assert r.ok, r.violations
    assert r.outcomes["d1"] == "destroyed" and r.outcomes["w"] in ("fenced", "refused", "closed")


def test_soft_destroy_without_the_fence_fires_destroy_2() -> None:
    r = run_destroy_workload(2, bugs=frozenset({"soft-destroy-no-fence"}))
    assert not r.ok and bugs.fired(r) == "DESTROY-2"


def test_a_loose_already_applied_check_of_the_destroy_edit_is_caught(monkeypatch) -> None:
    """Item 5's destroy class: the soft destroy edit counted as applied once the manifest is
    marked, though a racing destroyer's writer checkpoint is still in it: that checkpoint never
    expires, so GC never removes the database (DESTROY-6). Seed 2 races two destroyers."""

    def loose(self, m, attempt):
        return (True, m.destroyed_at_s) if m.destroyed_at_s else NOT_LANDED

    monkeypatch.setattr(SoftDestroy, "landed", loose)
    r = run_destroy_workload(2)
    assert not r.ok and r.violations[0].invariant == "DESTROY-6"


def _landing(trace: Trace, bucket: MemoryBucket, process: str, n: int, key: str, data: bytes | None) -> None:
    op = "store.put" if data is not None else "store.delete"
    trace.record(process, op, n=n, key=key)
    if data is not None:
        bucket.objects[key] = (data, None)
    else:
        bucket.objects.pop(key, None)
    trace.record(process, "store.result", n=n, outcome="ok")


def test_the_checks_name_each_broken_destroy_rule() -> None:
    bucket = MemoryBucket()
    trace = Trace(lambda: 0.0)
    DestroyChecks(bucket, ("db/",)).attach(trace)
    trace.record("w", "writer_epoch", epoch=1)
    _landing(trace, bucket, "w", 1, "db/manifest/00000000000000000001.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=1)))
    _landing(trace, bucket, "w", 2, "db/wal/00000000000000000001.sst", b"x")
    _landing(trace, bucket, "d1", 1, "db/manifest/00000000000000000002.manifest",
             encode_manifest(ManifestV2(initialized=True, writer_epoch=2, destroyed_at_s=5)))
    with pytest.raises(InvariantViolation, match="DESTROY-2"):
        _landing(trace, bucket, "w", 3, "db/wal/00000000000000000002.sst", b"x")
    with pytest.raises(InvariantViolation, match="DESTROY-3"):
        _landing(trace, bucket, "w2", 1, "db/manifest/00000000000000000003.manifest",
                 encode_manifest(ManifestV2(initialized=True, writer_epoch=3, destroyed_at_s=5)))
    for key in [k for k in bucket.objects if "/manifest/" in k]:
        bucket.objects.pop(key)
    with pytest.raises(InvariantViolation, match="DESTROY-4"):
        _landing(trace, bucket, "g1", 1, "db/wal/00000000000000000002.sst", None)
