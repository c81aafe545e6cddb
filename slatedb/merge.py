"""The read path's merge: several sorted row streams into one, then what a reader may see.

Sources are given in *read order*: the live memtable, the immutable memtables newest first, the
L0 SSTs newest first, then the sorted runs newest first. A row stream is ordered by
``(key asc, seq desc)`` for a forward scan and ``(key desc, seq desc)`` for a reverse scan.

* :func:`merge_rows` merges such streams into one stream of the same order. When two sources
  hold the same ``(key, seq)`` the earlier source's row comes first (the merge is stable).
* :func:`visible` turns a merged stream into the ``(key, value)`` pairs a reader sees at a
  snapshot: per key the newest row with ``seq <= snapshot_seq``; a tombstone hides the key; an
  expired row (``expire_ts_ms <= now_ms``) hides it too. Unlike the official engine, which
  returns expired rows it still holds (in the memtable, and as observed by the interop tests
  also in L0 SSTs: it seems to compare against the newest timestamp it has seen rather than
  the wall clock), we never return an expired row.
* :func:`point_lookup` is the same rule for one key, consulting sources lazily, newest first.

Merge operands are not resolved here yet (no merge operator): meeting one raises
:class:`NotImplementedError` rather than returning a wrong value.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from slatedb.row import Row, RowKind

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE


def _forward_order(row: Row) -> tuple[bytes, int]:
    return (row.key, -row.seq)


def _reverse_order(row: Row) -> tuple[bytes, int]:
    return (row.key, row.seq)


def merge_rows(sources: Sequence[Iterable[Row]], *, reverse: bool = False) -> Iterator[Row]:
    """Merge row streams into one (see the module docstring for the orders).

    ``reverse=False``: each source yields ``(key asc, seq desc)``; so does the result.
    ``reverse=True``: each source yields ``(key desc, seq desc)``; so does the result.
    Ties on ``(key, seq)`` keep the order of ``sources``. One source is passed through as is.
    """
    if len(sources) == 1:
        return iter(sources[0])
    if not sources:
        return iter(())
    if reverse:
        # Descending (key, seq) == key desc, then seq desc.
        return heapq.merge(*sources, key=_reverse_order, reverse=True)
    return heapq.merge(*sources, key=_forward_order)


def _merge_operand_error(row: Row) -> NotImplementedError:
    return NotImplementedError(
        f"key {row.key!r} seq {row.seq} is a merge operand; merge operators are not supported yet"
    )


def visible(rows: Iterable[Row], *, snapshot_seq: int | None = None, now_ms: int) -> Iterator[tuple[bytes, bytes]]:
    """The ``(key, value)`` pairs a reader sees in a merged stream (any of the two orders).

    For each key only the first row with ``seq <= snapshot_seq`` (any seq when None) decides:
    a value that is not expired at ``now_ms`` is yielded; a tombstone or an expired value hides
    the key (older versions are not consulted).
    """
    last_key: bytes | None = None
    if snapshot_seq is None:
        for row in rows:
            key = row.key
            if key == last_key:
                continue
            last_key = key
            kind = row.kind
            if kind is _VALUE:
                expire = row.expire_ts_ms
                if expire is None or expire > now_ms:
                    yield (key, row.value)
            elif kind is not _TOMBSTONE:
                raise _merge_operand_error(row)
        return
    for row in rows:
        key = row.key
        if key == last_key or row.seq > snapshot_seq:
            continue
        last_key = key
        kind = row.kind
        if kind is _VALUE:
            expire = row.expire_ts_ms
            if expire is None or expire > now_ms:
                yield (key, row.value)
        elif kind is not _TOMBSTONE:
            raise _merge_operand_error(row)


def resolve_row(row: Row | None, now_ms: int) -> bytes | None:
    """The value a reader sees in ``row`` (the newest visible version of its key): ``None`` for
    no row, a tombstone or an expired row."""
    if row is None:
        return None
    kind = row.kind
    if kind is _VALUE:
        expire = row.expire_ts_ms
        return row.value if expire is None or expire > now_ms else None
    if kind is _TOMBSTONE:
        return None
    raise _merge_operand_error(row)


def point_lookup(
    candidates: Iterable[Row | Sequence[Row] | None],
    *,
    snapshot_seq: int | None = None,
    now_ms: int,
) -> bytes | None:
    """The value of one key, consulting sources in read order and stopping at the first that
    has a version with ``seq <= snapshot_seq``.

    Each candidate is what one source holds for the key: ``None`` (nothing), a :class:`Row`
    (e.g. ``memtable.get(key, max_seq=snapshot_seq)``), or a sequence of the key's rows newest
    first (e.g. the versions found in an SST). Pass a generator to consult sources lazily: the
    sources after the deciding one are never asked. A tombstone or an expired row in the
    deciding source means "absent" (``None``). A single :class:`Row` above the snapshot is
    skipped as if the source had nothing, so a source holding several versions must pass
    either its newest version at or below the snapshot or all its versions.
    """
    for cand in candidates:
        if cand is None:
            continue
        if isinstance(cand, Row):
            if snapshot_seq is None or cand.seq <= snapshot_seq:
                return resolve_row(cand, now_ms)
            continue
        for row in cand:
            if snapshot_seq is None or row.seq <= snapshot_seq:
                return resolve_row(row, now_ms)
    return None
