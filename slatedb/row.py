"""The row: one version of one key, as held in a memtable, a WAL SST or a compacted SST.

Shared by the storage formats (which encode and decode rows) and the database (memtables,
iterators). Kept deliberately small: the hot path creates one per ``put`` and one per decoded
row. That is why it is a ``NamedTuple`` rather than a frozen attrs class, unlike our other value
types: it is just as immutable, and half the cost to create (about 0.3 µs against 0.7 µs), which
was half of block-decode time.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class RowKind(enum.IntEnum):
    """What a row says about its key."""

    VALUE = 0
    TOMBSTONE = 1
    MERGE_OPERAND = 2


class Row(NamedTuple):
    """One version of a key.

    ``seq`` is the sequence number the writer assigned (higher is newer). ``value`` is ``b""``
    for a tombstone. Timestamps are Unix milliseconds; ``expire_ts_ms`` is set for rows written
    with a TTL, ``create_ts_ms`` on every row the engine writes (``None`` when unknown).
    """

    key: bytes
    seq: int
    kind: RowKind
    value: bytes = b""
    expire_ts_ms: int | None = None
    create_ts_ms: int | None = None

    @property
    def is_tombstone(self) -> bool:
        return self.kind is RowKind.TOMBSTONE

    def is_expired(self, now_ms: int) -> bool:
        """True when the row carries an expiry at or before ``now_ms``."""
        return self.expire_ts_ms is not None and self.expire_ts_ms <= now_ms


#: :class:`RowKind` by its int: the kind of a plain row (see :func:`as_row`).
KINDS = (RowKind.VALUE, RowKind.TOMBSTONE, RowKind.MERGE_OPERAND)
_new = tuple.__new__


def as_row(row: tuple) -> Row:
    """The :class:`Row` of a row the write path holds *plainly*: an exact ``tuple`` in Row's field
    order with the kind as a plain ``int`` (a :class:`Row` is returned as it is).

    Why plain rows: the cyclic garbage collector never untracks an instance of a tuple subclass
    (``Row``), nor a tuple holding a :class:`RowKind` member (an object with a ``__dict__``), so
    every row a memtable keeps was walked by each collection of its generation, and by every full
    collection the growing table set off: about a third of a put's CPU on a 100k-row load. A
    plain row holds only bytes, ints and None, so the first young collection untracks it and no
    later collection looks at it. The memtable and the WAL buffer keep what the write path
    appends as plain rows (:meth:`slatedb.db.state.WriterState.append`); the memtable's readers
    get :class:`Row` through this function, the encoders read the fields by position."""
    if type(row) is Row:
        return row
    key, seq, kind, value, expire, create = row
    return _new(Row, (key, seq, KINDS[kind], value, expire, create))
