"""What a compaction is (RFC 003): an ordered list of sources and a destination sorted run.

Sources are named in the database's *logical order*: L0 views newest first, then sorted runs
from the highest id down to 0 (the order in which a reader consults them). A compaction must
take a contiguous slice of that order, so that the output can be put back where its inputs were
without reordering anything a reader depends on:

* L0 only: the slice must end at the oldest L0 view, and the output becomes a new sorted run
  whose id is above every existing run (RFC 003: ``[SST-4, SST-3] -> 101`` is invalid because it
  skips the older ``SST-2`` and ``SST-1``).
* With sorted runs: the output replaces the lowest-id run among the sources (the destination
  must be that id; ``[100, 50] -> 2`` is invalid).

The same rule decides whether a spec submitted from outside (``slatedb submit-compaction``) is
run or ends ``Failed``; :func:`validate_spec` returns the reason, which is recorded.
"""

from __future__ import annotations

from typing import Iterable

import attrs
from ulid import ULID

from slatedb.errors import InvalidArgumentError
from slatedb.format.layout import ulid_text
from slatedb.format.types import (
    Checkpoint,
    CompactedSsTable,
    CompactedSsTableV2,
    CompactedSsTableView,
    ManifestV2,
    SortedRunV2,
    TieredCompactionSpec,
)

_U32_MAX = 2**32 - 1


@attrs.frozen
class L0Source:
    """An L0 SST view, by its view id (equal to the SST's ULID for views the writer made)."""

    view_id: ULID

    def render(self) -> str:
        return f"L0:{ulid_text(self.view_id)}"


@attrs.frozen
class RunSource:
    """A whole sorted run, by id."""

    run_id: int

    def render(self) -> str:
        return f"SR:{self.run_id}"


Source = L0Source | RunSource


@attrs.frozen
class CompactionSpec:
    """Sources in logical order (L0 newest first, then runs by descending id) and a destination."""

    sources: tuple[Source, ...]
    destination: int

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.destination <= _U32_MAX:
            raise InvalidArgumentError(f"destination sorted run {self.destination} is not a u32")
        for s in self.sources:
            if isinstance(s, RunSource) and not 0 <= s.run_id <= _U32_MAX:
                raise InvalidArgumentError(f"sorted run id {s.run_id} is not a u32")

    @property
    def l0_view_ids(self) -> tuple[ULID, ...]:
        return tuple(s.view_id for s in self.sources if isinstance(s, L0Source))

    @property
    def run_ids(self) -> tuple[int, ...]:
        return tuple(s.run_id for s in self.sources if isinstance(s, RunSource))

    def render(self) -> str:
        return "[" + ", ".join(s.render() for s in self.sources) + f"] -> {self.destination}"

    # -- the on-store form -----------------------------------------------------------------

    def to_format(self) -> TieredCompactionSpec:
        return TieredCompactionSpec(sorted_runs=self.run_ids, l0_view_ids=self.l0_view_ids, destination=self.destination)

    @classmethod
    def from_format(cls, spec: TieredCompactionSpec) -> "CompactionSpec":
        """The stored form lists L0 views and runs separately; each list keeps its order."""
        sources: list[Source] = [L0Source(v) for v in spec.l0_view_ids]
        sources += [RunSource(r) for r in spec.sorted_runs]
        return cls(tuple(sources), spec.destination)

    # -- JSON (admin API and CLI) -----------------------------------------------------------

    def to_json(self) -> dict:
        return {"sources": [_source_json(s) for s in self.sources], "destination": self.destination}

    @classmethod
    def from_json(cls, data: object) -> "CompactionSpec":
        """``{"sources": [{"Sst": "<ULID>"} | {"SortedRun": 3}, ...], "destination": 3}``."""
        if not isinstance(data, dict) or set(data) - {"sources", "destination"}:
            raise InvalidArgumentError(f"a compaction spec is {{'sources': [...], 'destination': N}}, got {data!r}")
        raw_sources = data.get("sources")
        if not isinstance(raw_sources, list):
            raise InvalidArgumentError("compaction spec: 'sources' must be a list")
        dest = data.get("destination")
        if not isinstance(dest, int) or isinstance(dest, bool):
            raise InvalidArgumentError("compaction spec: 'destination' must be an integer")
        return cls(tuple(_source_from_json(s) for s in raw_sources), dest)


def _source_json(s: Source) -> dict:
    return {"Sst": str(s.view_id)} if isinstance(s, L0Source) else {"SortedRun": s.run_id}


def _source_from_json(s: object) -> Source:
    if isinstance(s, dict) and len(s) == 1:
        ((kind, value),) = s.items()
        if kind in ("Sst", "SstView", "sst") and isinstance(value, str):
            try:
                return L0Source(ULID.from_str(value))
            except ValueError as e:
                raise InvalidArgumentError(f"compaction source {value!r} is not a ULID") from e
        if kind in ("SortedRun", "sorted_run") and isinstance(value, int) and not isinstance(value, bool):
            return RunSource(value)
    raise InvalidArgumentError(f"a compaction source is {{'Sst': '<ULID>'}} or {{'SortedRun': N}}, got {s!r}")


def logical_order(manifest: ManifestV2) -> list[Source]:
    """Every source of ``manifest`` in read order: L0 newest first, then runs (highest id first)."""
    return [L0Source(v.id) for v in manifest.l0] + [RunSource(r.id) for r in manifest.compacted]


def full_spec(manifest: ManifestV2) -> CompactionSpec | None:
    """Everything into one run: the lowest existing run id, or 0 when there is no run yet."""
    sources = logical_order(manifest)
    if not sources:
        return None
    runs = [r.id for r in manifest.compacted]
    return CompactionSpec(tuple(sources), min(runs) if runs else 0)


def validate_spec(spec: CompactionSpec, manifest: ManifestV2, busy: Iterable[CompactionSpec] = ()) -> str | None:
    """Why ``spec`` cannot run against ``manifest`` (None: it can). ``busy`` are the specs of
    other active compactions: a source or destination they use cannot be used again."""
    if not spec.sources:
        return "a compaction needs at least one source"
    if len(set(spec.sources)) != len(spec.sources):
        return f"duplicate sources in {spec.render()}"
    order = logical_order(manifest)
    n = len(spec.sources)
    try:
        start = order.index(spec.sources[0])
    except ValueError:
        return f"source {spec.sources[0].render()} is not in the database"
    if tuple(order[start : start + n]) != spec.sources:
        missing = [s.render() for s in spec.sources if s not in order]
        if missing:
            return f"sources {', '.join(missing)} are not in the database"
        return f"sources of {spec.render()} are not a contiguous slice of L0 (newest first) then runs (highest id first)"
    runs_in_manifest = [r.id for r in manifest.compacted]
    if spec.run_ids:
        if spec.destination != min(spec.run_ids):
            return f"destination {spec.destination} must be the lowest sorted run among the sources ({min(spec.run_ids)})"
    else:
        if order[start + n - 1] != order[len(manifest.l0) - 1]:
            return "an L0-only compaction must include the oldest L0 SST (it may not skip older ones)"
        if runs_in_manifest and spec.destination <= max(runs_in_manifest):
            return (f"an L0-only compaction must write a new sorted run above the highest existing one "
                    f"({max(runs_in_manifest)}), not {spec.destination}")
    for other in busy:
        used = set(other.sources) | {RunSource(other.destination)}
        clash = [s.render() for s in spec.sources if s in used]
        if clash or RunSource(spec.destination) in used:
            return f"conflicts with running compaction {other.render()} over {', '.join(clash) or f'SR:{spec.destination}'}"
    return None


@attrs.frozen
class CompactionCommit:
    """The result of :class:`slatedb.manifest.edits.ApplyCompaction`. ``already``: the manifest
    held the job's commit when the edit was applied (its outputs, or for a job with no output its
    sources gone, :func:`commit_landed`): its commit landed before a restart or a
    takeover (nothing is written; the job is Completed, COMPACT-10; its sources are gone, so
    validating them first would fail a job whose run is the database's). ``invalid``: why it no
    longer applies (its sources changed; the job fails, COMPACT-3). Neither: this edit committed it."""

    already: bool = False
    invalid: str | None = None


COMMITTED = CompactionCommit()


def committed_already(m: ManifestV2, outputs: tuple[CompactedSsTable, ...]) -> str | None:
    """A compaction whose output SSTs the manifest already holds was committed (before a crash
    or a takeover): running it again would commit it twice (COMPACT-3). Its sources need not be
    gone: ``[SR:k] -> k`` leaves a run ``k`` behind, its own output."""
    referenced = {v.sst_id for r in m.compacted for v in r.ssts}
    if any(o.id in referenced for o in outputs):
        return "its output SSTs are already in the manifest (committed before a restart)"
    return None


def empty_commit_landed(m: ManifestV2, spec: CompactionSpec) -> str | None:
    """A job with no output SST (every row it read dropped: tombstones and expired rows at the
    bottom) commits by removing its sources only, so there is no output to look for
    (:func:`committed_already`). Its commit is recognised by what it leaves instead: none of its
    sources is in ``m``, its destination is not a sorted run (the commit adds none, and removes
    it when it is a source), and with L0 sources ``last_compacted_l0_sst_view_id`` is its newest
    L0 view (only this commit sets it there: no other job may take the job's sources while it is
    active, COMPACT-10). Not conclusive for a job of sorted runs only when something else
    dropped them all (a bulk load's ``overwrite``): nothing is written either way."""
    l0 = {v.id for v in m.l0}
    runs = {r.id for r in m.compacted}
    if not spec.sources or any(v in l0 for v in spec.l0_view_ids) or any(r in runs for r in spec.run_ids):
        return None
    if spec.destination in runs:
        return None
    if spec.l0_view_ids and m.last_compacted_l0_sst_view_id != spec.l0_view_ids[0]:
        return None
    return "its sources are gone and no output was written (an empty job committed before a restart)"


def commit_landed(m: ManifestV2, spec: CompactionSpec, outputs: tuple[CompactedSsTable, ...], *,
                  empty: bool = True) -> str | None:
    """Whether the commit of ``spec`` with ``outputs`` is already in ``m`` (COMPACT-10): its
    outputs are there (:func:`committed_already`), or, with no output, its sources are gone as
    only its commit removes them (:func:`empty_commit_landed`). ``empty=False`` is the catalogued
    bug ``empty-recommit-fails`` (the rule before COMPACT-10 covered empty jobs: outputs only)."""
    if outputs or not empty:
        return committed_already(m, outputs)
    return empty_commit_landed(m, spec)


def apply_compaction(m: ManifestV2, spec: CompactionSpec, outputs: tuple[CompactedSsTable, ...], *,
                     checkpoints: tuple[Checkpoint, ...] | None = None) -> ManifestV2:
    """``m`` with ``spec``'s sources replaced by a run ``spec.destination`` of ``outputs``."""
    l0_ids = set(spec.l0_view_ids)
    run_ids = set(spec.run_ids)
    l0 = tuple(v for v in m.l0 if v.id not in l0_ids)
    runs = [r for r in m.compacted if r.id not in run_ids]
    if outputs:
        runs.append(SortedRunV2(spec.destination, tuple(CompactedSsTableView(o.id, o.id, None) for o in outputs)))
    runs.sort(key=lambda r: r.id, reverse=True)
    ids = {r.id for r in runs}
    assert len(ids) == len(runs), f"two sorted runs with one id after {spec.render()}"
    referenced = {v.sst_id for v in l0} | {v.sst_id for r in runs for v in r.ssts}
    ssts = tuple(s for s in m.ssts if s.id in referenced)
    ssts += tuple(CompactedSsTableV2(o.id, o.info, o.format_version) for o in outputs)
    # RFC 000 "Compactions": an external SST no longer referenced leaves its external_dbs entry
    # (an entry with no SSTs left is detached by GC, which releases its final checkpoint).
    external = tuple(attrs.evolve(db, sst_ids=tuple(i for i in db.sst_ids if i in referenced)) for db in m.external_dbs)
    last_l0: ULID | None = m.last_compacted_l0_sst_view_id
    if spec.l0_view_ids:
        last_l0 = spec.l0_view_ids[0]
    return attrs.evolve(m, l0=l0, compacted=tuple(runs), ssts=ssts, last_compacted_l0_sst_view_id=last_l0,
                        external_dbs=external,
                        checkpoints=m.checkpoints if checkpoints is None else checkpoints)
