"""Decoding files written by the official SlateDB 0.17.0 wheel, embedded as hex.

These run without the wheel (the interop tests regenerate such files live). The manifest is
the 5th one of a database with one 1500-row L0 SST (Zstd) and one 1-row L0 SST; the second
manifest is after the official compactor merged six L0 SSTs into sorted run 0 (it carries a
compactor checkpoint); the compactions file records that compaction in state COMPACTED.
"""

from __future__ import annotations

import pytest
from ulid import ULID

from slatedb.errors import CorruptionError
from slatedb.format import compactions as cf
from slatedb.format import manifest as mf
from slatedb.format import types as t

OFFICIAL_MANIFEST = bytes.fromhex(
    "00023000000000000000000026005c000000000007002000280030003800000008000c00100040001400480050001800"
    "1c0026000000000000011001000080000000780000006c00000044000000680000000100000000000000010000000000"
    "0000070000000000000007000000000000007845c202a2010000df05000000000000df05000000000000000000001d00"
    "0000010100000000000001000000000000000100000001000000006b02c1170000000000000000000000000000000200"
    "00004800000004000000c8ffffff080000001c000000c0ffffff939f7245c202a2012a7a9f8aee791cfe0000000070fe"
    "ffff939f7245c202a2012a7a9f8aee791cfe08000c00040008000800000010000000240000000800180004000c000800"
    "00001d9a7945c202a20175c63a5e6729121000000000b8feffff1d9a7945c202a20175c63a5e6729121002000000b000"
    "00000400000062ffffff00000200800000002000000000001a003c0008001000180020000000060000000c0028003000"
    "07001a0000000000040140000000300000002d0000000000000039000000000000002d00000000000000660000000000"
    "00004900000000000000000000000700000077616c6f6e6c79000700000077616c6f6e6c79000800160004000c000800"
    "00001d9a7945c202a20175c63a5e6729121000000a00120008000c0006000a0000000000020080000000200000000000"
    "1a00400008001000180020002800060000000c003000380007001a000000000004014000000034000000f33700000000"
    "00001d010000000000007e3000000000000075070000000000001039000000000000b400000000000000030000007474"
    "6c00080000006b657930303030300800140004000c0008000000939f7245c202a2012a7a9f8aee791cfe"
)
OFFICIAL_COMPACTED_MANIFEST = bytes.fromhex(
    "00022c000000000026005c0000000000070024002c0034003c0008000c0010001400440018004c0054001c0020002600"
    "000000000001300100004801000040010000b80000006800000040000000a80000000100000000000000010000000000"
    "000006000000000000000700000000000000cbecc602a20100002c010000000000002c010000000000001d0000000101"
    "00000000000001000000000000000100000001000000006b02c24800000001000000100000000c001c00040010000800"
    "0c000c00000018000000cdc5026b49c2026b0a000000000000000000000080ffffff884a592aee5c8c018fdd3594b30a"
    "e0830000000000000000010000000c00000008000800000004000800000004000000010000000c00000008000c000400"
    "080008000000080000001c000000d0ffffff4a3f39edc602a2018cbe1a1f6a4c5ab900000000e8ffffff4a3f39edc602"
    "a2018cbe1a1f6a4c5ab9000000000800180004000c00080000007e06ccecc602a20172a21581dc52c363000000000000"
    "0000010000001000000000000a00120008000c0006000a00000000000200780000002000000000001a003c0008001000"
    "180020000000000000000c002800300007001a000000000000013c000000300000006405000000000000340000000000"
    "000064050000000000009805000000000000540000000000000000000000040000006b303439040000006b3030300800"
    "140004000c00080000004a3f39edc602a2018cbe1a1f6a4c5ab9"
)
OFFICIAL_COMPACTIONS = bytes.fromhex(
    "000210000000000000000800100008000400080000000c00000001000000000000000100000014000000100018000800"
    "06000c000700100014001000000000000104c4010000f400000008000000ac00000001000000100000000c0012000800"
    "0c00000006000c00000000000200700000002000000000001a003c0008001000180020000000000000000c0028003000"
    "07001a000000000000013c00000030000000640500000000000034000000000000006405000000000000980500000000"
    "0000540000000000000000000000040000006b303439040000006b303030e0feffff4a3f39edc602a2018cbe1a1f6a4c"
    "5ab9080014000400080008000000100000003aedc602a2010000000000001a00000030314d3831434456353634385651"
    "4b45465a525a5035595a5a3800000c000c0000000000040008000c0000000c0000000400000000000000060000009800"
    "000074000000580000003c000000200000000400000088ffffff4b38b1ecc602a2016749a9f1ac2df4e200000000a0ff"
    "ffff4807b6ecc602a201403cb3d7f7fb19d800000000b8ffffff40f6bbecc602a201b338b570b2008e8600000000d0ff"
    "ffffcb38c0ecc602a201ef424b5fa295e65c00000000e8ffffff9bd2c6ecc602a201beb88ebf2b3fcf2e000000000800"
    "180004000c00080000007e06ccecc602a20172a21581dc52c363000000000800140004000c0008000000147c0dedc602"
    "a20184beef737308c959"
)


def test_official_manifest_decodes() -> None:
    m = mf.decode_manifest(OFFICIAL_MANIFEST, "manifest/00000000000000000005.manifest")
    assert isinstance(m, t.ManifestV2)
    assert (m.manifest_id, m.initialized, m.writer_epoch, m.compactor_epoch) == (0, True, 1, 1)
    assert len(m.ssts) == 2 and len(m.l0) == 2 and m.compacted == ()
    assert [v.id for v in m.l0] == [v.sst_id for v in m.l0]
    big = next(s for s in m.ssts if s.info.first_entry == b"key00000")
    assert big.format_version == 2
    assert big.info.compression_format is t.CompressionFormat.ZSTD
    assert big.info.filter_format is t.FilterFormat.COMPOSITE and big.info.filter_len > 0
    assert big.info.last_entry == b"ttl"
    assert m.sequence_tracker and m.sequence_tracker[0] == 1
    assert m.segments == () and m.segment_extractor_name is None


def test_official_manifest_reencodes_to_the_same_value() -> None:
    m = mf.decode_manifest(OFFICIAL_MANIFEST, "m")
    assert mf.decode_manifest(mf.encode_manifest(m), "m") == m


def test_official_compacted_manifest_decodes() -> None:
    m = mf.decode_manifest(OFFICIAL_COMPACTED_MANIFEST, "m")
    assert isinstance(m, t.ManifestV2)
    assert m.l0 == () and len(m.compacted) == 1 and m.compacted[0].id == 0
    (cp,) = m.checkpoints
    assert cp.metadata is None and cp.checkpoint_expire_time_s - cp.checkpoint_create_time_s == 900
    assert mf.decode_manifest(mf.encode_manifest(m), "m") == m


def test_official_compactions_decode() -> None:
    c = cf.decode_compactions(OFFICIAL_COMPACTIONS, "compactions/00000000000000000007.compactions")
    assert c.compactor_epoch == 1
    (job,) = c.recent_compactions
    assert job.status is t.CompactionStatus.COMPACTED
    assert isinstance(job.spec, t.TieredCompactionSpec)
    assert len(job.spec.l0_view_ids) == 6 and job.spec.sorted_runs == ()
    assert job.spec.segment == b"" and job.spec.destination == 0
    assert job.worker is not None and ULID.from_str(job.worker.worker_id)
    (out,) = job.output_ssts
    assert out.format_version == 2 and out.info.first_entry == b"k000"
    assert cf.decode_compactions(cf.encode_compactions(c), "c") == c


@pytest.mark.parametrize("data", [OFFICIAL_MANIFEST, OFFICIAL_COMPACTED_MANIFEST])
def test_every_truncation_of_an_official_manifest_raises(data: bytes) -> None:
    for cut in range(len(data)):
        with pytest.raises(CorruptionError):
            mf.decode_manifest(data[:cut], "m")


def test_every_truncation_of_an_official_compactions_file_raises() -> None:
    for cut in range(len(OFFICIAL_COMPACTIONS)):
        with pytest.raises(CorruptionError):
            cf.decode_compactions(OFFICIAL_COMPACTIONS[:cut], "c")
