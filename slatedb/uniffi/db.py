"""``DbBuilder``, ``Db``, ``DbSnapshot`` and ``WriteBatch`` with the official signatures: every database call a coroutine (asyncio), each
delegating to :mod:`slatedb.aio`, with this engine's errors raised as the official ``Error.*``."""

from __future__ import annotations

from typing import Any

import attrs

from slatedb import aio
from slatedb.api.options import CloseReason as _OurReason
from slatedb.batch import OpKind, WriteBatch as _Batch
from slatedb.errors import InvalidArgumentError
from slatedb.format.sst_reader import NEED_IO
from slatedb.row import RowKind
import slatedb.uniffi.convert as convert
import slatedb.uniffi.cache as _cache
from slatedb.uniffi.builder_common import SharedBuilderCalls
from slatedb.uniffi.errors import CloseReason, Error, MergeOperatorCallbackError, refused, translated
from slatedb.uniffi.handles import (  # noqa: F401 (re-exported: the classes of the official module)
    DbIterator, MergeOperator, WriteHandle, _key, _OperatorCall, _resolved_meta,
)
from slatedb.uniffi.txn import DbTransaction
from slatedb.uniffi.store import ObjectStore, Settings
from slatedb.uniffi.values import DbStatus, FlushOptions, FlushType, IsolationLevel, KeyValue, SstBlockSize

_REASONS = {_OurReason.CLEAN: CloseReason.CLEAN, _OurReason.FENCED: CloseReason.FENCED,
            _OurReason.PANIC: CloseReason.PANIC, _OurReason.UNKNOWN: CloseReason.UNKNOWN}


class _Reads:
    """get/scan in the official shapes over one of our async readers (``self._r``)."""

    _r: Any

    def _reason(self) -> Any:
        return None

    def _live(self) -> None:
        """Reads of a database that stopped (fenced by a newer writer, or failed) raise
        ``Error.Closed`` with the reason, as in the official; a cleanly closed one raises on its
        own."""
        reason = self._reason()
        if reason is not None and reason is not CloseReason.CLEAN:
            raise Error.Closed(reason, f"the database is closed ({reason.name.lower()})")

    async def get(self, key: bytes) -> bytes | None:
        key = _key(key)
        self._live()
        with translated(self._reason):
            return await self._r.get(key)

    async def get_with_options(self, key: bytes, options: Any) -> bytes | None:
        key = _key(key)
        self._live()
        with translated(self._reason):
            return await self._r.get(key, convert.read_options(options))

    async def get_key_value(self, key: bytes) -> KeyValue | None:
        key = _key(key)
        self._live()
        with translated(self._reason):
            return convert.key_value(await self._r.get_key_value(key))

    async def get_key_value_with_options(self, key: bytes, options: Any) -> KeyValue | None:
        key = _key(key)
        self._live()
        with translated(self._reason):
            return convert.key_value(await self._r.get_key_value(key, convert.read_options(options)))

    def _iterator(self, bounds: Any, options: Any) -> DbIterator:
        self._live()
        r = self._r
        it = r._scan(bounds, False, options)
        rs, _, reverse, max_seq = it._scan
        return DbIterator(it, _resolved_meta(r, rs, max_seq), reverse=reverse)

    async def scan(self, range: Any) -> DbIterator:
        with translated(self._reason):
            return self._iterator(convert.bounds_of(range), None)

    async def scan_with_options(self, range: Any, options: Any) -> DbIterator:
        with translated(self._reason):
            return self._iterator(convert.bounds_of(range), convert.scan_options(options))

    async def scan_prefix(self, prefix: bytes, subrange: Any) -> DbIterator:
        with translated(self._reason):
            return self._iterator(convert.bounds_of(subrange, _key(prefix, "prefix")), None)

    async def scan_prefix_with_options(self, prefix: bytes, subrange: Any, options: Any) -> DbIterator:
        with translated(self._reason):
            return self._iterator(convert.bounds_of(subrange, _key(prefix, "prefix")), convert.scan_options(options))


class DbSnapshot(_Reads):
    """A read-only, consistent point in time (``await db.snapshot()``)."""

    def __init__(self, snap: aio.Snapshot, db: "Db") -> None:
        self._r = snap
        self._db = db

    def _reason(self) -> Any:
        return self._db._reason()


class WriteBatch:
    """Puts, deletes and merges applied atomically by ``await db.write(batch)``."""

    def __init__(self) -> None:
        self._b = _Batch()
        self._consumed = False

    def _check(self) -> None:
        if self._consumed:
            raise Error.Invalid("write batch has already been consumed")

    def put(self, key: bytes, value: bytes) -> None:
        self._check()
        with translated():
            self._b.put(_key(key), _key(value, "value"))

    def put_with_options(self, key: bytes, value: bytes, options: Any) -> None:
        self._check()
        ttl, at = convert.ttl_args(options, "put")
        if at is not None:
            raise refused("Ttl.EXPIRE_AT_MILLIS in a WriteBatch", "use db.put_with_options, or EXPIRE_AFTER_MILLIS")
        with translated():
            self._b.put(_key(key), _key(value, "value"), ttl)

    def delete(self, key: bytes) -> None:
        self._check()
        with translated():
            self._b.delete(_key(key))

    def merge(self, key: bytes, operand: bytes) -> None:
        self._check()
        with translated():
            self._b.merge(_key(key), _key(operand, "operand"))

    def merge_with_options(self, key: bytes, operand: bytes, options: Any) -> None:
        self._check()
        ttl, at = convert.ttl_args(options, "merge")
        if at is not None:
            raise refused("Ttl.EXPIRE_AT_MILLIS in a WriteBatch", "use db.merge_with_options, or EXPIRE_AFTER_MILLIS")
        with translated():
            self._b.merge(_key(key), _key(operand, "operand"), ttl)


class Db(_Reads):
    """An open database (``await DbBuilder(path, store).build()``)."""

    def __init__(self, db: aio.Db, merge_operator: MergeOperator | None = None) -> None:
        self._r = db
        self._merge = merge_operator

    def _check_operand(self, key: bytes, operand: Any) -> None:
        """Refuse at the call a merge operand the operator fails on, nothing written (the
        official engine folds each operand into the memtable's entry as it is written, so its
        operator's failure surfaces at the write): the operator is called on the key's
        newest memtable value (None when it has none there)."""
        op = self._merge
        if op is None or not isinstance(operand, (bytes, bytearray, memoryview)):
            return
        core = self._r._core
        rs = core.read_state
        existing = None
        for mem in rs.mems:
            row = mem.get(key, None)
            if row is None:
                continue
            if row.kind is RowKind.VALUE:
                existing = row.value
            elif row.kind is RowKind.MERGE_OPERAND:
                got = core.get_resolved_fast(key, rs, None)
                existing = None if got is NEED_IO or got is None else got.value
            break
        try:
            op.merge(key, existing, bytes(operand))
        except MergeOperatorCallbackError.Failed as e:
            raise Error.Invalid(f"merge operator error ({e.message})") from None
        except Exception as e:  # noqa: BLE001 - the user's operator: any failure refuses the write
            raise Error.Invalid(f"merge operator error ({type(e).__name__}: {e})") from None

    def _reason(self) -> Any:
        reason = self._r.status().close_reason
        return None if reason is None else _REASONS[reason]

    def _handle(self, h: aio.WriteHandle, key: bytes | None) -> WriteHandle:
        """The official handle: our handle and the row's creation time (read back from the
        memtable at the write's own seq)."""
        core = self._r._core
        create_ts = None
        if key is not None:
            row = core.get_row_fast(key, core.read_state, h.seq)
            if row is not None and row is not NEED_IO and row.seq == h.seq:
                create_ts = row.create_ts_ms
        if create_ts is None:
            create_ts = core.runtime.now_ms()
        return WriteHandle(h, create_ts)

    async def put(self, key: bytes, value: bytes) -> WriteHandle:
        key = _key(key)
        with translated(self._reason):
            return self._handle(await self._r.put(key, _key(value, "value")), key)

    async def put_with_options(self, key: bytes, value: bytes, put_options: Any, write_options: Any) -> WriteHandle:
        key = _key(key)
        ttl, at = convert.ttl_args(put_options, "put")
        convert.check_write_options(write_options)
        with translated(self._reason):
            return self._handle(await self._r.put(key, _key(value, "value"), ttl, expire_at_ms=at), key)

    async def delete(self, key: bytes) -> WriteHandle:
        key = _key(key)
        with translated(self._reason):
            return self._handle(await self._r.delete(key), key)

    async def delete_with_options(self, key: bytes, options: Any) -> WriteHandle:
        convert.check_write_options(options)
        return await self.delete(key)

    async def merge(self, key: bytes, operand: bytes) -> WriteHandle:
        key = _key(key)
        self._check_operand(key, operand)
        with translated(self._reason):
            return self._handle(await self._r.merge(key, _key(operand, "operand")), key)

    async def merge_with_options(self, key: bytes, operand: bytes, merge_options: Any, write_options: Any) -> WriteHandle:
        key = _key(key)
        ttl, at = convert.ttl_args(merge_options, "merge")
        convert.check_write_options(write_options)
        self._check_operand(key, operand)
        with translated(self._reason):
            return self._handle(await self._r.merge(key, _key(operand, "operand"), ttl, expire_at_ms=at), key)

    async def write(self, batch: WriteBatch) -> WriteHandle:
        if not isinstance(batch, WriteBatch):
            raise TypeError(f"write() takes a WriteBatch, not {type(batch).__name__}")
        batch._check()
        batch._consumed = True  # as the official's: any write call consumes it, one that fails too
        ops = batch._b._ops
        for o in ops:
            if o.kind is OpKind.MERGE:
                self._check_operand(o.key, o.value)
        with translated(self._reason):
            h = await self._r.write(batch._b)
        return self._handle(h, ops[-1].key if ops else None)

    async def write_with_options(self, batch: WriteBatch, options: Any) -> WriteHandle:
        convert.check_write_options(options)
        return await self.write(batch)

    async def flush(self) -> None:
        with translated(self._reason):
            await self._r.flush()

    async def flush_with_options(self, options: Any) -> None:
        if not isinstance(options, FlushOptions):
            raise Error.Invalid("flush_with_options takes FlushOptions(flush_type=FlushType.WAL or MEM_TABLE)")
        if not isinstance(options.flush_type, FlushType):  # the official's enum check: ValueError
            raise ValueError(f"FlushOptions.flush_type must be FlushType.WAL or MEM_TABLE, not {options.flush_type!r}")
        with translated(self._reason):
            await self._r.flush(wal=options.flush_type is FlushType.WAL)

    async def snapshot(self) -> DbSnapshot:
        with translated(self._reason):
            return DbSnapshot(self._r.snapshot(), self)

    async def begin(self, isolation_level: Any) -> DbTransaction:
        if not isinstance(isolation_level, IsolationLevel):
            raise ValueError(f"isolation_level must be an IsolationLevel, not {isolation_level!r}")  # as the official
        with translated(self._reason):
            txn = await self._r.begin(isolation_level.name)
        return DbTransaction(txn, self, _txn_id(self._r))

    def status(self) -> DbStatus:
        st = self._r.status()
        reason = None if st.close_reason is None else _REASONS[st.close_reason]
        return DbStatus(durable_seq=st.durable_seq, close_reason=reason, segments=[])

    def _refuse_shut_again(self) -> None:
        """As the official: once shut down cleanly, another shutdown is ``Error.Closed(CLEAN)``
        (a fenced or failed database's shutdowns stay quiet there, and here)."""
        if self._reason() is CloseReason.CLEAN:
            raise Error.Closed(CloseReason.CLEAN, "Closed error: db is closed")

    async def shutdown(self) -> None:
        self._refuse_shut_again()
        with translated(self._reason):
            await self._r.close()

    async def shutdown_with_options(self, options: Any) -> None:
        ft = getattr(options, "flush_type", None)
        if ft is not None and not isinstance(ft, FlushType):
            raise ValueError(f"CloseOptions.flush_type must be a FlushType or None, not {ft!r}")  # as the official
        self._refuse_shut_again()
        with translated(self._reason):
            if ft is FlushType.MEM_TABLE:
                await self._r.flush(wal=False)
            await self._r.close()

    async def warm_sst(self, sst_id: Any, targets: list) -> None:
        """Reads the data blocks of ``CacheTarget.DATA(range)`` targets into the block cache
        (:mod:`slatedb.uniffi.cache`)."""
        await _cache.warm_sst(self._r, sst_id, targets, self._reason)

    async def evict_cached_sst(self, sst_id: Any) -> None:
        await _cache.evict_cached_sst(self._r, sst_id, self._reason)

    async def flush_cache_to_disk(self) -> None:
        raise refused("flush_cache_to_disk", "there is no on-disk cache")


def _txn_id(db: aio.Db) -> str:
    """A transaction's id in UUID form (the official shape), from the runtime's ids."""
    return str(db._core.runtime.new_uuid())


class DbBuilder(SharedBuilderCalls):
    """Opens a database at ``path`` in ``object_store`` (``await builder.build()``; one build)."""

    def __init__(self, path: str, object_store: ObjectStore) -> None:
        if not isinstance(object_store, ObjectStore):
            raise TypeError(f"object_store must be an ObjectStore, not {type(object_store).__name__}")
        self._url = object_store.url_of(path)
        self._options = object_store.options
        self._settings = Settings.default()
        self._merge: MergeOperator | None = None
        self._built = False

    def with_settings(self, settings: Settings) -> None:
        if not isinstance(settings, Settings):
            raise TypeError(f"settings must be a Settings, not {type(settings).__name__}")
        self._settings = settings

    def with_sst_block_size(self, sst_block_size: Any) -> None:
        if not isinstance(sst_block_size, SstBlockSize):
            raise TypeError(f"sst_block_size must be an SstBlockSize, not {type(sst_block_size).__name__}")
        self._block = 1024 << sst_block_size.value

    def with_seed(self, seed: int) -> None:
        raise refused("with_seed", "ids and jitter come from the production runtime")

    def _our_settings(self) -> Any:
        s = self._settings.settings
        if getattr(self, "_block", None) is not None:
            s = attrs.evolve(s, block_size_bytes=self._block)
        if getattr(self, "_no_cache", False):
            s = attrs.evolve(s, block_cache_size_bytes=0)
        return s

    async def build(self) -> Db:
        if self._built:
            raise Error.Invalid("this DbBuilder was already built")
        self._built = True
        op = None if self._merge is None else _OperatorCall(self._merge)
        with translated():
            db = await aio.Db.open(self._url, self._our_settings(), store_options=self._options or None,
                                   merge_operator=op)
        out = Db(db, self._merge)
        recorder = getattr(self, "_recorder", None)
        if recorder is not None:
            recorder.bind(db)
        return out


__all__ = ["Db", "DbBuilder", "DbIterator", "DbSnapshot", "DbTransaction", "MergeOperator",
           "MergeOperatorCallbackError", "WriteBatch", "WriteHandle", "InvalidArgumentError"]
