"""The manifest's ``sequence_tracker``: sequence number <-> timestamp pairs (RFC 0012).

Byte layout (SlateDB's ``seq_tracker.rs``, serialization version 1)::

    u8 version (1) | u32 LE count | gorilla(sequence numbers) | gorilla(timestamps, Unix seconds)

``gorilla(values)`` is a big-endian bit stream (most significant bit of each byte first), padded
with zero bits to a whole byte: a 32-bit count, then (count > 0) the first value in 64 bits, then
for each further value its delta-of-delta ``dod`` (delta minus the previous delta, the first
previous delta being 0) as ``0`` (dod 0), ``10`` + 7 bits (|dod| <= 63), ``110`` + 9 bits
(<= 255), ``1110`` + 12 bits (<= 2047) or ``1111`` + 32 bits, two's complement, sign-extended on
reading. Sequence numbers are u64 cast to i64 and back.

Lookups (``find_seq`` / ``find_ts``) are a binary search over the sorted pairs: an exact match
answers; otherwise ``round_up`` takes the next higher entry, else the next lower one; None when
there is none (or the tracker is empty). The writer side (:meth:`SequenceTracker.insert`) keeps
one pair per ``interval_s`` and halves the pairs (every other one kept) past ``capacity``.
"""

from __future__ import annotations

from bisect import bisect_left

import attrs

from slatedb.errors import CorruptionError

VERSION = 1
DEFAULT_CAPACITY = 8192
DEFAULT_INTERVAL_S = 60
_MASK64 = (1 << 64) - 1


class _Malformed(Exception):
    pass


class _Bits:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0  # bit position

    def read(self, n: int) -> int:
        pos = self.pos
        end = pos + n
        if end > len(self.data) * 8:
            raise _Malformed(f"unexpected end of the bit stream reading {n} bits at bit {pos}")
        # bits pos..end-1, most significant first: the bytes holding them as one big-endian
        # integer, shifted and masked (the value a bit-by-bit loop builds)
        first = pos >> 3
        last = (end + 7) >> 3
        v = int.from_bytes(self.data[first:last], "big") >> ((last << 3) - end)
        self.pos = end
        return v & ((1 << n) - 1)


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v & (1 << (bits - 1)) else v


def _to_i64(v: int) -> int:
    v &= _MASK64
    return v - (1 << 64) if v >> 63 else v


def _decode_gorilla(data: bytes) -> tuple[int, list[int]]:
    """(bytes consumed, values as i64)."""
    r = _Bits(data)
    count = r.read(32)
    values: list[int] = []
    if count:
        prev = _to_i64(r.read(64))
        values.append(prev)
        prev_delta = 0
        for _ in range(count - 1):
            if not r.read(1):
                dod = 0
            else:
                ones = 1
                while ones < 4 and r.read(1):
                    ones += 1
                bits = (0, 7, 9, 12, 32)[ones]
                dod = _signed(r.read(bits), bits)
            prev_delta = _to_i64(prev_delta + dod)
            prev = _to_i64(prev + prev_delta)
            values.append(prev)
    return (r.pos + 7) // 8, values


class _Writer:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def push(self, value: int, n: int) -> None:
        self.bits.extend((value >> i) & 1 for i in range(n - 1, -1, -1))

    def finish(self) -> bytes:
        bits = self.bits + [0] * (-len(self.bits) % 8)
        return bytes(int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8))


def _encode_gorilla(values: list[int]) -> bytes:
    w = _Writer()
    w.push(len(values), 32)
    if values:
        w.push(values[0] & _MASK64, 64)
        prev, prev_delta = values[0], 0
        for v in values[1:]:
            delta = v - prev
            dod = delta - prev_delta
            if dod == 0:
                w.push(0, 1)
            elif -63 <= dod <= 63:
                w.push(0b10, 2), w.push(dod & 0x7F, 7)
            elif -255 <= dod <= 255:
                w.push(0b110, 3), w.push(dod & 0x1FF, 9)
            elif -2047 <= dod <= 2047:
                w.push(0b1110, 4), w.push(dod & 0xFFF, 12)
            else:
                w.push(0b1111, 4), w.push(dod & 0xFFFFFFFF, 32)
            prev, prev_delta = v, delta
    return w.finish()


@attrs.frozen
class SequenceTracker:
    """Sorted ``seqs`` and ``timestamps_s`` (Unix seconds), pairwise."""

    seqs: tuple[int, ...] = ()
    timestamps_s: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.seqs)

    def find_seq(self, timestamp_s: int, round_up: bool) -> int | None:
        """The sequence number recorded at ``timestamp_s``, else the next later (``round_up``)
        or earlier entry's; None when there is none."""
        return _find(self.timestamps_s, self.seqs, timestamp_s, round_up)

    def find_ts(self, seq: int, round_up: bool) -> int | None:
        """The timestamp (Unix seconds) recorded for ``seq``, else the next higher
        (``round_up``) or lower entry's; None when there is none."""
        return _find(self.seqs, self.timestamps_s, seq, round_up)

    def insert(self, seq: int, timestamp_s: int, last_recorded_s: int | None,
               interval_s: int = DEFAULT_INTERVAL_S, capacity: int = DEFAULT_CAPACITY) -> SequenceTracker:
        """With ``(seq, timestamp_s)`` appended unless fewer than ``interval_s`` seconds passed
        since ``last_recorded_s``; halved past ``capacity`` (as upstream)."""
        if last_recorded_s is not None and timestamp_s - last_recorded_s < interval_s:
            return self
        if self.seqs and (seq < self.seqs[-1] or timestamp_s < self.timestamps_s[-1]):
            return self  # never out of order (upstream asserts; a skewed clock is skipped here)
        seqs, ts = self.seqs + (seq,), self.timestamps_s + (timestamp_s,)
        if len(seqs) > capacity:
            seqs, ts = seqs[::2], ts[::2]
        return SequenceTracker(seqs, ts)

    def encode(self) -> bytes:
        return (bytes([VERSION]) + len(self.seqs).to_bytes(4, "little")
                + _encode_gorilla([_to_i64(s) for s in self.seqs]) + _encode_gorilla(list(self.timestamps_s)))


def order_problem(t: SequenceTracker, last_l0_seq: int) -> str | None:
    """TRACK-1 (spec/protocols/writer.md): pairs in order, sequence numbers and timestamps both
    non-decreasing, none above the manifest's ``last_l0_seq``; the problem, or None."""
    for i in range(1, len(t.seqs)):
        if t.seqs[i] < t.seqs[i - 1] or t.timestamps_s[i] < t.timestamps_s[i - 1]:
            return (f"pair {i} ({t.seqs[i]}, {t.timestamps_s[i]} s) is below pair {i - 1} "
                    f"({t.seqs[i - 1]}, {t.timestamps_s[i - 1]} s)")
    if t.seqs and t.seqs[-1] > last_l0_seq:
        return f"tracked seq {t.seqs[-1]} is above last_l0_seq {last_l0_seq}"
    return None


def successor_problem(prev: SequenceTracker, new: SequenceTracker,
                      capacity: int = DEFAULT_CAPACITY) -> str | None:
    """TRACK-2: a later manifest's tracker keeps every pair of an earlier one (pairs are only
    appended), except that once it reaches ``capacity`` it keeps every other pair, the oldest
    first; the problem, or None."""
    old = list(zip(prev.seqs, prev.timestamps_s))
    now = list(zip(new.seqs, new.timestamps_s))
    if now[:len(old)] == old:
        return None
    halved = old[::2]
    while len(old) > capacity // 2 and (len(now) < len(halved) or now[:len(halved)] != halved):
        if len(halved) <= 1:
            break
        halved = halved[::2]  # several halvings between the two manifests
    else:
        if len(old) > capacity // 2:
            return None
    lost = [p for p in old if p not in now]
    return (f"{len(lost)} of the earlier tracker's {len(old)} pairs are gone (first {lost[0] if lost else None}) "
            f"although it holds {len(now)} now")


def _find(keys: tuple[int, ...], values: tuple[int, ...], key: int, round_up: bool) -> int | None:
    if not keys:
        return None
    i = bisect_left(keys, key)
    if i < len(keys) and keys[i] == key:
        return values[i]
    if round_up:
        return values[i] if i < len(keys) else None
    return values[i - 1] if i > 0 else None


def decode(data: bytes | None, object_name: str) -> SequenceTracker:
    """The tracker in ``data`` (None or empty: an empty tracker, as a manifest without one);
    :class:`CorruptionError` naming ``object_name`` when the bytes do not decode."""
    if not data:
        return SequenceTracker()
    try:
        if data[0] != VERSION:
            raise _Malformed(f"unsupported version {data[0]}")
        if len(data) < 5:
            raise _Malformed("too short for the entry count")
        count = int.from_bytes(data[1:5], "little")
        used, seqs = _decode_gorilla(data[5:])
        if len(seqs) != count:
            raise _Malformed(f"{count} entries announced, {len(seqs)} sequence numbers")
        _, ts = _decode_gorilla(data[5 + used:])
        if len(ts) != count:
            raise _Malformed(f"{count} entries announced, {len(ts)} timestamps")
    except _Malformed as e:
        raise CorruptionError(object_name, None, f"sequence_tracker: {e}") from None
    seqs_u = tuple(s & _MASK64 for s in seqs)
    if any(a > b for a, b in zip(seqs_u, seqs_u[1:])) or any(a > b for a, b in zip(ts, ts[1:])):
        raise CorruptionError(object_name, None, "sequence_tracker: entries not in order")
    return SequenceTracker(seqs_u, tuple(ts))
