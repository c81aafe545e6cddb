"""A standalone compactor as a long-running service (``slatedb run-compactor`` without
``--once``, :func:`slatedb.admin.run_compactor`, ``slatedb.spark.run_compactor(once=False)``).

:func:`serve` runs :meth:`Compactor.run` and, when it stops because the object store did not
answer within the retry bound (an outage longer than ``object_store_max_retries`` pauses ride
out), logs it (a ``compactor_error`` event), waits and runs it again: the same compactor, its
epoch and startup pin kept, first one ``poll_interval`` later, the wait doubling up to
:data:`MAX_PAUSE_S` while the store stays down. Before, one exhausted call stopped the service
for good, and a writer without a compactor of its own then waited forever once L0 was full.
An error that waiting cannot fix (access denied, a corrupt object, a bug) still stops it, as
does being fenced (it returns, fenced) or cancelled.

REQUIRES: the compactor has started (``await c.start()``, its epoch claimed).
"""

from __future__ import annotations

from slatedb.config import Settings
from slatedb.errors import ObjectStoreRetriesExhaustedError, TransientObjectStoreError

from .compactor import Compactor

#: Errors after which the service goes on: the store did not answer, retried to the bound.
STORE_UNAVAILABLE = (ObjectStoreRetriesExhaustedError, TransientObjectStoreError)

#: The longest wait between two runs while the store stays down.
MAX_PAUSE_S = 60.0


def max_retries_of(settings: Settings) -> int | None:
    """The compactor's ``object_store_max_retries``: its own option, else the database's."""
    own = settings.compactor_options.object_store_max_retries if settings.compactor_options else None
    return own if own is not None else settings.object_store_max_retries


async def serve(c: Compactor) -> None:
    """Run ``c`` until fenced or cancelled, going on after store outages (see the module)."""
    rt = c.runtime
    first = max(float(c.options.poll_interval), 0.01)
    pause = first
    while True:
        began = rt.monotonic_s()
        try:
            await c.run()
            return
        except BaseExceptionGroup as group:
            unavailable, rest = group.split(STORE_UNAVAILABLE)
            if rest is not None or unavailable is None:
                raise
            error: BaseException = _first_leaf(unavailable)
        except STORE_UNAVAILABLE as e:
            error = e
        if rt.monotonic_s() - began > MAX_PAUSE_S:
            pause = first  # it ran a while: a new outage, not the same one
        rt.event("compactor_error", error=f"{type(error).__name__}: {error}",
                 going_on=f"the object store did not answer within object_store_max_retries: "
                          f"compacting again in {pause:g} s")
        await rt.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)


def _first_leaf(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group
