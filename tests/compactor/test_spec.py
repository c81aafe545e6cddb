"""What a valid compaction is: RFC 003's examples are the test cases."""

from __future__ import annotations

import pytest
from ulid import ULID

from slatedb.compactor import CompactionSpec, L0Source, RunSource, full_spec, validate_spec
from slatedb.errors import InvalidArgumentError
from slatedb.format.types import CompactedSsTableView, ManifestV2, SortedRunV2

# RFC 003: "l0: [SST-1, SST-2, SST-3, SST-4]" (SST-4 is the newest), "compacted: [100, 50, 3, 1, 0]".
SST = {n: ULID.from_int(n) for n in (1, 2, 3, 4)}
MANIFEST = ManifestV2(
    l0=tuple(CompactedSsTableView(SST[n], SST[n]) for n in (4, 3, 2, 1)),
    compacted=tuple(SortedRunV2(i) for i in (100, 50, 3, 1, 0)),
)


def spec(*sources: str, dest: int) -> CompactionSpec:
    out = []
    for s in sources:
        out.append(L0Source(SST[int(s[4:])]) if s.startswith("SST-") else RunSource(int(s)))
    return CompactionSpec(tuple(out), dest)


VALID = {
    "the oldest 2 L0 SSTs to a new SR": spec("SST-2", "SST-1", dest=101),
    "the oldest L0 SST and SR 100, saved as SR 100": spec("SST-1", "100", dest=100),
    "a major compaction of everything into SR 0": spec("SST-4", "SST-3", "SST-2", "SST-1", "100", "50", "3", "1", "0", dest=0),
}

INVALID = {
    "skips SST-2 and SST-1": (spec("SST-4", "SST-3", dest=101), "oldest L0"),
    "writes to an SR not consecutive to 50": (spec("100", "50", dest=2), "lowest sorted run"),
    "L0-only into an existing run": (spec("SST-2", "SST-1", dest=100), "above the highest"),
    "runs out of order": (spec("50", "100", dest=50), "contiguous"),
    "a gap between runs": (spec("100", "3", dest=3), "contiguous"),
    "an unknown SST": (CompactionSpec((L0Source(ULID.from_int(99)),), 101), "not in the database"),
    "an unknown run": (spec("7", dest=7), "not in the database"),
    "no sources": (CompactionSpec((), 0), "at least one source"),
    "a duplicate source": (spec("1", "1", dest=1), "duplicate"),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_rfc003_valid_compactions(name: str) -> None:
    assert validate_spec(VALID[name], MANIFEST) is None


@pytest.mark.parametrize("name", sorted(INVALID))
def test_rfc003_invalid_compactions_are_rejected_with_a_reason(name: str) -> None:
    s, words = INVALID[name]
    reason = validate_spec(s, MANIFEST)
    assert reason is not None and words in reason, reason


def test_a_source_or_destination_of_a_running_compaction_cannot_be_reused() -> None:
    running = spec("SST-2", "SST-1", dest=101)
    assert "conflicts" in validate_spec(spec("SST-1", "100", dest=100), MANIFEST, [running])
    # A disjoint compaction of lower runs may run alongside.
    assert validate_spec(spec("3", "1", "0", dest=0), MANIFEST, [running]) is None
    assert "conflicts" in validate_spec(spec("3", "1", "0", dest=0), MANIFEST, [spec("1", "0", dest=0)])
    # The reason names what is shared: the sources, else the destination run.
    assert validate_spec(spec("SST-1", "100", dest=100), MANIFEST, [running]).endswith(
        f"over {L0Source(SST[1]).render()}")
    elsewhere = CompactionSpec((RunSource(100),), 101)  # another job writes run 101
    assert validate_spec(spec("SST-2", "SST-1", dest=101), MANIFEST, [elsewhere]).endswith("over SR:101")


def test_full_spec_takes_everything_into_the_lowest_run() -> None:
    full = full_spec(MANIFEST)
    assert full == VALID["a major compaction of everything into SR 0"]
    assert full_spec(ManifestV2()) is None
    only_l0 = ManifestV2(l0=MANIFEST.l0)
    assert full_spec(only_l0).destination == 0 and validate_spec(full_spec(only_l0), only_l0) is None


def test_spec_json_round_trip_and_the_stored_form() -> None:
    s = VALID["the oldest L0 SST and SR 100, saved as SR 100"]
    assert CompactionSpec.from_json(s.to_json()) == s
    assert CompactionSpec.from_format(s.to_format()) == s
    stored = s.to_format()
    assert stored.l0_view_ids == (SST[1],) and stored.sorted_runs == (100,) and stored.destination == 100


@pytest.mark.parametrize("bad", [
    [], {"sources": "x", "destination": 0}, {"sources": [], "destination": "0"},
    {"sources": [{"Sst": "nope"}], "destination": 0}, {"sources": [{"Blob": 1}], "destination": 0},
    {"sources": [], "destination": -1}, {"sources": [], "destination": 0, "extra": 1},
    # a source of two keys, a one-element list, an L0 source whose value is no string, a run
    # source spelled as a ULID string (sim mutate draw --seed 9 survivors in _source_from_json)
    {"sources": [{"Sst": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "SortedRun": 1}], "destination": 0},
    {"sources": [["Sst"]], "destination": 0}, {"sources": [{"Sst": 5}], "destination": 0},
    {"sources": [{"SortedRun": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}], "destination": 0},
])
def test_malformed_json_specs_raise_a_typed_error(bad) -> None:
    with pytest.raises(InvalidArgumentError):
        CompactionSpec.from_json(bad)
