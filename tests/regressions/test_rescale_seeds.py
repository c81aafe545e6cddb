"""rescale seeds that failed on landed code, each kept passing (seed 79: test_rescale_seed_79.py).

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


@pytest.mark.parametrize("seed", [1251])
def test_rescale_seed_passes(seed):
    result = run_rescale_workload(seed)
    assert result.ok, result.violations
