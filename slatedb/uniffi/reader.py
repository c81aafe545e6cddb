"""``DbReaderBuilder`` / ``DbReader`` and ``SlateDbWalReader`` / ``SlateDbWalIterator`` with the
official signatures, over :class:`slatedb.aio.DbReader` and :class:`slatedb.WalReader`."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from slatedb.config import Settings as _Settings
from slatedb.errors import ClosedError
from slatedb.reader import DbReaderOptions
from slatedb.reader.aio import DbReader as _AioReader
from slatedb.wal_reader import WalReader
import slatedb.uniffi.cache as _cache
from slatedb.uniffi.db import MergeOperator, _OperatorCall, _Reads
from slatedb.uniffi.builder_common import SharedBuilderCalls
from slatedb.uniffi.errors import CloseReason, Error, lowered_int, refused, translated
from slatedb.uniffi.store import ObjectStore
from slatedb.uniffi.values import (
    DbStatus, ReaderMode, ReaderOptions, RowEntry, RowEntryKind, SlateDbWalReaderOptions, WalRows,
)


class DbReader(_Reads):
    """A read-only view of a database (``await DbReaderBuilder(path, store).build()``)."""

    def __init__(self, r: _AioReader) -> None:
        self._r = r
        self._closed = False

    def _reason(self) -> Any:
        core = self._r.core
        if core.error is not None:
            return CloseReason.PANIC
        return CloseReason.CLEAN if core.closed else None

    def status(self) -> DbStatus:
        """A reader serves durable rows only: its durable seq is the newest seq it holds."""
        return DbStatus(durable_seq=self._r.core.last_seq, close_reason=self._reason(), segments=[])

    async def shutdown(self) -> None:
        """As the official reader's: after a fatal background error (the one its reads raise)
        the shutdown raises that error (probed on the 0.17 wheel: a reader whose poll met a
        corrupt manifest raised it at shutdown, also after the manifest was repaired). The
        native ``close()`` raises nothing then (``docs/reader.md``)."""
        fatal = self._r.core.error
        with translated():
            await self._r.close()
            if fatal is not None and not isinstance(fatal, ClosedError):  # not the fork's refusal
                raise fatal

    async def warm_sst(self, sst_id: Any, targets: list) -> None:
        await _cache.warm_sst(self._r, sst_id, targets, self._reason)

    async def evict_cached_sst(self, sst_id: Any) -> None:
        await _cache.evict_cached_sst(self._r, sst_id, self._reason)

    async def flush_cache_to_disk(self) -> None:
        raise refused("flush_cache_to_disk", "there is no on-disk cache")


class DbReaderBuilder(SharedBuilderCalls):
    """Opens a :class:`DbReader` at ``path`` in ``object_store``."""

    def __init__(self, path: str, object_store: ObjectStore) -> None:
        if not isinstance(object_store, ObjectStore):
            raise TypeError(f"object_store must be an ObjectStore, not {type(object_store).__name__}")
        self._url = object_store.url_of(path)
        self._store_options = object_store.options
        self._mode: Any = ReaderMode.MANAGED_CHECKPOINT()
        self._options: DbReaderOptions = DbReaderOptions()
        self._merge: MergeOperator | None = None
        self._built = False

    def with_reader_mode(self, mode: Any) -> None:
        if not isinstance(mode, ReaderMode):
            raise TypeError(f"mode must be a ReaderMode, not {type(mode).__name__}")
        self._mode = mode

    def with_options(self, options: ReaderOptions) -> None:
        if not isinstance(options, ReaderOptions):
            raise TypeError(f"options must be a ReaderOptions, not {type(options).__name__}")
        # The fields as the official's generated code lowers them (TypeError, ValueError).
        poll_ms, lifetime_ms, max_bytes = (lowered_int(v, "u64") for v in (
            options.manifest_poll_interval_ms, options.checkpoint_lifetime_ms, options.max_memtable_bytes))
        if not isinstance(options.skip_wal_replay, bool):
            raise TypeError(f"skip_wal_replay must be a bool, not {type(options.skip_wal_replay).__name__}")
        if options.object_store_max_retries is not None:
            lowered_int(options.object_store_max_retries, "u64")
        if options.skip_wal_replay:
            raise refused("ReaderOptions(skip_wal_replay=True)", "a reader replays the WAL after its checkpoint")
        if options.object_store_max_retries is not None:
            raise refused("ReaderOptions.object_store_max_retries", "set it in the database's settings")
        with translated():
            self._options = DbReaderOptions(
                manifest_poll_interval_s=poll_ms / 1000.0,
                checkpoint_lifetime_s=lifetime_ms / 1000.0,
                max_memtable_bytes=max_bytes)








    async def build(self) -> DbReader:
        if self._built:
            raise Error.Invalid("this DbReaderBuilder was already built")
        self._built = True
        mode, options, checkpoint = self._mode, self._options, None
        if mode.is_checkpoint():
            checkpoint = mode[0]
        elif mode.is_follow_latest():
            raise refused("ReaderMode.FOLLOW_LATEST", "a reader holds a checkpoint it creates and refreshes "
                          "(MANAGED_CHECKPOINT) or the one given (CHECKPOINT)")
        else:
            options = attrs.evolve(options, follow_latest=True)
        op = None if self._merge is None else _OperatorCall(self._merge)
        with translated():
            settings = _Settings(block_cache_size_bytes=0) if getattr(self, "_no_cache", False) else None
            r = await _AioReader.open(self._url, checkpoint, options=options, settings=settings,
                                      store_options=self._store_options or None, merge_operator=op)
        recorder = getattr(self, "_recorder", None)
        if recorder is not None:
            recorder.bind(r)
        return DbReader(r)


_KINDS = {"VALUE": RowEntryKind.VALUE, "TOMBSTONE": RowEntryKind.TOMBSTONE, "MERGE": RowEntryKind.MERGE}


class SlateDbWalIterator:
    """``await next()``: the rows of the next WAL file; at the tail it waits for the next one."""

    def __init__(self, reader: Any, start_id: int, poll_s: float) -> None:
        self._reader = reader
        self._next = start_id
        self._poll_s = poll_s

    async def next(self) -> WalRows | None:
        core, portal = self._reader._core, self._reader._portal
        with translated():
            while True:
                ids = await portal.acall(core.wal_ids)
                later = [i for i in ids if i >= self._next]
                if later and later[0] != self._next and self._next not in ids:
                    raise Error.Data(f"WAL was truncated at file {self._next}")
                if later:
                    wal_id = later[0]
                    rows = await portal.acall(core.read, wal_id)
                    if rows is not None:
                        self._next = wal_id + 1
                        return WalRows(rows=[RowEntry(kind=_KINDS[r.kind], key=r.key, value=r.value, seq=r.seq,
                                                      create_ts=r.create_ts, expire_ts=r.expire_ts) for r in rows],
                                       last_consumed_wal_file_id=wal_id)
                    continue
                await asyncio.sleep(self._poll_s)


class SlateDbWalReader:
    """Reads a database's WAL files (change data capture); never writes."""

    def __init__(self, path: str, object_store: ObjectStore, _options: Any = None) -> None:
        if not isinstance(object_store, ObjectStore):
            raise TypeError(f"object_store must be an ObjectStore, not {type(object_store).__name__}")
        options = _options or SlateDbWalReaderOptions()
        if not isinstance(options, SlateDbWalReaderOptions):
            raise TypeError(f"options must be a SlateDbWalReaderOptions, not {type(options).__name__}")
        with translated():
            self._w = WalReader.open(object_store.url_of(path), store_options=object_store.options or None)

    @staticmethod
    def with_options(path: str, object_store: ObjectStore, options: SlateDbWalReaderOptions) -> "SlateDbWalReader":
        return SlateDbWalReader(path, object_store, options)

    @staticmethod
    def with_wal_object_store(*args: Any) -> "SlateDbWalReader":
        raise refused("a dedicated WAL object store", "the WAL lives in the database's own store")

    with_wal_object_store_and_options = with_wal_object_store

    async def last_wal_file_id(self, replay_after_wal_id: int) -> int:
        replay_after_wal_id = lowered_int(replay_after_wal_id, "u64")  # as the official lowers it
        core, portal = self._w._core, self._w._portal
        with translated():
            ids = await portal.acall(core.wal_ids)
        later = [i for i in ids if i > replay_after_wal_id]
        return later[-1] if later else replay_after_wal_id

    async def iterator(self, start_wal_file_id: int) -> SlateDbWalIterator:
        if isinstance(start_wal_file_id, bool):
            raise Error.Invalid(f"start_wal_file_id must be a non-negative int, not {start_wal_file_id!r}")
        start_wal_file_id = lowered_int(start_wal_file_id, "u64")  # TypeError / ValueError, as the official
        return SlateDbWalIterator(self._w, start_wal_file_id, 0.1)
