"""gc seeds that failed on landed code (issue 14), each kept passing.

* 171, 390, 409 -- ``InvalidDbStateError: source checkpoint ... has expired`` escaped the admin:
  the scenario chose a checkpoint it held as the source of a new one after that checkpoint had
  expired (it never dropped expired ones from its list). The engine was right (RFC 000: an
  expired source is refused with a typed error). Fixed in the scenario: sources are chosen only
  while clearly unexpired (expiry times taken before the call, a lower bound), and the refusal is
  accepted only once the source may have expired; any other refusal is a CKPT-1 violation.
* 102, 160 -- liveness "GC left N objects written before the heal that nothing needs": the
  objects (a WAL object; two manifests) were pinned by a checkpoint that expired a moment before
  the check, and GC had had no round since. The check now excuses what the checkpoints of the
  manifests of its last GC window (one slack) pinned; garbage older than that must be gone.
* 371, 383 -- READ-1 "reader checkpoint on manifest 11 pins WAL range (13, 17] but wal 14 is
  gone" (issue 27 item 6): an engine bug. A managed reader committed its new checkpoint (lifetime
  6 s), then the post-create boundary read stalled 16.5 s; when the commit returned the
  checkpoint had expired and GC had collected WAL 14, yet the reader adopted it. Fixed in
  ``slatedb/reader/core.py`` ``_establish``: a checkpoint with less than half its lifetime left
  when its commit returns is retired, never adopted, and another is established
  (``reader_checkpoint_stale``).
* 390 (again, after the compaction lifecycle landed) -- liveness "L0 still holds 9 SSTs 300
  virtual s after faults stopped": nothing stuck, the compactor was too slow. A writer closing
  after a fault storm left 22 L0 SSTs (27 after the final writes) and the local worker, with
  ``max_compaction_sources`` 2, needed two jobs per pair of them; each job opened every input
  SST (a HEAD and an index GET, in sequence) once to plan its subcompaction ranges and again for
  every range, the ranges running one after the other, so a pair took ~35 virtual s. Fixed in
  ``slatedb/compactor/worker.py`` / ``executor.py`` (COMPACT-8): the ranges merge from the
  readers opened for planning, all at once; the backlog drains within the bound.
* 47 -- READ-4 "reader r1 fails 32.4 virtual s after its last freeze: wal/39 is missing from the
  WAL range (34, 55] pinned by manifest 36" (surfaced when the compaction fix above changed the
  histories): an engine bug. The reader's fresh checkpoint (lifetime 6 s) was committed in time,
  then its replay of the pinned WAL range stalled 20 s; GC, seeing the checkpoint expired,
  collected WAL 39 and the reader failed for good. Fixed in ``slatedb/reader/core.py``
  ``_establish``: a missing WAL object when less than half the new checkpoint's lifetime is left
  retires it and establishes another (spec/protocols/reader.md step 3).
* 541, 620 -- CLONE-2 "cannot clone memory://sim/parent: no database there": the scenario's.
  The parent's writer stalled before it created the database and the clone, started at a random
  moment, met no database; the scenario called the engine's correct refusal CLONE-2. Fixed in
  ``sim/scenarios/gc_processes.py``: the clone waits for its parent to exist.
* 20208 -- CLONE-2 "the clone from <checkpoint> failed: source checkpoint ... has expired"
  (twentieth session's campaign, gc 20000..20599): the scenario's. The clone chose the writer's
  checkpoint while it had a stall's margin left, then its calls stalled three times (12.6 + 18.4 +
  17.5 virtual s) and the source had expired when the clone read it again: refusing it is right.
  Fixed in ``sim/scenarios/gc_processes.py``: that refusal, once the source's expiry has passed,
  ends the clone (outcome ``source-expired``, the half-made clone left uninitialized); any other
  failure is still CLONE-2 or READ-2.
"""

from __future__ import annotations

import pytest

from sim.scenarios.gc import run_gc_workload

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [47, 102, 160, 171, 383, 371, 390, 409, 541, 620, 20208])
def test_gc_seed_passes(seed):
    result = run_gc_workload(seed)
    assert result.ok, result.violations
