"""The size-tiered scheduler: thresholds, oldest-first L0, size series, back-pressure, conflicts."""

from __future__ import annotations

import attrs
import pytest
from ulid import ULID

from slatedb.compactor import CompactionSpec, L0Source, RunSource, SizeTieredOptions, SizeTieredScheduler, validate_spec
from slatedb.compactor.scheduler import sst_size_bytes
from slatedb.errors import InvalidArgumentError
from slatedb.format.types import CompactedSsTableV2, CompactedSsTableView, ManifestV2, SortedRunV2, SsTableInfo

_next = iter(range(1, 10_000))


def _sst(size: int) -> CompactedSsTableV2:
    return CompactedSsTableV2(ULID.from_int(next(_next)), SsTableInfo(index_offset=size))


def manifest(l0_sizes: list[int], run_sizes: dict[int, int]) -> ManifestV2:
    """L0 newest first; runs by id (listed highest id first)."""
    l0 = [_sst(s) for s in l0_sizes]
    runs = {rid: _sst(s) for rid, s in run_sizes.items()}
    return ManifestV2(
        ssts=tuple(l0) + tuple(runs.values()),
        l0=tuple(CompactedSsTableView(s.id, s.id) for s in l0),
        compacted=tuple(SortedRunV2(rid, (CompactedSsTableView(runs[rid].id, runs[rid].id),))
                        for rid in sorted(runs, reverse=True)),
    )


def test_nothing_below_the_l0_threshold() -> None:
    m = manifest([10] * 3, {})
    assert SizeTieredScheduler().propose(m, [], 4) == []


def test_l0_compacts_the_oldest_max_sources_into_a_new_run_above_the_highest() -> None:
    m = manifest([10] * 11, {0: 1000, 1: 5000})
    (s,) = SizeTieredScheduler().propose(m, [], 1)
    assert s.sources == tuple(L0Source(v.id) for v in m.l0[-8:])  # the 8 oldest
    assert s.destination == 2
    assert validate_spec(s, m) is None


def test_a_series_of_similar_runs_merges_into_its_lowest_id() -> None:
    # Runs 5..2 are similar (within 4x of the smallest); run 1 is far larger, run 0 too.
    m = manifest([], {5: 100, 4: 120, 3: 150, 2: 300, 1: 100_000, 0: 1_000_000})
    (s,) = SizeTieredScheduler().propose(m, [], 4)
    assert s == CompactionSpec(tuple(RunSource(i) for i in (5, 4, 3, 2)), 2)
    assert validate_spec(s, m) is None


def test_sources_are_capped_at_max_keeping_the_oldest() -> None:
    m = manifest([], {i: 100 for i in range(10, 0, -1)})
    (s,) = SizeTieredScheduler(SizeTieredOptions(2, 3, 4.0)).propose(m, [], 1)
    assert s.run_ids == (3, 2, 1) and s.destination == 1


def test_active_compactions_are_not_proposed_twice_and_capacity_is_respected() -> None:
    m = manifest([10] * 4, {i: 100 for i in range(8, 0, -1)})
    sched = SizeTieredScheduler(SizeTieredOptions(2, 4, 4.0))
    props = sched.propose(m, [], 10)
    assert props
    used = [set(p.sources) | {RunSource(p.destination)} for p in props]
    assert sum(map(len, used)) == len(set().union(*used)), "proposals overlap"
    assert len(sched.propose(m, [], 1)) == 1
    again = sched.propose(m, props, 10)
    assert all(validate_spec(p, m, props) is None for p in again)


def test_back_pressure_holds_an_l0_compaction_in_front_of_a_full_level() -> None:
    # 8 small runs already wait to be merged; a new small L0 output would join them: hold it.
    m = manifest([10] * 4, {i: 40 for i in range(8, 0, -1)})
    sched = SizeTieredScheduler(SizeTieredOptions(4, 8, 4.0))
    props = sched.propose(m, [], 4)
    assert props and all(not p.l0_view_ids for p in props)
    # With room in the level, L0 goes first.
    m2 = manifest([10] * 4, {i: 40 for i in range(3, 0, -1)})
    assert sched.propose(m2, [], 1)[0].l0_view_ids


def test_back_pressure_looks_at_the_run_just_older_than_the_chosen_ones() -> None:
    """``nxt`` is the run after the chosen series' oldest, the one the output would next merge
    with. Runs 5..2 (1, 2, 2, 2 bytes) form a series (run 1, 3 bytes, is more than 2x the
    smallest); run 1 heads no full series, so 5..2 go into 2. Judged from run 4 instead (one
    *inside* the chosen series: `sim mutate` seed 24), 4..1 would look like a full series and
    hold 5..2 back, proposing 4..1 in their place."""
    m = manifest([], {5: 1, 4: 2, 3: 2, 2: 2, 1: 3})
    sched = SizeTieredScheduler(SizeTieredOptions(2, 4, 2.0))
    assert sched.propose(m, [], 1) == [CompactionSpec(tuple(RunSource(i) for i in (5, 4, 3, 2)), 2)]
    # ... and a full series just older than the chosen runs holds them back: runs 9..6 (1 byte
    # each) would merge into a run of 4 bytes in front of 5..2 (4 bytes each, a full series), so
    # the series shrinks to 9..7, whose next older run, 6, heads no full series.
    m2 = manifest([], {9: 1, 8: 1, 7: 1, 6: 1, 5: 4, 4: 4, 3: 4, 2: 4})
    assert SizeTieredScheduler(SizeTieredOptions(2, 4, 2.0)).propose(m2, [], 1) == [
        CompactionSpec(tuple(RunSource(i) for i in (9, 8, 7)), 7)]


@pytest.mark.parametrize("sizes, expected", [
    ({3: None, 2: None, 1: 100_000}, (3, 2)),  # two unknown runs: 0 and 0 bytes, one series
    ({3: None, 2: 3, 1: 3}, (2, 1)),  # 3 bytes is more than 4 x 0: the unknown run stays alone
], ids=["unknown-with-unknown", "unknown-alone"])
def test_a_run_whose_ssts_the_manifest_does_not_list_weighs_nothing(sizes, expected) -> None:
    """A view whose SST is missing from the manifest's ``ssts`` (a malformed manifest: the
    compactor's tick schedules on the latest one as read) counts 0 bytes: never a negative size,
    and a series with it holds only other runs of 0 bytes (``None``: the run's SST is unlisted)."""
    m = manifest([], {rid: size or 1 for rid, size in sizes.items()})
    unlisted = {r.ssts[0].sst_id for r in m.compacted if sizes[r.id] is None}
    m = attrs.evolve(m, ssts=tuple(s for s in m.ssts if s.id not in unlisted))
    (s,) = SizeTieredScheduler(SizeTieredOptions(2, 4, 4.0)).propose(m, [], 1)
    assert s == CompactionSpec(tuple(RunSource(i) for i in expected), expected[-1])


@pytest.mark.parametrize("last", ["index", "filter", "stats"])
def test_an_sst_weighs_up_to_the_end_of_its_last_section(last: str) -> None:
    """``sst_size_bytes``: the largest end (offset + length) of the index, filter and stats
    sections, whichever of them the writer put last."""
    ends = {"index": (1000, 24), "filter": (900, 50), "stats": (960, 30)}
    ends[last] = (2000, 77)
    info = SsTableInfo(**{f"{name}_{part}": v for name, (o, n) in ends.items() for part, v in (("offset", o), ("len", n))})
    assert sst_size_bytes(info) == 2077


def test_options_come_from_the_official_string_map() -> None:
    o = SizeTieredOptions.from_map({"min_compaction_sources": "2", "max_compaction_sources": "5",
                                    "include_size_threshold": "2.5"})
    assert o == SizeTieredOptions(2, 5, 2.5)
    assert SizeTieredOptions.from_map({}) == SizeTieredOptions(4, 8, 4.0)


@pytest.mark.parametrize("bad, words", [
    ({"min_compaction_sources": "x"}, "not a int"),
    ({"max_compaction_sources": "2"}, "must be >= min_compaction_sources"),
    ({"include_size_threshold": "0.5"}, ">= 1.0"),
    ({"min_compaction_sources": "0"}, ">= 1"),
    ({"nope": "1"}, "unknown scheduler option"),
])
def test_bad_options_raise_a_typed_error_naming_them(bad, words) -> None:
    with pytest.raises(InvalidArgumentError, match=words):
        SizeTieredOptions.from_map(bad)


def test_a_proposal_is_given_again_for_the_same_manifest_active_jobs_and_capacity() -> None:
    sched = SizeTieredScheduler()
    m = manifest([10] * 11, {0: 1000})
    first = sched.propose(m, [], 1)
    assert len(first) == 1
    again = sched.propose(m, [], 1)
    assert again == first and again is not first  # a fresh list of the same specs
    again.clear()  # the caller's list: the remembered proposal is not changed
    assert sched.propose(m, [], 1) == first
    # Each of another manifest, other active jobs, another capacity, other options (right after
    # the same question was answered): worked out anew.
    assert sched.propose(manifest([10] * 3, {0: 1000}), [], 1) == []
    assert sched.propose(m, [], 1) == first
    assert sched.propose(m, first, 1) != first
    assert sched.propose(m, [], 1) == first
    assert sched.propose(m, [], 0) == []
    assert sched.propose(m, [], 1) == first
    sched.options = attrs.evolve(sched.options, min_compaction_sources=12, max_compaction_sources=12)
    assert sched.propose(m, [], 1) == []
