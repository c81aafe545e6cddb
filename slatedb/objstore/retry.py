"""Retrying object-store calls, and create-if-absent that survives ambiguous outcomes.

A :class:`~slatedb.errors.TransientObjectStoreError` means "the request may or may not have
applied". Plain reads, overwrites and deletes are idempotent, so retrying them is enough
(:func:`retry_transient`). A conditional create is not: if the first attempt applied and its
reply was lost, the retry finds the object present and would report "lost the race" although
we won it. :func:`create_if_absent` tells the two apart by reading the object back and comparing
bytes: the objects we create with it (WAL SSTs, manifests) carry content no other writer
produces (sequence numbers, a fresh checkpoint UUID). The one exception, the 0-byte WAL fence,
is handled by the fencing protocol itself (see ``slatedb/wal/fencing.py``).
"""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

from slatedb.errors import ObjectAlreadyExistsError, ObjectNotFoundError, TransientObjectStoreError
from slatedb.runtime import Runtime

from .base import CREATE_IF_ABSENT, ObjectStore

T = TypeVar("T")

#: First and largest pause between retries (seconds); the pause doubles in between.
BACKOFF_MIN_S = 0.01
BACKOFF_MAX_S = 2.0


class _Backoff:
    """Capped exponential backoff with jitter, drawn from the runtime's random stream."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.pause_s = BACKOFF_MIN_S

    async def wait(self, what: str, attempt: int, error: Exception) -> None:
        self.runtime.event("retry", what=what, attempt=attempt, error=type(error).__name__)
        await self.runtime.sleep(self.pause_s * (0.5 + self.runtime.rng.random()))
        self.pause_s = min(BACKOFF_MAX_S, self.pause_s * 2)


async def retry_transient(
    runtime: Runtime,
    op: Callable[[], Awaitable[T]],
    *,
    what: str,
    max_attempts: int | None = None,
) -> T:
    """``await op()``, retrying transient errors with capped exponential backoff and jitter.

    ``max_attempts=None`` retries until the call succeeds or fails for good (cancellation
    still interrupts it). Every retry is reported as a ``retry`` runtime event.
    """
    attempt = 0
    backoff = _Backoff(runtime)
    while True:
        attempt += 1
        try:
            return await op()
        except TransientObjectStoreError as e:
            if max_attempts is not None and attempt >= max_attempts:
                raise
            await backoff.wait(what, attempt, e)


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
    ambiguous = False
    attempt = 0
    backoff = _Backoff(runtime)
    while True:
        attempt += 1
        if attempt > 1 and stop is not None:
            reason = stop()
            if reason is not None:
                raise reason
        try:
            await store.put(key, data, CREATE_IF_ABSENT)
            return True
        except ObjectAlreadyExistsError:
            if not ambiguous:
                return False
            if "ambiguous-create-trust" in runtime.bugs:  # catalogued bug (sim/bugs.py): no read-back
                return True
            try:
                existing = await retry_transient(runtime, lambda: store.get(key), what=f"get {key}")
            except ObjectNotFoundError:
                continue  # deleted meanwhile (GC): try again
            mine = bytes(existing.data) == data
            runtime.event("create.resolved", key=key, mine=mine)
            return mine
        except TransientObjectStoreError as e:
            if max_attempts is not None and attempt >= max_attempts:
                raise
            ambiguous = True
            await backoff.wait(f"create {key}", attempt, e)
