"""The production runtime: the real clock and the operating system's entropy.

This is the only module of the library that may read the wall clock, ``os.urandom``,
``uuid4()``, ``ULID()`` or the ``random`` module (a test scans the tree for that).
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import trio
from ulid import ULID

from . import RetryPolicy, Runtime
from .metrics import Metrics, log_event

#: The default in production: 10 retries (the official engine's object_store default; the
#: ``object_store_max_retries`` setting overrides it) within 180 s, each wait logged. Pauses of
#: 10 ms doubling to 2 s while a database opens and in tools that only look (a wrong endpoint
#: fails within seconds); an open database pauses as the official engine's ``object_store``
#: client does (``BackoffConfig``: 100 ms doubling to 15 s), so its 10 retries ride out about a
#: minute of outage (:func:`slatedb.runtime.opened`), and so do the services that run for days
#: (``slatedb.admin.run_compactor`` once fenced in, ``admin.run_gc`` without ``once``).
PRODUCTION_RETRIES = RetryPolicy(max_retries=10, deadline_s=180.0, log=True, open_backoff_s=(0.1, 15.0))


class ProductionRuntime(Runtime):
    """Real time, OS randomness; tasks run on the current trio event loop."""

    def __init__(self, name: str = "prod", retry_policy: RetryPolicy = PRODUCTION_RETRIES) -> None:
        self.name = name
        self._rng = random.SystemRandom()
        self.retry_policy = retry_policy
        self.metrics = Metrics()
        self._last_ms = 0

    def event(self, kind: str, **fields: Any) -> None:
        """Production: one ``slatedb.*`` log line per event worth knowing, and its counter
        (:mod:`slatedb.runtime.metrics`)."""
        log_event(self.metrics, kind, fields)

    def now_ms(self) -> int:
        """The wall clock in ms; within one millisecond the same int object as the last call's
        (every row stamped in that millisecond then holds one shared int, not an int of its
        own: 32 bytes a row less in a memtable, and 100k fewer objects to free when a flushed
        memtable is dropped). Any thread may call it: the attribute store is atomic, and a
        race only returns an equal int that is not the shared one."""
        t = time.time_ns() // 1_000_000
        if t == self._last_ms:
            return self._last_ms
        self._last_ms = t
        return t

    def monotonic_s(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(max(0.0, seconds))

    @property
    def rng(self) -> random.Random:
        return self._rng

    def new_ulid(self) -> ULID:
        return ULID()

    def new_uuid(self) -> uuid.UUID:
        return uuid.uuid4()


def default_runtime(name: str = "prod") -> Runtime:
    """The runtime of an API called without one (``Db.open``, ``DbReader.open``, clones,
    destroy...): production."""
    return ProductionRuntime(name)
