"""A bounded LRU cache of decoded data blocks, weighted by bytes.

Shared by every SST reader of a database, keyed ``(sst id, block index)``. Lookups happen on
the caller's thread (the synchronous fast path of ``get``), inserts on the runtime thread after
a block read, hence the lock around inserts and removals (each holds it for a dictionary access or
two); a lookup takes no lock (see :meth:`BlockCache.get`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from slatedb.format.block import Block

#: Bytes charged per entry on top of the block's decoded size (key tuple, dict slot, Row objects).
ENTRY_OVERHEAD_BYTES = 128


def _weight(value: Block | bytes) -> int:
    return (len(value) if type(value) is bytes else value.size_bytes) + ENTRY_OVERHEAD_BYTES


class BlockCache:
    """LRU over decoded :class:`Block` objects (and framed bytes read ahead, not yet decoded)
    holding at most ``capacity_bytes`` (estimated)."""

    def __init__(self, capacity_bytes: int) -> None:
        assert capacity_bytes > 0, capacity_bytes
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[Any, Block | bytes] = OrderedDict()
        self._size_bytes = 0
        self._lock = threading.Lock()  # held by writers of the cache; ``get`` needs none

    def get(self, key: Any, default: Block | None = None) -> Block | None:
        # No lock: ``get`` and ``move_to_end`` are each one C call on the OrderedDict (atomic
        # under the GIL); an insert's eviction may remove the key between the two, which only
        # means there is nothing to move.
        entries = self._entries
        block = entries.get(key)
        if block is None:
            return default
        try:
            entries.move_to_end(key)
        except KeyError:
            pass
        return block

    def c_lookups(self) -> tuple[Any, Any]:
        """``(lookup, touch)``: :meth:`get` as its two C calls, for a reader's hot path
        (``lookup(key)`` is the entry or None; ``touch(key)`` marks it recently used and may
        raise KeyError when an insert evicted it meanwhile, which the caller ignores)."""
        return self._entries.get, self._entries.move_to_end

    def add_absent(self, items: list[tuple[Any, Block | bytes]]) -> None:
        """Insert each ``(key, value)`` whose key is not cached, under one hold of the lock
        (blocks read ahead)."""
        capacity = self.capacity_bytes
        entries = self._entries
        with self._lock:
            for key, value in items:
                weight = _weight(value)
                if weight > capacity or key in entries:
                    continue
                entries[key] = value
                self._size_bytes += weight
            while self._size_bytes > capacity:
                _, evicted = entries.popitem(last=False)
                self._size_bytes -= _weight(evicted)
            assert self._size_bytes >= 0

    def __setitem__(self, key: Any, block: Block | bytes) -> None:
        # _weight inlined: a cold point lookup inserts a block on each get.
        weight = (len(block) if type(block) is bytes else block.size_bytes) + ENTRY_OVERHEAD_BYTES
        capacity = self.capacity_bytes
        if weight > capacity:
            return  # never cache what would evict everything else
        entries = self._entries
        with self._lock:
            old = entries.pop(key, None)
            if old is not None:
                self._size_bytes -= _weight(old)
            entries[key] = block
            size = self._size_bytes + weight
            while size > capacity:
                _, evicted = entries.popitem(last=False)
                size -= (len(evicted) if type(evicted) is bytes else evicted.size_bytes) + ENTRY_OVERHEAD_BYTES
            assert size >= 0
            self._size_bytes = size

    def discard_all(self, keys: Any) -> int:
        """Drop the entries of ``keys`` that are cached; how many there were."""
        dropped = 0
        with self._lock:
            for key in keys:
                old = self._entries.pop(key, None)
                if old is not None:
                    self._size_bytes -= _weight(old)
                    dropped += 1
        return dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._size_bytes = 0

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._size_bytes
