"""Names of sequenced files (slatedb/format/layout.py): twenty digits of a u64 id."""

from __future__ import annotations

from slatedb.format.layout import MANIFEST_DIR, MANIFEST_SUFFIX, manifest_key, parse_id


def test_parse_id_takes_u64_ids_only() -> None:
    assert parse_id(manifest_key(7), MANIFEST_DIR, MANIFEST_SUFFIX) == 7
    assert parse_id(manifest_key(2**64 - 1), MANIFEST_DIR, MANIFEST_SUFFIX) == 2**64 - 1
    for name in ("manifest/18446744073709551616.manifest", "manifest/99999999999999999999.manifest",
                 "manifest/7.manifest", "manifest/0000000000000000000x.manifest", "manifest/00000000000000000007.tmp"):
        assert parse_id(name, MANIFEST_DIR, MANIFEST_SUFFIX) is None, name
    # Decimal digits of other scripts (str.isdigit and int() take them): not a SlateDB name, whose
    # ids are ASCII (the official engine parses them as a u64); taken, they would also sort apart
    # from their value (the destroy's removal order sorts manifest names as strings).
    for digits in ("\u0660" * 19 + "\u0667", "\uff10" * 19 + "\uff17", "0" * 19 + "\u0667"):
        assert parse_id(f"manifest/{digits}.manifest", MANIFEST_DIR, MANIFEST_SUFFIX) is None, digits


def test_is_db_key_names_the_database_objects_only() -> None:
    """destroy.md DESTROY-8: a destroy deletes these, and leaves everything else under the root."""
    from slatedb.format.layout import compactions_key, failed_reason_key, is_db_key, sst_key, wal_key
    from ulid import ULID

    u = ULID.from_str("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    ours = [manifest_key(1), wal_key(3), sst_key(u), compactions_key(2), failed_reason_key(u),
            "gc/manifest.boundary", "gc/compactions.boundary",
            "manifest/00000000000000000001.manifest#1",  # another engine's temp file in our directory
            f"bulk-load/{u}/open", f"bulk-load/{u}/000003-0-{u}",
            f"shards/{u}/000001-0-{u}/manifest/00000000000000000001.manifest",
            f"shards/{u}/000001-0-{u}/compacted/{u}.sst"]
    for key in ours:
        assert is_db_key(key), key
    theirs = ["NOTES.txt", "b/manifest/00000000000000000001.manifest", "b/wal/00000000000000000001.sst",
              "wal/b/manifest/00000000000000000001.manifest", "compacted/archive/compacted/x.sst",
              "compactions/failed/x/manifest/00000000000000000001.manifest", "gc/x/gc/manifest.boundary",
              "bulk-load/manifest/00000000000000000001.manifest", f"bulk-load/{u}/x/y",
              "shards/manifest/00000000000000000001.manifest", f"shards/{u}/b/manifest/00000000000000000001.manifest",
              f"shards/{u}/000001-0-{u}/NOTES.txt", "manifest/", "wal"]
    for key in theirs:
        assert not is_db_key(key), key
