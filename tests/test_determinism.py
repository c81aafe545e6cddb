"""Same seed, same trace: the simulation's first promise.

Checked in-process (repeated runs) and across processes with different ``PYTHONHASHSEED`` (so
that neither hash randomisation nor object addresses leak into the schedule).
"""

from __future__ import annotations

import os
import subprocess
import sys

from sim.scenarios.store import run_store_workload
from sim.scenarios.tasks import run_tasks_workload


def _in_subprocess(expr: str, hashseed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    out = subprocess.run([sys.executable, "-c", f"import sys; {expr}"], env=env, check=True,
                         capture_output=True, text=True, timeout=300)
    return out.stdout.strip()


def test_fifty_tasks_same_seed_same_trace():
    digests = {run_tasks_workload(7) for _ in range(4)}
    assert len(digests) == 1


def test_fifty_tasks_different_seeds_differ():
    digests = [run_tasks_workload(seed) for seed in range(6)]
    assert len(set(digests)) == 6


def test_fifty_tasks_same_trace_across_processes():
    here = run_tasks_workload(11)
    expr = "from sim.scenarios.tasks import run_tasks_workload; print(run_tasks_workload(11))"
    assert _in_subprocess(expr, "1") == here
    assert _in_subprocess(expr, "12345") == here


def test_ten_thousand_store_ops_with_faults_replay_identically():
    first = run_store_workload(3, n_ops=10_000, faults="all")
    assert first.ok, first.violations
    assert set(first.faults) >= {"transient", "ambiguous"}  # faults really were injected
    assert first.events > 20_000
    second = run_store_workload(3, n_ops=10_000, faults="all")
    assert second.digest == first.digest
    expr = ("from sim.scenarios.store import run_store_workload; "
            "print(run_store_workload(3, n_ops=10_000, faults='all').digest)")
    assert _in_subprocess(expr, "99") == first.digest
    other = run_store_workload(4, n_ops=10_000, faults="all")
    assert other.digest != first.digest


def test_store_workload_oracle_holds_across_swarm_seeds():
    for seed in range(10):
        result = run_store_workload(seed, n_ops=1500)
        assert result.ok, (seed, result.violations)
