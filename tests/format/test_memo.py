"""The decode memo (``slatedb/format/memo.py``): inside ``remembering()`` a decode of bytes this
process just encoded returns the encoded value; outside it (production, the format's own round
trips) every decode parses the bytes, and a changed byte is always parsed as stored."""

from __future__ import annotations

import uuid

import attrs
import pytest
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format import compactions as cf
from slatedb.format import manifest as mf
from slatedb.format import memo
from slatedb.format import types as t


def _manifest() -> t.ManifestV2:
    sst = t.CompactedSsTableV2(ULID.from_int(7), t.SsTableInfo(first_entry=b"a", last_entry=b"z"), 2)
    return t.ManifestV2(initialized=True, writer_epoch=2, ssts=(sst,), l0=(t.CompactedSsTableView(sst.id, sst.id),),
                        checkpoints=(t.Checkpoint(uuid.UUID(int=5), 3, metadata=t.WriterCheckpoint(2), name="n"),))


def _compactions() -> t.CompactionsV1:
    job = t.Compaction(ULID.from_int(9), t.TieredCompactionSpec(sorted_runs=(1,), l0_view_ids=(), destination=1))
    return t.CompactionsV1(compactor_epoch=3, recent_compactions=(job,))


def test_off_by_default_every_decode_parses() -> None:
    m, c = _manifest(), _compactions()
    got_m = mf.decode_manifest_v2(mf.encode_manifest(m), "manifest/00000000000000000001.manifest")
    got_c = cf.decode_compactions(cf.encode_compactions(c), "compactions/00000000000000000001.compactions")
    assert got_m == m and got_m is not m
    assert got_c == c and got_c is not c


def test_remembering_returns_the_encoded_value_for_its_exact_bytes() -> None:
    m, c = _manifest(), _compactions()
    with memo.remembering():
        data_m, data_c = mf.encode_manifest(m), cf.encode_compactions(c)
        assert mf.decode_manifest_v2(bytearray(data_m), "m") is m
        assert cf.decode_compactions(memoryview(data_c), "c") is c
        # a flipped bit: parsed as stored (here, refused or a different value), never the memo's
        flipped = bytearray(data_m)
        flipped[len(flipped) // 2] ^= 0x40
        try:
            assert mf.decode_manifest_v2(bytes(flipped), "m") is not m
        except CorruptionError:
            pass
        with pytest.raises(CorruptionError):
            mf.decode_manifest_v2(data_m[:10], "m")
        # a manifest whose id decoding cannot give back (the id is the object's name) is not kept
        with_id = t.ManifestV2(manifest_id=42)
        assert mf.decode_manifest_v2(mf.encode_manifest(with_id), "m") is not with_id
    assert mf.decode_manifest_v2(data_m, "m") is not m  # the block's end forgets


def test_the_memo_keeps_the_newest_of_each_kind() -> None:
    with memo.remembering():
        values = [t.ManifestV2(writer_epoch=i) for i in range(memo.MAX_REMEMBERED + 5)]
        datas = [mf.encode_manifest(v) for v in values]
        c = _compactions()
        cf.encode_compactions(c)  # another kind does not evict manifests
        assert mf.decode_manifest_v2(datas[0], "m") is not values[0]
        assert all(mf.decode_manifest_v2(d, "m") is v for d, v in zip(datas[5:], values[5:]))


def test_sst_infos_and_wal_ssts_decoded_again_in_a_run_are_the_first_decode() -> None:
    from slatedb.format import fbcodec
    from slatedb.format import wal_sst
    from slatedb.row import Row, RowKind

    info = t.SsTableInfo(first_entry=b"a", last_entry=b"z", index_offset=10, index_len=5)
    info_data = fbcodec.encode_sst_info(info)
    wal_data = wal_sst.encode_wal_sst_rows([Row(b"k%d" % i, i + 1, RowKind.VALUE, b"v") for i in range(3)]).data
    # outside a run every decode parses
    assert fbcodec.decode_sst_info(info_data, "s") == info
    assert fbcodec.decode_sst_info(info_data, "s") is not fbcodec.decode_sst_info(info_data, "s")
    assert wal_sst.decode_wal_sst(wal_data, "w") is not wal_sst.decode_wal_sst(wal_data, "w")
    with memo.remembering():
        first_info = fbcodec.decode_sst_info(info_data, "s")
        first_wal = wal_sst.decode_wal_sst(wal_data, "w")
        assert first_info == info and [r.key for r in first_wal.rows] == [b"k0", b"k1", b"k2"]
        assert fbcodec.decode_sst_info(bytes(info_data), "s2", 7) is first_info
        assert wal_sst.decode_wal_sst(bytes(wal_data), "w2") is first_wal
        # other bytes are parsed as stored: a flipped bit is refused, never the memo's value
        flipped = bytearray(wal_data)
        flipped[3] ^= 0x01
        with pytest.raises(CorruptionError):
            wal_sst.decode_wal_sst(bytes(flipped), "w")
        with pytest.raises(CorruptionError):
            fbcodec.decode_sst_info(info_data[:3], "s")
    assert fbcodec.decode_sst_info(info_data, "s") is not first_info  # the block's end forgets
    assert wal_sst.decode_wal_sst(wal_data, "w") is not first_wal


def test_data_blocks_decoded_again_in_a_run_are_the_first_decode() -> None:
    from slatedb.format import sst as sst_mod
    from slatedb.format.sst_writer import SstWriter
    from slatedb.format.types import CompressionFormat
    from slatedb.row import Row, RowKind

    rows = [Row(b"k%03d" % i, i + 1, RowKind.VALUE, b"v" * 40) for i in range(200)]
    writer = SstWriter(sst_mod.SstOptions(block_size_bytes=1024))
    writer.add_all(rows)
    enc = writer.finish()
    info, fv = enc.info, enc.format_version
    start, end = enc.block_offsets[0], enc.block_offsets[1]
    framed = enc.data[start:end]
    decode = sst_mod.decode_data_block
    # outside a run every decode parses
    assert decode(framed, info, fv, start, "s") is not decode(framed, info, fv, start, "s")
    with memo.remembering():
        first = decode(framed, info, fv, start, "s")
        assert [first.row(i).key for i in range(3)] == [b"k000", b"k001", b"k002"]
        assert decode(bytes(framed), info, fv, start, "s2") is first
        # another codec or format version is never the memo's block
        other = attrs.evolve(info, compression_format=CompressionFormat.ZLIB)
        with pytest.raises(CorruptionError):
            decode(framed, other, fv, start, "s")
        assert decode(framed, info, fv, start, "s") is first
        # a flipped bit is parsed as stored (the CRC refuses it), never the memo's block
        flipped = bytearray(framed)
        flipped[5] ^= 0x01
        with pytest.raises(CorruptionError):
            decode(bytes(flipped), info, fv, start, "s")
    assert decode(framed, info, fv, start, "s") is not first  # the block's end forgets
