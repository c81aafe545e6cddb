"""CKPT-4 (writer.md): the history check that a running writer keeps its writer checkpoint
(``sim/checks/writer_checkpoint.py``), each of its four rules on a hand-made manifest history, and
the catalogue switch ``writer-checkpoint-released-at-flush`` caught by the simulator with it and
missed without it (``sim hunt --skip-check``: the history check is the only oracle that sees it)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import pytest
from ulid import ULID

from slatedb.format.types import CompactedSsTableView, ManifestV2
from slatedb.manifest.checkpoints import make_checkpoint, writer_checkpoint
from slatedb.runtime import switches

from sim.campaign import hunt as hunt_mod
from sim.checks.writer_checkpoint import WriterCheckpointRule
from sim.world.invariants import InvariantViolation
from sim.world.trace import Event

ROOT = Path(__file__).resolve().parents[1]
DB = "db/"


def _ev(process: str, kind: str = "store.result", **fields) -> Event:
    return Event(1.0, process, kind, tuple(fields.items()))


def _m(epoch: int, *checkpoints, l0: int = 0) -> ManifestV2:
    views = tuple(CompactedSsTableView(ULID.from_int(i + 1), ULID.from_int(i + 1)) for i in range(l0))
    return attrs.evolve(ManifestV2(), writer_epoch=epoch, checkpoints=tuple(checkpoints), l0=views)


def _wcp(epoch: int, manifest_id: int):
    return writer_checkpoint(uuid.UUID(int=manifest_id), manifest_id, epoch, 0)


def _rule_with_writer(process: str = "w", epoch: int = 2) -> WriterCheckpointRule:
    rule = WriterCheckpointRule()
    rule.owner[process] = epoch
    return rule


def _established(known) -> WriterCheckpointRule:
    rule = WriterCheckpointRule()
    rule.landed_by[(DB, 5)] = "w"
    rule.on_event(_ev("w", "writer_epoch", epoch=2, manifest=5), known)
    return rule


def test_the_open_establishes_the_checkpoint_on_its_own_manifest() -> None:
    assert _established({DB: {5: _m(2, _wcp(2, 5))}}).counts["established"] == 1
    with pytest.raises(InvariantViolation, match="CKPT-4.*without a writer checkpoint"):
        _established({DB: {5: _m(2)}})  # BumpWriterEpoch forgot its checkpoint
    with pytest.raises(InvariantViolation, match="CKPT-4.*without a writer checkpoint"):
        _established({DB: {5: _m(2, _wcp(2, 4))}})  # ... or pinned the manifest below


def test_another_process_keeps_the_running_writers_checkpoint() -> None:
    rule = _rule_with_writer()
    reader_cp = make_checkpoint(uuid.UUID(int=99), 6, 0)
    rule.landed(_ev("r1"), DB, 7, _m(2, _wcp(2, 6)), _m(2, _wcp(2, 6), reader_cp))
    assert rule.counts["kept"] == 1
    with pytest.raises(InvariantViolation, match="CKPT-4.*written by g1, drops the writer checkpoint"):
        rule.landed(_ev("g1"), DB, 8, _m(2, _wcp(2, 6)), _m(2))
    # ... but a destroy drops every writer checkpoint, and a newer writer replaces it
    rule.landed(_ev("d"), DB, 8, _m(2, _wcp(2, 6)), attrs.evolve(_m(2), destroyed_at_s=10))
    rule.landed(_ev("w2"), DB, 8, _m(2, _wcp(2, 6)), _m(3, _wcp(3, 8)))


def test_an_l0_flush_reestablishes_the_checkpoint_on_the_manifest_it_writes() -> None:
    rule = _rule_with_writer()
    rule.landed(_ev("w"), DB, 7, _m(2, _wcp(2, 6), l0=1), _m(2, _wcp(2, 7), l0=2))
    assert rule.counts["refreshed"] == 1
    with pytest.raises(InvariantViolation, match="CKPT-4.*still pins manifest 6"):
        rule.landed(_ev("w"), DB, 8, _m(2, _wcp(2, 6), l0=2), _m(2, _wcp(2, 6), l0=3))


def test_only_the_close_drops_the_checkpoint_as_its_last_change() -> None:
    rule = _rule_with_writer()
    rule.landed(_ev("w"), DB, 7, _m(2, _wcp(2, 6), l0=1), _m(2, l0=2))  # the close's last flush
    assert rule.counts["dropped"] == 1
    rule.landed(_ev("c1"), DB, 8, _m(2, l0=2), _m(2, l0=0))  # a compactor commits after it: fine
    with pytest.raises(InvariantViolation, match="CKPT-4.*dropped its writer checkpoint at manifest 7"):
        rule.landed(_ev("w"), DB, 9, _m(2, l0=0), _m(2, l0=1))  # ... but the writer flushes on


def test_the_switch_is_seen_by_the_history_check_alone() -> None:
    """With CKPT-4 left out no other oracle of db seed 0 sees the switch (the compactor's pins and
    GC's min_age protect what the checkpoint would): ``hunt(skip=...)`` measures exactly that.
    (That the switch is caught with the check on: tests/test_sim_bugs.py, its budget.)"""
    missed = hunt_mod.hunt(switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH, 1, skip=("CKPT-4",))
    assert missed.detected_seed is None and missed.skipped_seeds == {"CKPT-4": 1}, missed
    with pytest.raises(ValueError, match="not an invariant id: NOPE"):
        hunt_mod.hunt(switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH, 1, skip=("NOPE",))


def _sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_cli_leaves_a_check_out() -> None:
    out = _sim("run", "--seed", "0", "--workload", "db", "--bug", switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH,
               "--skip-check", "CKPT-4")
    assert out.returncode == 0 and "seed 0: PASS" in out.stdout, out.stdout + out.stderr
    assert "left out: CKPT-4 (1 verdict(s) not raised)" in out.stdout, out.stdout
    bad = _sim("hunt", "--bug", switches.WRITER_CHECKPOINT_RELEASED_AT_FLUSH, "--skip-check", "NOPE")
    assert bad.returncode == 2 and "not an invariant id: 'NOPE'" in bad.stderr, bad.stderr
