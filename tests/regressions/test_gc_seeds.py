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
"""

from __future__ import annotations

import pytest

from sim.scenarios.gc import run_gc_workload

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("seed", [102, 160, 171, 390, 409])
def test_gc_seed_passes(seed):
    result = run_gc_workload(seed)
    assert result.ok, result.violations
