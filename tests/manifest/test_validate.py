"""``slatedb.manifest.validate``: the structural checks of a manifest's SST entries (the
malformed-manifest campaign over real bit flips is tests/robust/test_corrupt_manifest.py)."""

from __future__ import annotations

import attrs
from ulid import ULID

from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, SsTableInfo
from slatedb.manifest.validate import manifest_problem


def manifest_of(info: SsTableInfo) -> ManifestV2:
    sst = CompactedSsTableV2(ULID.from_str("01M8EPEMXB31KA55EB2WTHR3VH"), info, 2)
    return ManifestV2(initialized=True, ssts=(sst,), l0=(CompactedSsTableView(ULID(), sst.id, None),))


def test_an_sst_without_a_stats_block_is_well_formed_and_a_misplaced_stats_block_is_not() -> None:
    """The stats block is optional (an SST written without one has ``stats_len`` 0 and offset 0):
    only a present one must start where the index ends (`sim mutate` seed 15: the check made to
    apply to SSTs without stats instead survived; every SST either engine writes has stats)."""
    base = SsTableInfo(first_entry=b"a", last_entry=b"z", filter_offset=100, filter_len=20, index_offset=120,
                       index_len=30)
    assert manifest_problem(manifest_of(base), 1) is None  # no stats block
    assert manifest_problem(manifest_of(attrs.evolve(base, stats_offset=150, stats_len=10)), 1) is None
    bad = manifest_problem(manifest_of(attrs.evolve(base, stats_offset=151, stats_len=10)), 1)
    assert bad is not None and "does not end where the stats start (151)" in bad


def test_an_sst_format_version_is_absent_one_or_two_and_no_other() -> None:
    """A manifest may name SSTs of format version 1 (which an absent field on the wire also means)
    and 2; any other version is a structural problem (`sim mutate` seed 20:
    the known versions made ``(None, 2, 2)`` survived: this engine writes version 2, and no check
    met a manifest naming version 1)."""
    info = SsTableInfo(first_entry=b"a", last_entry=b"z", filter_offset=100, filter_len=20, index_offset=120,
                       index_len=30)

    def with_version(version: int | None) -> ManifestV2:
        m = manifest_of(info)
        return attrs.evolve(m, ssts=(attrs.evolve(m.ssts[0], format_version=version),))

    for version in (None, 1, 2):
        assert manifest_problem(with_version(version), 1) is None, version
    for version in (0, 3):
        bad = manifest_problem(with_version(version), 1)
        assert bad is not None and f"unknown SST format version {version}" in bad, (version, bad)
