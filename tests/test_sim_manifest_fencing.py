"""Manifest-level fencing on the trace (sim/checks/manifest.py): FENCE-5 for a writer's L0
flush, CFENCE-1 for a compaction commit, at the moment each manifest lands. Fed good and bad
histories here; the catalogue switch l0-commit-unfenced is held to its budget by
tests/test_sim_bugs.py."""

from __future__ import annotations

import attrs
import pytest
from ulid import ULID

from sim.world.invariants import InvariantViolation
from sim.checks.manifest import ManifestFenceChecks
from sim.world.trace import Event
from slatedb.format.manifest import encode_manifest
from slatedb.format.types import CompactedSsTableView, ManifestV2


def _ulid(n: int) -> ULID:
    return ULID.from_int(n + (1 << 80))


def _view(n: int) -> CompactedSsTableView:
    return CompactedSsTableView(_ulid(n), _ulid(n), None)


class World:
    def __init__(self):
        self.objects: dict[str, bytes] = {}
        self.checks = ManifestFenceChecks(self.objects.get)
        self.n = 0

    def event(self, process, kind, **fields):
        self.checks.on_event(Event(float(self.n), process, kind, tuple(fields.items())))

    def land(self, process, mid, m: ManifestV2, root=""):
        key = f"{root}manifest/{mid:020d}.manifest"
        self.n += 1
        self.event(process, "store.put", n=self.n, key=key, decision="ok", mode="create-if-absent", size=1)
        self.objects[key] = encode_manifest(m)
        self.event(process, "store.result", n=self.n, outcome='ok etag="x"')


BASE = ManifestV2(initialized=True, writer_epoch=1)


def test_a_writer_flushing_while_it_is_the_writer_passes():
    w = World()
    w.land("w1", 1, BASE)
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("w1", 2, attrs.evolve(BASE, l0=(_view(1),), replay_after_wal_id=3))
    w.land("w2", 3, attrs.evolve(BASE, writer_epoch=2, l0=(_view(1),), replay_after_wal_id=3))
    w.event("w2", "writer_epoch", epoch=2, manifest=3)
    w.land("w2", 4, attrs.evolve(BASE, writer_epoch=2, l0=(_view(2), _view(1)), replay_after_wal_id=5))
    assert w.checks.counts["writer_updates"] == 2


def test_a_zombie_l0_flush_after_a_newer_epoch_is_fence_5():
    w = World()
    w.land("w1", 1, BASE)
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("w2", 2, attrs.evolve(BASE, writer_epoch=2))
    w.event("w2", "writer_epoch", epoch=2, manifest=2)
    # w1 never re-checked the epoch: its flush copies the latest (epoch 2) and adds its L0.
    with pytest.raises(InvariantViolation, match="FENCE-5.*w1 .writer epoch 1.*manifest 2 below it"):
        w.land("w1", 3, attrs.evolve(BASE, writer_epoch=2, l0=(_view(1),), replay_after_wal_id=4))


def test_roots_are_separate_and_other_updates_are_not_writer_flushes():
    w = World()
    w.land("w1", 1, BASE, root="parent/")
    w.event("w1", "writer_epoch", epoch=1, manifest=1)
    w.land("cw", 1, attrs.evolve(BASE, writer_epoch=5), root="clone/")
    w.land("w1", 2, attrs.evolve(BASE, l0=(_view(1),)), root="parent/")  # the clone's epoch is not ours
    # A checkpoint or epoch change by the same process is not an L0 flush.
    w.land("w1", 3, attrs.evolve(BASE, writer_epoch=1, l0=(_view(1),), wal_id_last_seen=9), root="parent/")


def test_a_fenced_compactor_commit_is_cfence_1():
    w = World()
    m1 = attrs.evolve(BASE, compactor_epoch=1, l0=(_view(1), _view(2)))
    w.land("c1", 1, m1)
    w.event("c1", "compactor_started", epoch=1)
    w.land("c2", 2, attrs.evolve(m1, compactor_epoch=2))
    w.event("c2", "compactor_started", epoch=2)
    with pytest.raises(InvariantViolation, match="CFENCE-1.*c1 .compactor epoch 1"):
        w.land("c1", 3, attrs.evolve(m1, compactor_epoch=2, l0=()))
