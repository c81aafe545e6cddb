"""The synchronous reader: ``with slatedb.DbReader.open(url) as r: r.get(b"k")``.

As with :class:`slatedb.Db`, the reader's background work (checkpoint maintenance, WAL
following) and every object-store call run on a trio loop in a runtime thread owned by the
reader; a ``get`` served by an in-memory table or the block cache, and an iterator step over
loaded rows, run on the caller's thread. The runtime thread is :class:`slatedb.api.portal.RuntimeThread`
and the reads :class:`slatedb.api.sync_reads.SyncReads`, as for :class:`slatedb.Db`.
"""

from __future__ import annotations

from slatedb.api.cache_control import SyncCacheControl

import uuid
from pathlib import Path
from typing import Any, Mapping

from slatedb.api.portal import RuntimeArg, RuntimeThread
from slatedb.api.options import DbReaderStatus
from slatedb.api.read_kit import reader_status
from slatedb.api.sync_reads import SyncReads
from slatedb.config import Settings
from slatedb.api.args import coerce_settings
from slatedb.lsm.read_path import ReadState
from slatedb.errors import ReadOnlyError
from slatedb.objstore.base import ObjectStore
from slatedb.merge_operator import merge_operator_of
from slatedb.runtime import Runtime

from .core import ReaderCore
from .options import DbReaderOptions
from slatedb.redact import shown_url


class DbReader(SyncReads, SyncCacheControl):
    """A read-only view of a database (RFC 000 ``DbReader``). Build it with :meth:`open`."""

    _core: ReaderCore

    def __init__(self, portal: RuntimeThread) -> None:
        self._core = portal.core
        self._portal = portal

    @classmethod
    def open(
        cls,
        url: str,
        checkpoint_id: uuid.UUID | str | None = None,
        *,
        options: DbReaderOptions = DbReaderOptions(),
        settings: Settings | Mapping[str, Any] | str | Path | None = None,
        store_options: Mapping[str, str] | None = None,
        store: ObjectStore | None = None,
        runtime: RuntimeArg = None,
        merge_operator: Any = None,
    ) -> "DbReader":
        """Open a reader of the database at ``url``.

        ``checkpoint_id``: read exactly what that checkpoint pins, never refreshing it (raises
        :class:`~slatedb.errors.CheckpointNotFoundError` if absent,
        :class:`~slatedb.errors.InvalidDbStateError` if expired). None: establish and maintain
        a checkpoint of the reader's own (deleted by :meth:`close`). ``settings`` matter only
        for the block cache (``block_cache_size_bytes``). ``store`` overrides the store ``url``
        names; ``runtime`` is a runtime, or a factory of one called on the runtime thread.
        """
        settings = coerce_settings(settings)
        op = merge_operator_of(merge_operator)

        async def open_core(st: ObjectStore, rt: Runtime) -> ReaderCore:
            return await ReaderCore.open(st, rt, options, settings, checkpoint_id, op)

        return cls(RuntimeThread.start("slatedb-reader", open_core, url, store=store, store_options=store_options,
                                       runtime=runtime, closed_message="the database is closed"))

    def close(self) -> None:
        """Stop maintenance, delete the reader's own checkpoint, stop the runtime thread. Idempotent."""
        self._portal.close()

    def __enter__(self) -> "DbReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _state(self) -> tuple[ReadState, int | None]:
        return self._core.read_state, None

    def put(self, *args: Any, **kwargs: Any) -> None:
        raise ReadOnlyError("a DbReader is read-only: write through the Db")

    delete = write = merge = put

    def refresh(self) -> None:
        """Run one maintenance round now (what the background task does every
        ``manifest_poll_interval_s``): re-establish, refresh the expiry, follow the WAL.
        Nothing happens for a reader opened on a given checkpoint."""
        self._core.check_open()
        self._portal(self._core.maintain)

    def status(self) -> DbReaderStatus:
        """The newest seq the reader holds (``durable_seq``: every row it serves is durable),
        why it closed (``close_reason``, None while open), the manifest and checkpoint its view
        is pinned to and the newest WAL object in it. No I/O; works after ``close()`` too (it
        says CLEAN), as ``Db.status()``."""
        return reader_status(self._core)

    @property
    def checkpoint_id(self) -> uuid.UUID | None:
        """The checkpoint the current view is pinned by."""
        return self._core.checkpoint_id

    @property
    def manifest_id(self) -> int:
        return self._core.manifest_id

    @property
    def options(self) -> DbReaderOptions:
        return self._core.options

    @property
    def stats(self) -> dict[str, int]:
        return dict(self._core.stats)

    @property
    def core(self) -> ReaderCore:
        """The engine (for the simulator and tests)."""
        return self._core

    def __repr__(self) -> str:
        return f"DbReader({shown_url(self._core.store.url)!r}, checkpoint={self._core.checkpoint_id})"
