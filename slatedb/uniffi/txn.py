"""``DbTransaction`` with the official signatures over :class:`slatedb.api.txn.AsyncTransaction`."""

from __future__ import annotations

from typing import Any

import slatedb.uniffi.convert as convert
from slatedb.uniffi.errors import refused, translated
from slatedb.uniffi.handles import DbIterator, WriteHandle, _key, _keys, _local_seq
from slatedb.uniffi.values import KeyValue


class DbTransaction:
    """A transaction (``await db.begin(IsolationLevel...)``); unusable after commit or rollback."""

    def __init__(self, txn: Any, db: "Db", tid: str) -> None:
        self._t = txn
        self._db = db
        self._id = tid

    def id(self) -> str:
        return self._id

    def seqnum(self) -> int:
        return self._t.seqnum

    async def put(self, key: bytes, value: bytes) -> None:
        with translated(self._db._reason):
            await self._t.put(_key(key), _key(value, "value"))

    async def put_with_options(self, key: bytes, value: bytes, options: Any) -> None:
        ttl, at = convert.ttl_args(options, "put")
        if at is not None:
            raise refused("Ttl.EXPIRE_AT_MILLIS in a transaction", "use EXPIRE_AFTER_MILLIS")
        with translated(self._db._reason):
            await self._t.put(_key(key), _key(value, "value"), ttl)

    async def delete(self, key: bytes) -> None:
        with translated(self._db._reason):
            await self._t.delete(_key(key))

    async def merge(self, key: bytes, operand: bytes) -> None:
        with translated(self._db._reason):
            await self._t.merge(_key(key), _key(operand, "operand"))

    async def merge_with_options(self, key: bytes, operand: bytes, options: Any) -> None:
        ttl, at = convert.ttl_args(options, "merge")
        if at is not None:
            raise refused("Ttl.EXPIRE_AT_MILLIS in a transaction", "use EXPIRE_AFTER_MILLIS")
        with translated(self._db._reason):
            await self._t.merge(_key(key), _key(operand, "operand"), ttl)

    async def mark_read(self, keys: list) -> None:
        with translated(self._db._reason):
            await self._t.mark_read(_keys(keys))

    async def unmark_write(self, keys: list) -> None:
        with translated(self._db._reason):
            await self._t.unmark_write(_keys(keys))

    async def get(self, key: bytes) -> bytes | None:
        with translated(self._db._reason):
            return await self._t.get(_key(key))

    async def get_with_options(self, key: bytes, options: Any) -> bytes | None:
        self._default_read(options)
        return await self.get(key)

    async def get_key_value(self, key: bytes) -> KeyValue | None:
        with translated(self._db._reason):
            return _local_seq(convert.key_value(await self._t.get_key_value(_key(key))))

    async def get_key_value_with_options(self, key: bytes, options: Any) -> KeyValue | None:
        self._default_read(options)
        return await self.get_key_value(key)

    @staticmethod
    def _default_read(options: Any) -> None:
        o = convert.read_options(options)
        if o.durability_filter.name != "MEMORY":
            raise refused("durability_filter=REMOTE in a transaction", "a transaction reads its own snapshot")

    async def _scan(self, bounds: Any, options: Any) -> DbIterator:
        reverse = False
        if options is not None:
            o = convert.scan_options(options)
            if o.durability_filter.name != "MEMORY":
                raise refused("durability_filter=REMOTE in a transaction", "a transaction reads its own snapshot")
            reverse = o.order.name == "DESCENDING"
        start, end = convert.half_open(bounds)
        if start is not None and end is not None and start >= end:
            return DbIterator([], None, bounds, reverse)
        rows = await self._t.scan(start, end, reverse=reverse)
        t = self._t

        async def meta(key: bytes, value: bytes) -> KeyValue:
            kv = _local_seq(convert.key_value(await t.get_key_value(key)))
            if kv is None:
                return KeyValue(key=key, value=value, seq=0, create_ts=0, expire_ts=None)
            return KeyValue(key=key, value=value, seq=kv.seq, create_ts=kv.create_ts, expire_ts=kv.expire_ts)
        return DbIterator(list(rows), meta, bounds, reverse)

    async def scan(self, range: Any) -> DbIterator:
        with translated(self._db._reason):
            return await self._scan(convert.bounds_of(range), None)

    async def scan_with_options(self, range: Any, options: Any) -> DbIterator:
        with translated(self._db._reason):
            return await self._scan(convert.bounds_of(range), options)

    async def scan_prefix(self, prefix: bytes, subrange: Any) -> DbIterator:
        with translated(self._db._reason):
            return await self._scan(convert.bounds_of(subrange, _key(prefix, "prefix")), None)

    async def scan_prefix_with_options(self, prefix: bytes, subrange: Any, options: Any) -> DbIterator:
        with translated(self._db._reason):
            return await self._scan(convert.bounds_of(subrange, _key(prefix, "prefix")), options)

    async def commit(self) -> WriteHandle | None:
        t = self._t._t
        if not t.done and not t.writes and not t.merges and self._t._db._core.closed:
            # The official binding returns None for a transaction that wrote nothing, closed
            # database or not (ours raises ClosedError there, as any call after close()).
            await self._t.rollback()
            return None
        with translated(self._db._reason):
            h = await self._t.commit()
            return None if h is None else self._db._handle(h, None)

    async def commit_with_options(self, options: Any) -> WriteHandle | None:
        convert.check_write_options(options)
        return await self.commit()

    async def rollback(self) -> None:
        with translated(self._db._reason):
            await self._t.rollback()
