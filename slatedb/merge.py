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

Merge operands (spec/protocols/merge.md) are resolved by :func:`resolve_versions`: when the
newest visible version of a key is an operand, the key's versions down to its base are folded
with the merge operator (MERGE-1..4). Without an operator, meeting an operand raises
:class:`~slatedb.errors.MergeOperatorMissingError` naming the key (MERGE-8).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from slatedb.errors import MergeOperatorMissingError
from slatedb.merge_operator import MergeFn, fold
from slatedb.row import Row, RowKind, as_row

_VALUE = RowKind.VALUE
_TOMBSTONE = RowKind.TOMBSTONE
_MERGE = RowKind.MERGE_OPERAND


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


def _merge_operand_error(row: Row) -> MergeOperatorMissingError:
    return MergeOperatorMissingError(
        f"key {row.key!r} seq {row.seq} is a merge operand and no merge operator is configured "
        "(open with merge_operator=...)", row.key)


def resolve_versions(versions: Iterable[Row], op: MergeFn | None, now_ms: int,
                     snapshot_seq: int | None = None) -> Row | None:
    """The row a reader sees for one key, from its versions **newest first** (several sources
    merged; a repeated seq is one version): ``None`` when absent, else a VALUE row.

    MERGE-1: the newest version with ``seq <= snapshot_seq`` decides; when it is an operand, the
    operands down to the key's base are applied oldest first onto the base's value. MERGE-3: a
    tombstone is a base of ``None``. MERGE-4: an expired operand is skipped, an expired value is
    a base of ``None``; the result carries the newest operand's seq, the earliest ``expire_ts``
    and the latest ``create_ts`` of the rows folded.
    """
    operands: list[Row] = []
    base: Row | None = None
    last_seq = -1
    for row in versions:
        seq = row.seq
        if seq == last_seq or (snapshot_seq is not None and seq > snapshot_seq):
            continue
        last_seq = seq
        kind = row.kind
        expire = row.expire_ts_ms
        if kind is _MERGE:
            if expire is None or expire > now_ms:
                operands.append(row)
            continue
        if kind is _VALUE and (expire is None or expire > now_ms):
            base = row
        break
    if not operands:
        return base
    if op is None:
        raise _merge_operand_error(operands[0])
    first = operands[0]
    folded = operands if base is None else operands + [base]
    expires = [r.expire_ts_ms for r in folded if r.expire_ts_ms is not None]
    creates = [r.create_ts_ms for r in folded if r.create_ts_ms is not None]
    value = fold(op, first.key, None if base is None else base.value, [r.value for r in reversed(operands)])
    return Row(first.key, first.seq, _VALUE, value, min(expires) if expires else None,
               max(creates) if creates else None)


def visible(rows: Iterable[Row], *, snapshot_seq: int | None = None, now_ms: int,
            op: MergeFn | None = None) -> Iterator[tuple[bytes, bytes]]:
    """The ``(key, value)`` pairs a reader sees in a merged stream (any of the two orders).

    For each key the first row with ``seq <= snapshot_seq`` (any seq when None) decides:
    a value that is not expired at ``now_ms`` is yielded; a tombstone or an expired value hides
    the key (older versions are not consulted); a merge operand is folded with the key's older
    rows of the stream (:func:`resolve_versions`, the stream being newest first per key).
    """
    last_key: bytes | None = None
    group: list[Row] | None = None  # the rows of a key whose newest visible row is an operand
    # Fields by position and kinds by ==: ``rows`` may be a memtable's plain rows (slatedb.row.as_row).
    for row in rows:
        key = row[0]
        if key == last_key:
            if group is not None:
                group.append(as_row(row))
            continue
        if group is not None:
            got = resolve_versions(group, op, now_ms, snapshot_seq)
            group = None
            if got is not None:
                yield (got.key, got.value)
        if snapshot_seq is not None and row[1] > snapshot_seq:
            continue
        last_key = key
        kind = row[2]
        if kind == _VALUE:
            expire = row[4]
            if expire is None or expire > now_ms:
                yield (key, row[3])
        elif kind == _MERGE:
            group = [as_row(row)]
    if group is not None:
        got = resolve_versions(group, op, now_ms, snapshot_seq)
        if got is not None:
            yield (got.key, got.value)


def resolve_row(row: Row | None, now_ms: int) -> bytes | None:
    """The value a reader sees in ``row`` (the newest visible version of its key): ``None`` for
    no row, a tombstone or an expired row."""
    if row is None:
        return None
    kind = row[2]  # by position and ==: ``row`` may be a memtable's plain row (slatedb.row.as_row)
    if kind == _VALUE:
        expire = row[4]
        return row[3] if expire is None or expire > now_ms else None
    if kind == _TOMBSTONE:
        return None
    raise _merge_operand_error(as_row(row))
