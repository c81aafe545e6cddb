"""SipHash-1-3 (library choice verified on vectors), bloom probes, composite filter block."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.errors import CorruptionError
from slatedb.format import bloom


def _sip13(data: bytes, key: bytes) -> int:
    import siphash24

    return int.from_bytes(siphash24.siphash13(data, key=key).digest(), "little")


def test_siphash13_reference_vectors():
    # Reference SipHash-1-3 vectors, key 00..0f, message 00..(n-1).
    key = bytes(range(16))
    assert _sip13(b"", key) == 0xABAC0158050FC4DC
    assert _sip13(bytes(range(1)), key) == 0xC9F49BF37D57CA93
    assert _sip13(bytes(range(2)), key) == 0x82CB9B024DC7D44D


def test_filter_hash_uses_zero_key():
    assert bloom.filter_hash(b"") == 0xD1FBA762150C532C
    assert bloom.filter_hash(b"siphash") == 0x8264CEECCB16BCBE


def test_probe_vector_of_the_official_engine():
    assert bloom.probes(0xDF77EF56DEADBEEF, 7, 1_000_000) == [
        928559, 107781, 287004, 466229, 645457, 824689, 3926,
    ]


@pytest.mark.parametrize("bits,k", [(10, 6), (1, 0), (2, 1), (5, 3), (20, 13), (100, 69)])
def test_num_probes(bits, k):
    assert bloom.num_probes_for(bits) == k


def test_sizes_and_encoding():
    f = bloom.BloomFilter.build([bloom.filter_hash(b"k%d" % i) for i in range(1001)], 10)
    assert len(f.bits) == (1001 * 10 + 7) // 8
    enc = f.encode()
    assert struct.unpack(">H", enc[:2]) == (6,)
    g = bloom.BloomFilter.decode(enc, "o", 0)
    assert g.num_probes == 6 and g.bits == f.bits


def test_no_false_negatives_and_low_fp_rate():
    keys = [b"key%010d" % i for i in range(20000)]
    f = bloom.BloomFilter.build([bloom.filter_hash(k) for k in keys])
    assert all(f.might_contain(k) for k in keys)
    rnd = random.Random(1)
    misses = [b"miss%d" % rnd.getrandbits(60) for _ in range(20000)]
    fp = sum(f.might_contain(k) for k in misses) / len(misses)
    assert fp < 0.015


def test_bit_order_within_bytes():
    f = bloom.BloomFilter.build([3], 2)  # m = 8 bits, k = 1, h = 3: only bit 3 is set
    assert f.bits == b"\x08"
    # k = 5 over m = 8 from hash 0: h runs 0, 0, 1, 4, 2 (delta grows by i each probe).
    assert bloom.BloomFilter.build([0], 8).bits == bytes([0b10111])


def test_composite_block_round_trip():
    data = bloom.encode_composite_filter([(b"_bf", b"\x00\x06abc"), (b"other", b"")])
    assert data[:2] == b"\x00\x02"
    assert data[2:4] == b"\x00\x03" and data[4:7] == b"_bf" and data[7:15] == struct.pack(">Q", 5)
    assert bloom.decode_composite_filter(data, "o", 0) == {b"_bf": b"\x00\x06abc", b"other": b""}
    f = bloom.decode_filter_block(data, 1, "o", 0)
    assert f.num_probes == 6 and f.bits == b"abc"
    legacy = bloom.decode_filter_block(b"\x00\x06abc", 0, "o", 0)
    assert legacy.num_probes == 6


@pytest.mark.parametrize("cut", [1, 3, 10, 14])
def test_truncated_composite_is_corruption(cut):
    data = bloom.encode_composite_filter([(b"_bf", b"\x00\x06abc")])
    with pytest.raises(CorruptionError):
        bloom.decode_composite_filter(data[:cut], "o", 0)
    with pytest.raises(CorruptionError):
        bloom.decode_composite_filter(data + b"\x00", "o", 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=40), st.integers(0, 2**64 - 1), st.integers(0, 12), st.binary(max_size=3),
       st.data())
def test_probe_loops_answer_as_the_probe_rule(bits: bytes, key_hash: int, num_probes: int, key: bytes, data) -> None:
    """The lookups' probe loops (``might_contain_hash``, and ``might_contain`` with the hash in
    the same frame; sums reduced by subtraction) say "absent" exactly when a bit ``probes()``
    names is clear: filters of every size, down to fewer bits than probes, empty and full."""
    if bits and data.draw(st.booleans()):
        bits = b"\xff" * len(bits)  # every bit set: only the probe positions' range is tested
    f = bloom.BloomFilter(num_probes, bits)
    for h, k in ((key_hash, None), (bloom.filter_hash(key), key)):
        want = not f.filter_bits or all(bits[p >> 3] & (1 << (p & 7)) for p in bloom.probes(h, num_probes, f.filter_bits))
        assert f.might_contain_hash(h) is want
        if k is not None:
            assert f.might_contain(k) is want


def test_probe_loops_on_filters_of_fewer_bits_than_probes():
    """Bitsets of 8 to 32 bits with up to 20 probes (the reduction by one subtraction does not
    hold there: the probe rule's modulo does), every bit set or random ones."""
    rng = random.Random(7)
    for size in range(1, 5):
        for num_probes in range(21):
            for bits in (b"\xff" * size, rng.randbytes(size)):
                f = bloom.BloomFilter(num_probes, bits)
                for _ in range(50):
                    h = rng.getrandbits(64)
                    want = all(bits[p >> 3] & (1 << (p & 7)) for p in bloom.probes(h, num_probes, size * 8))
                    assert f.might_contain_hash(h) is want
