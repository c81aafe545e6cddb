"""rescale seed 79: a shard whose range held no SST could not be re-created after a crash.

The rescaler's projection of ``src`` onto shard 1's range matched no SST, so ``project`` left
the new manifest with no ``external_dbs`` entry. The rescaler crashed right after C7 (the
``initialized`` manifest landed); its re-run read an initialized database that named no source
and refused it: ``CloneMismatchError: a database exists at memory://sim/shard1 and was not
made from other databases`` (CLONE-1). Fix (projection-union.md C5): every source stays named,
with an empty entry when it contributes no SST, as the official wheel's single-source
projection does; GC detaches unused entries only once the database is initialized
(checkpoints-gc.md step 9). Unit tests: tests/projection/test_create.py (empty projection,
empty union, GC on an unfinished creation).
"""

from __future__ import annotations

from sim.scenarios.rescale import run_rescale_workload


def test_seed_79_passes():
    result = run_rescale_workload(79)
    assert result.ok, result.violations
