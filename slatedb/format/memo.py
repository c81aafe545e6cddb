"""Decoded values of the objects this process just encoded, by their bytes (switched on per run).

Decoding a manifest or a ``.compactions`` file is a pure function of its bytes, and decoding
what the encoder wrote gives back the value it was given (``decode(encode(v)) == v``: the format
tests' round trips). So a decode of bytes this process encoded itself may return that value
instead of parsing the FlatBuffers again. A simulated world does exactly that all the time:
every manifest a process commits is decoded at once by the world's checkers, then by every
process polling the latest manifest -- the one full decode of each manifest was 5-9 % of a db,
takeover or compactor seed (issue 27 item 2).

Off by default: production and the format's own tests parse every object they read (a test of
``decode(encode(v))`` must exercise the decoder). The simulator switches it on for the length of a
run (:func:`remembering`, in :func:`sim.world.harness.run_world`); a bit flip changes the bytes,
so a corrupted object is always parsed (and refused) as stored. The same switch lets the
encoders copy the bytes of a part they built before (:func:`slatedb.format.fbbuild.build_cached`:
the same bytes, built once).

The same holds for bytes a decoder already parsed once in the run: an SST's ``SsTableInfo`` and a
whole WAL SST are immutable objects, and their decoders remember what they gave (kinds
``sst_info`` and ``wal_sst``, the last :data:`MAX_DECODED`): every open of an SST (GC, readers,
the compactor, the checkers) decodes its metadata, and every reader and replay decodes the same
WAL objects -- seven in ten of those decodes in a gc world were of bytes decoded before. The
same for an SST's data blocks (kind ``block``, :func:`slatedb.format.sst.decode_data_block`):
the compactor, the readers and the checkers read the same blocks.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

#: How many encoded values of each kind are kept (the newest: what is read back is what was just written).
MAX_REMEMBERED = 64
#: How many decoded SST infos and WAL SSTs are kept (the newest; a world's SSTs are read again and
#: again while they live).
MAX_DECODED = 1024

_memo: dict[str, dict[bytes, Any]] | None = None


@contextlib.contextmanager
def remembering() -> Iterator[None]:
    """Within the block, :func:`remember` keeps values and :func:`recall` returns them."""
    global _memo
    previous, _memo = _memo, {}
    try:
        yield
    finally:
        _memo = previous
        if previous is None:
            for forget in _AT_END:
                forget()


#: Called when the outermost :func:`remembering` block ends (caches kept for its length only).
_AT_END: list[Callable[[], None]] = []


def active() -> bool:
    """Inside :func:`remembering` (a simulated run): encoders may also reuse the bytes of parts
    they built before (:func:`slatedb.format.fbbuild.build_cached`)."""
    return _memo is not None


def remember(kind: str, data: bytes, value: Any, keep: int = MAX_REMEMBERED) -> None:
    """``value`` is what decoding ``data`` (an object of ``kind``) gives; the newest ``keep``
    of the kind are kept."""
    if _memo is None:
        return
    memo = _memo.setdefault(kind, {})
    memo[data] = value
    if len(memo) > keep:
        try:
            del memo[next(iter(memo))]
        except (KeyError, RuntimeError, StopIteration):  # another thread evicted it first
            pass


def recall(kind: str, data: bytes) -> Any:
    """The value :func:`remember` kept for ``data``, or None."""
    memo = _memo
    if memo is None:
        return None
    of_kind = memo.get(kind)
    return None if of_kind is None else of_kind.get(data)
