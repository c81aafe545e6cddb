"""rescale seeds that failed on landed code, each kept passing (seed 79: test_rescale_seed_79.py).

* 800 -- CLONE-1 "rs: creating memory://sim/shard0 failed: CloneMismatchError: a database exists
  at memory://sim/shard0 and was not made from other databases": the scenario's. Shard 0's range
  held no source SST, so the projection named ``src`` with an empty entry (C5). The rescaler
  crashed after C7 had landed; its re-run ``rs.r1`` found the database finished and crashed too;
  meanwhile shard 0's GC, on its first pass after ``initialized``, released the empty entry's
  final checkpoint on ``src`` and dropped the entry (checkpoints-gc.md step 9), so ``rs.r2`` read
  an initialized database naming no source and refused it. That is RFC 000's rule (a re-run
  must find the parent in ``external_dbs``, "if not, exit with error"; docs/rescaling.md already
  said so): nothing in a detached manifest tells the result from another database. Fixed in
  ``sim/scenarios/rescale.py`` ``_resumable``: such a refusal, of an initialized destination
  whose entries GC has detached (or whose empty entry has lost its final checkpoint), counts as
  a finished creation (figure ``reruns_after_detach``); any other refusal stays CLONE-1.

* 1251 -- GC-5 "merged/manifest 8 adds L0 SST ... with ULID time ..., 8712 ms before its
  writer's clock when it minted the id": the simulator's. The checkers match a ``store.result``
  to its request by ``(process, n)``, but ``n`` was counted per store, and the merged writer
  ``mw`` holds one store per database it reads (``merged/``, and ``src/`` for the external
  SSTs). Its put ``n=30`` of the L0 SST on ``merged/`` stalled 9.4 s; meanwhile a get ``n=30`` on
  ``src/`` returned, and GC-5's checker took that reply for the put's: the upload seemed to apply
  0.7 s after the mint, so the object's ``last_modified`` (stamped at the real apply, 9.4 s
  after) looked 8.7 s ahead of the id's time. The engine minted the id right (the first attempt
  went out at the mint). Fixed in ``sim/world/store.py``/``trace.py``: one request sequence per
  process over all its stores (``Trace.next_request``); trace digests of processes with several
  stores change (gc, destroy, rescale, load), nothing else.
"""

from __future__ import annotations

import pytest

from sim.scenarios.rescale import run_rescale_workload


@pytest.mark.parametrize("seed, reruns_after_detach", [(800, 1), (1251, 0)])
def test_rescale_seed_passes(seed, reruns_after_detach):
    result = run_rescale_workload(seed)
    assert result.ok, result.violations
    assert result.reruns_after_detach == reruns_after_detach
