"""The SST bloom filter and the composite filter block that carries it.

Bit-exact with SlateDB 0.17 so that either engine can use the other's filters:

* hash: SipHash-1-3 with key (0, 0) over the key bytes, as a u64 (little-endian digest);
* ``m = ceil(n * bits_per_key / 8) * 8`` bits for ``n`` rows (one hash per row);
* ``k = floor(f32(bits_per_key) * f32(0.69))`` probes (Rust computes it in f32);
* probes by enhanced double hashing: ``h = low32 % m``, ``d = high32 % m``; for ``i`` in
  ``0..k``: ``d = (d + i) % m``, use bit ``h``, ``h = (h + d) % m``;
* bit ``p`` is ``byte[p // 8] & (1 << (p % 8))``;
* encoding: ``u16 num_probes (BE) | bitset``.

The composite filter block (``FilterFormat.COMPOSITE``) wraps named filters:
``u16 n | n x (u16 name_len | name | u64 data_len | data)``; the bloom filter is ``"_bf"``.
"""

from __future__ import annotations

import struct

import siphash24

from slatedb.errors import CorruptionError, InvalidArgumentError

BLOOM_FILTER_NAME = b"_bf"
DEFAULT_BITS_PER_KEY = 10
DEFAULT_MIN_FILTER_KEYS = 1000

_ZERO_KEY = bytes(16)
_MASK64 = 0xFFFFFFFFFFFFFFFF
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_F32 = struct.Struct("<f")
_siphash13 = siphash24.siphash13


def filter_hash(key: bytes) -> int:
    """SipHash-1-3, key (0, 0), of ``key``: the u64 every probe derives from."""
    return _siphash13(key, key=_ZERO_KEY).intdigest() & _MASK64


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def num_probes_for(bits_per_key: int) -> int:
    """``(bits_per_key as f32 * 0.69) as u16``, emulating Rust's f32 arithmetic."""
    return int(_f32(_f32(float(bits_per_key)) * _f32(0.69)))


def probes(key_hash: int, num_probes: int, filter_bits: int) -> list[int]:
    """The bit positions probed for ``key_hash`` (see the module docstring)."""
    h = (key_hash & 0xFFFFFFFF) % filter_bits
    delta = (key_hash >> 32) % filter_bits
    out = []
    for i in range(num_probes):
        delta = (delta + i) % filter_bits
        out.append(h)
        h = (h + delta) % filter_bits
    return out


class BloomFilter:
    """A decoded bloom filter: ``num_probes`` and the bitset."""

    __slots__ = ("num_probes", "bits", "filter_bits")

    def __init__(self, num_probes: int, bits: bytes) -> None:
        self.num_probes = num_probes
        self.bits = bits
        self.filter_bits = len(bits) * 8

    @classmethod
    def build(cls, key_hashes: list[int], bits_per_key: int = DEFAULT_BITS_PER_KEY) -> BloomFilter:
        """A filter over ``key_hashes`` (one per row, duplicates allowed, as the official builder)."""
        if bits_per_key <= 0:
            raise InvalidArgumentError(f"bloom bits per key must be positive, got {bits_per_key}")
        num_probes = num_probes_for(bits_per_key)
        filter_bytes = (len(key_hashes) * bits_per_key + 7) // 8
        filter_bits = filter_bytes * 8
        buf = bytearray(filter_bytes)
        if filter_bits:
            for key_hash in key_hashes:
                # Inlined probes(): building is on the flush path.
                h = (key_hash & 0xFFFFFFFF) % filter_bits
                delta = (key_hash >> 32) % filter_bits
                for i in range(num_probes):
                    delta = (delta + i) % filter_bits
                    buf[h >> 3] |= 1 << (h & 7)
                    h = (h + delta) % filter_bits
        return cls(num_probes, bytes(buf))

    def might_contain_hash(self, key_hash: int) -> bool:
        filter_bits = self.filter_bits
        if filter_bits <= self.num_probes:
            return self._might_contain_mod(key_hash)
        bits = self.bits
        h = (key_hash & 0xFFFFFFFF) % filter_bits
        delta = (key_hash >> 32) % filter_bits
        for i in range(self.num_probes):
            if not bits[h >> 3] >> (h & 7) & 1:
                return False
            # (delta + i) % m and (h + delta) % m: each sum is below 2m (i < num_probes < m),
            # so one subtraction is the modulo.
            delta += i
            if delta >= filter_bits:
                delta -= filter_bits
            h += delta
            if h >= filter_bits:
                h -= filter_bits
        return True

    def _might_contain_mod(self, key_hash: int) -> bool:
        """:meth:`might_contain_hash` for a bitset of no more bits than probes (the probe rule
        as the module docstring states it)."""
        filter_bits = self.filter_bits
        if filter_bits == 0:
            return True  # an empty bitset proves nothing; never say "absent" wrongly
        bits = self.bits
        h = (key_hash & 0xFFFFFFFF) % filter_bits
        delta = (key_hash >> 32) % filter_bits
        for i in range(self.num_probes):
            delta = (delta + i) % filter_bits
            if not bits[h >> 3] & (1 << (h & 7)):
                return False
            h = (h + delta) % filter_bits
        return True

    def might_contain(self, key: bytes) -> bool:
        """False only when ``key`` is certainly absent (:meth:`might_contain_hash` of its
        :func:`filter_hash`, in one frame: a cold point lookup asks it once per SST)."""
        filter_bits = self.filter_bits
        key_hash = _siphash13(key, key=_ZERO_KEY).intdigest() & _MASK64
        if filter_bits <= self.num_probes:
            return self._might_contain_mod(key_hash)
        bits = self.bits
        h = (key_hash & 0xFFFFFFFF) % filter_bits
        delta = (key_hash >> 32) % filter_bits
        for i in range(self.num_probes):
            if not bits[h >> 3] >> (h & 7) & 1:
                return False
            delta += i
            if delta >= filter_bits:
                delta -= filter_bits
            h += delta
            if h >= filter_bits:
                h -= filter_bits
        return True

    def encode(self) -> bytes:
        return _U16.pack(self.num_probes) + self.bits

    @classmethod
    def decode(cls, data: bytes, object_name: str, offset: int) -> BloomFilter:
        if len(data) < 2:
            raise CorruptionError(object_name, offset, "bloom filter shorter than its probe count")
        (num_probes,) = _U16.unpack_from(data, 0)
        return cls(num_probes, bytes(data[2:]))


def encode_composite_filter(filters: list[tuple[bytes, bytes]]) -> bytes:
    """The composite filter block content for named filters ``[(name, data), ...]``."""
    out = bytearray(_U16.pack(len(filters)))
    for name, data in filters:
        out += _U16.pack(len(name))
        out += name
        out += _U64.pack(len(data))
        out += data
    return bytes(out)


def decode_composite_filter(data: bytes, object_name: str, offset: int) -> dict[bytes, bytes]:
    """Named filters of a composite filter block; ``offset`` locates the block in errors."""
    try:
        (count,) = _U16.unpack_from(data, 0)
        pos = 2
        out: dict[bytes, bytes] = {}
        for _ in range(count):
            (name_len,) = _U16.unpack_from(data, pos)
            pos += 2
            if pos + name_len > len(data):
                raise ValueError("filter name runs past the block")
            name = bytes(data[pos : pos + name_len])
            pos += name_len
            (data_len,) = _U64.unpack_from(data, pos)
            pos += 8
            if pos + data_len > len(data):
                raise ValueError("filter data runs past the block")
            out[name] = bytes(data[pos : pos + data_len])
            pos += data_len
        if pos != len(data):
            raise ValueError(f"{len(data) - pos} trailing bytes after the filters")
    except (ValueError, struct.error) as exc:
        raise CorruptionError(object_name, offset, f"bad composite filter block: {exc}") from None
    return out


def decode_filter_block(
    data: bytes, filter_format: int, object_name: str, offset: int
) -> BloomFilter | None:
    """The bloom filter in a filter block (``None`` when a composite block has no ``_bf``)."""
    if filter_format == 1:  # FilterFormat.COMPOSITE
        named = decode_composite_filter(data, object_name, offset)
        bf = named.get(BLOOM_FILTER_NAME)
        return None if bf is None else BloomFilter.decode(bf, object_name, offset)
    if filter_format == 0:  # FilterFormat.LEGACY: a bare bloom filter
        return BloomFilter.decode(data, object_name, offset)
    raise CorruptionError(object_name, offset, f"unknown filter format {filter_format}")
