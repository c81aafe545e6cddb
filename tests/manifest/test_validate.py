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
