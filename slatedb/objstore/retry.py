"""Retrying object-store calls, and create-if-absent that survives ambiguous outcomes.

A :class:`~slatedb.errors.TransientObjectStoreError` means "the request may or may not have
applied". Plain reads, overwrites and deletes are idempotent, so retrying them is enough
(:func:`retry_transient`). A conditional create is not: if the first attempt applied and its
reply was lost, the retry finds the object present and would report "lost the race" although
we won it. :func:`create_if_absent` tells the two apart by reading the object back and comparing
bytes: the objects we create with it (WAL SSTs, manifests) carry content no other writer
produces (sequence numbers, a fresh checkpoint UUID). The one exception, the 0-byte WAL fence,
is handled by the fencing protocol itself (see ``slatedb/wal/fencing.py``).

Bounds: the runtime's :class:`~slatedb.runtime.RetryPolicy` says how long to keep trying.
Production stops after ``max_retries`` retries (``object_store_max_retries``, default 10) or its
deadline and raises :class:`~slatedb.errors.ObjectStoreRetriesExhaustedError` (not transient,
so no caller loops on it), logging every wait on the ``slatedb.objstore`` logger. The simulator
keeps the unbounded policy in every scenario but ``store-bounded``, which gives each client the
production policy with its own ``max_retries`` and checks RETRY-1 (spec/objstore.md: exactly
``max_retries + 1`` attempts, then the typed error): elsewhere the faults end when the scenario
heals them, and a bound there would change which seeds pass. Permanent errors (403, missing bucket, invalid request) are never
retried: they are not :class:`~slatedb.errors.TransientObjectStoreError`.
"""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable, TypeVar

import trio

from slatedb.errors import (
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    ObjectStoreRetriesExhaustedError,
    TransientObjectStoreError,
)
from slatedb.runtime import RetryPolicy, Runtime, probes, switches

from .base import CREATE_IF_ABSENT, ObjectStore

#: Each wait of a bounded (production) retry is logged here at WARNING: what, why, how long.
LOG = logging.getLogger("slatedb.objstore")

T = TypeVar("T")

class _Backoff:
    """Capped exponential backoff with jitter, drawn from the runtime's random stream, within
    the runtime's retry policy."""

    def __init__(self, runtime: Runtime, max_attempts: int | None = None, policy: RetryPolicy | None = None) -> None:
        self.runtime = runtime
        self.policy = runtime.retry_policy if policy is None else policy
        self.pause_s = self.policy.backoff_min_s
        self.max_attempts = max_attempts
        # With a deadline the clock starts at the first attempt: an attempt that hangs (a frozen
        # endpoint: connect and read timeouts) counts against it (:meth:`attempt`).
        self.started_s: float | None = runtime.monotonic_s() if self.policy.deadline_s is not None else None

    async def attempt(self, what: str, attempt: int, op: Callable[[], Awaitable[T]]) -> T:
        """``await op()``, cut off at the policy's deadline (counted from the first attempt):
        then :class:`ObjectStoreRetriesExhaustedError`, whatever the attempt was waiting for."""
        deadline = self.policy.deadline_s
        if deadline is None or self.started_s is None:
            return await op()
        remaining = deadline - (self.runtime.monotonic_s() - self.started_s)
        with self.runtime_move_on_after(remaining) as scope:
            return await op()
        assert scope.cancelled_caught
        error = TransientObjectStoreError(what, f"no answer within the retry deadline of {deadline:g} s "
                                                f"(the endpoint accepts no connection or does not reply)")
        self.runtime.probe(probes.RETRY_EXHAUSTED_DEADLINE)
        raise self._exhausted(what, attempt, error, self.runtime.monotonic_s() - self.started_s) from error

    def runtime_move_on_after(self, seconds: float) -> trio.CancelScope:
        return trio.move_on_after(max(0.0, self.runtime._world_seconds(seconds)))

    def _exhausted(self, what: str, attempt: int, error: Exception, elapsed: float) -> ObjectStoreRetriesExhaustedError:
        policy = self.policy
        self.runtime.event("retry_exhausted", what=what, attempt=attempt, error=type(error).__name__)
        bound = (f"object_store_max_retries={policy.max_retries}, retry deadline {policy.deadline_s:g} s"
                 if policy.deadline_s is not None else f"object_store_max_retries={policy.max_retries}")
        return ObjectStoreRetriesExhaustedError(getattr(error, "key", what), what, attempt, elapsed, error, bound)

    def _bounded(self) -> bool:
        return self.max_attempts is not None or self.policy.max_retries is not None or self.policy.deadline_s is not None

    async def wait(self, what: str, attempt: int, error: Exception) -> None:
        """Pause before retry number ``attempt`` (``attempt`` attempts have failed), or raise
        :class:`ObjectStoreRetriesExhaustedError` (or ``error`` itself for an explicit
        ``max_attempts``) when the bound is reached."""
        if self.max_attempts is not None and attempt >= self.max_attempts:
            raise error
        policy = self.policy
        if self._bounded():  # the simulator's unbounded policy reads no clock here
            now = self.runtime.monotonic_s()
            if self.started_s is None:
                self.started_s = now
            elapsed = now - self.started_s
            out_of_retries = policy.max_retries is not None and attempt > policy.max_retries
            if switches.RETRY_ONE_SHORT in self.runtime.bugs and policy.max_retries is not None:
                out_of_retries = attempt >= policy.max_retries  # catalogued bug: one attempt fewer
            if out_of_retries or (policy.deadline_s is not None and elapsed >= policy.deadline_s):
                self.runtime.probe(probes.RETRY_EXHAUSTED_ATTEMPTS if out_of_retries else probes.RETRY_EXHAUSTED_DEADLINE)
                raise self._exhausted(what, attempt, error, elapsed) from error
        pause = self.pause_s * (0.5 + self.runtime.rng.random())
        self.runtime.event("retry", what=what, attempt=attempt, error=type(error).__name__)
        if policy.log:
            limit = f"/{policy.max_retries}" if policy.max_retries is not None else ""
            LOG.warning("%s failed (%s); retry %d%s in %.2f s", what, error, attempt, limit, pause)
        await self.runtime.sleep(pause)
        self.pause_s = min(policy.backoff_max_s, self.pause_s * 2)


async def retry_transient(
    runtime: Runtime,
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    max_attempts: int | None = None,
) -> T:
    """``await op()``, retrying transient errors with capped exponential backoff and jitter.

    The runtime's retry policy bounds it (production: :class:`ObjectStoreRetriesExhaustedError`
    after ``object_store_max_retries`` retries or the deadline; the simulator: until the call
    succeeds or fails for good). An explicit ``max_attempts`` re-raises the transient error
    itself after that many attempts. Every retry is reported as a ``retry`` runtime event.
    """
    attempt = 0
    policy = runtime.retry_policy
    if policy.deadline_s is None:
        # No deadline: an attempt is ``await op()`` (what _Backoff.attempt does then), and the
        # backoff, which reads no clock then, is made at the first failure (most calls have none).
        backoff = None
        while True:
            attempt += 1
            try:
                return await op()
            except TransientObjectStoreError as e:
                if backoff is None:
                    backoff = _Backoff(runtime, max_attempts, policy)
                await backoff.wait(what, attempt, e)
    backoff = _Backoff(runtime, max_attempts, policy)
    while True:
        attempt += 1
        try:
            return await backoff.attempt(what, attempt, op)
        except TransientObjectStoreError as e:
            await backoff.wait(what, attempt, e)


class RetryingReads:
    """A store's ranged reads (what :class:`~slatedb.format.sst_reader.SstReader` needs), with
    transient errors retried: an SST read block by block survives a lost reply at any block."""

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self._store = store
        self._rt = runtime

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> Any:
        return await retry_transient(self._rt, lambda: self._store.get(key, byte_range=byte_range), what=f"get {key}")

    async def head(self, key: str) -> Any:
        return await retry_transient(self._rt, lambda: self._store.head(key), what=f"head {key}")


async def _read_back(store: ObjectStore, runtime: Runtime, key: str, data: bytes) -> bool | None:
    """After an ambiguous create, "already exists": read the object back; identical bytes mean
    our earlier attempt applied. None: the object is gone meanwhile (GC)."""
    try:
        existing = await retry_transient(runtime, lambda: store.get(key), what=f"get {key}")
    except ObjectNotFoundError:
        return None
    mine = bytes(existing.data) == data
    runtime.probe(probes.ambiguous_create(key, mine))
    runtime.event("create.resolved", key=key, mine=mine)
    return mine


async def _bug_trust_existing(store: ObjectStore, runtime: Runtime, key: str, data: bytes) -> bool | None:
    """Catalogued bug ``ambiguous-create-trust`` (sim/scenarios/catalogue.py): "already exists" after an
    ambiguous create is taken as our own success, without reading the object back."""
    return True


async def create_if_absent(
    store: ObjectStore,
    runtime: Runtime,
    key: str,
    data: bytes,
    *,
    max_attempts: int | None = None,
    stop: Callable[[], BaseException | None] | None = None,
) -> bool:
    """Create ``key`` holding ``data`` unless it exists. True: we created it; False: it existed.

    When an earlier attempt ended ambiguously and a later one finds the object present, the
    object is read back: identical bytes mean the earlier attempt applied (True). ``stop`` is
    asked before every retry; an exception it returns is raised instead of retrying (a writer
    that learned it was fenced sends no further create).
    """
    return (await create_if_absent_tagged(store, runtime, key, data, max_attempts=max_attempts, stop=stop))[0]


async def create_if_absent_tagged(
    store: ObjectStore,
    runtime: Runtime,
    key: str,
    data: bytes,
    *,
    max_attempts: int | None = None,
    stop: Callable[[], BaseException | None] | None = None,
    gone_is_taken: bool = False,
) -> tuple[bool | None, str | None]:
    """:func:`create_if_absent` and the ETag of the object created, when the put that created
    it replied (None: it existed, or an ambiguous attempt was found applied by reading back).

    ``gone_is_taken`` (sequenced metadata, RFC 004: an id once created is never free again):
    an object found present after an ambiguous attempt and gone when read back is not created
    again: the answer is None, "taken, maybe by our own attempt" (a GC freed it behind the
    boundary after others built on it, or a destroyer deleted the database). Created again it
    would land below the latest file, or as a lone manifest outliving a destroyed database
    (destroy seed 30333)."""
    ambiguous = False
    attempt = 0
    backoff = _Backoff(runtime, max_attempts)
    resolve = _bug_trust_existing if switches.AMBIGUOUS_CREATE_TRUST in runtime.bugs else _read_back
    while True:
        attempt += 1
        if attempt > 1 and stop is not None:
            reason = stop()
            if reason is not None:
                raise reason
        try:
            meta = await backoff.attempt(f"create {key}", attempt, lambda: store.put(key, data, CREATE_IF_ABSENT))
            return True, getattr(meta, "etag", None) or None
        except ObjectAlreadyExistsError:
            if not ambiguous:
                return False, None
            mine = await resolve(store, runtime, key, data)
            if mine is None:
                if gone_is_taken and switches.SEQUENCED_GONE_RECREATED not in runtime.bugs:  # catalogued bug
                    runtime.probe(probes.CREATE_GONE_TAKEN)
                    return None, None
                continue  # deleted meanwhile (GC): try again
            return mine, None
        except TransientObjectStoreError as e:
            ambiguous = True
            await backoff.wait(f"create {key}", attempt, e)
