"""The production retry bound in the simulator (issue 27 item 5): the ``store-bounded`` scenario
runs store calls under the production policy and checks RETRY-1 (spec/objstore.md) from the
simulated store's requests: exactly ``max_retries + 1`` attempts, then
``ObjectStoreRetriesExhaustedError``; never fewer (catalogued ``retry-one-short``), never more (a
hand-written mutant), never the transient error itself."""

from __future__ import annotations

import pytest

from slatedb.errors import ObjectStoreRetriesExhaustedError
from slatedb.objstore import retry as retry_mod
from sim.scenarios.catalogue import fired, run
from sim.scenarios.store_bounded import run_store_bounded


def test_the_landed_bound_passes_and_calls_run_out_of_retries() -> None:
    results = [run_store_bounded(seed) for seed in range(5)]
    for r in results:
        assert r.ok, r.violations
        # The oracle has something to judge: calls that succeed after retries and calls exhausted.
        assert r.calls == 300 and r.exhausted > 0 and r.outcomes["ok"] > 0
    assert sum(r.at_deadline for r in results) > 0  # and calls the deadline stopped (a stalled attempt)


def test_same_seed_same_trace() -> None:
    assert run_store_bounded(4).digest == run_store_bounded(4).digest


def test_one_attempt_short_is_reported_as_retry_1() -> None:
    r = run("store-bounded", 0, ["retry-one-short"])
    assert not r.ok and fired(r) == "RETRY-1", r.violations
    assert "gave up after 1 attempts" in r.violations[0] and "max_retries + 1 = 2" in r.violations[0]


def _one_too_many(monkeypatch: pytest.MonkeyPatch) -> None:
    """A hand-written mutant of the other shape: the bound allows one more attempt than configured
    (``attempt > max_retries + 1``)."""
    wait = retry_mod._Backoff.wait

    async def mutant(self, what: str, attempt: int, error: Exception) -> None:
        try:
            await wait(self, what, attempt, error)
        except ObjectStoreRetriesExhaustedError:
            if self.policy.max_retries is None or attempt != self.policy.max_retries + 1:
                raise
            await self.runtime.sleep(self.pause_s)  # one more attempt

    monkeypatch.setattr(retry_mod._Backoff, "wait", mutant)


def test_one_attempt_too_many_is_reported_as_retry_1(monkeypatch: pytest.MonkeyPatch) -> None:
    _one_too_many(monkeypatch)
    r = run_store_bounded(0)
    assert not r.ok and fired(r) == "RETRY-1", r.violations
    assert "more than max_retries + 1" in r.violations[0]


def test_a_transient_error_escaping_the_bound_is_reported_as_retry_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A third shape: the bound re-raises the transient error instead of the typed one."""
    wait = retry_mod._Backoff.wait

    async def mutant(self, what: str, attempt: int, error: Exception) -> None:
        try:
            await wait(self, what, attempt, error)
        except ObjectStoreRetriesExhaustedError:
            raise error from None

    monkeypatch.setattr(retry_mod._Backoff, "wait", mutant)
    r = run_store_bounded(0)
    assert not r.ok and fired(r) == "RETRY-1", r.violations
    assert "the transient error itself escaped" in r.violations[0]


def test_a_bound_that_ignores_its_deadline_is_reported_as_retry_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled attempt is not cut at the deadline (``_Backoff.attempt`` without its cancel scope)."""

    async def no_cut(self, what: str, attempt: int, op):
        return await op()

    monkeypatch.setattr(retry_mod._Backoff, "attempt", no_cut)
    r = next(r for r in (run_store_bounded(seed) for seed in range(8)) if not r.ok)
    assert fired(r) == "RETRY-1" and "past the retry deadline of 180 s" in r.violations[0], r.violations
