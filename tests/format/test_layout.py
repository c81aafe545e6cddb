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
