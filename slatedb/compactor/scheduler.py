"""The size-tiered compaction scheduler (RFC 003) and the scheduler interface.

A scheduler looks at the manifest and the active compactions and proposes specs; the compactor
decides how many to run (``max_concurrent_compactions``) and validates each one before it runs
(:func:`slatedb.compactor.spec.validate_spec`, plus :meth:`CompactionScheduler.validate`).

Size-tiered, with the official engine's option names (``compactor_options.scheduler_options``,
a string map): ``min_compaction_sources`` (4), ``max_compaction_sources`` (8) and
``include_size_threshold`` (4.0).

* L0: once there are at least ``min_compaction_sources`` L0 SSTs, compact the oldest (at most
  ``max_compaction_sources``) into a new sorted run above the highest existing one.
* Sorted runs: find, from the newest run down, a series of at least ``min_compaction_sources``
  consecutive runs whose sizes stay within ``include_size_threshold`` times the smallest so far;
  merge the oldest ``max_compaction_sources`` of them into the lowest-id run of the series.
* Back-pressure: a compaction whose output would join a next run that already heads a full
  series (``max_compaction_sources`` runs) is held back until that series is compacted, so
  small outputs do not pile up in front of a level that cannot take them.
* Conflicts: no source or destination of an active compaction is used twice.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import attrs

from slatedb.format.types import ManifestV2, SsTableInfo

from slatedb.manifest.compaction import CompactionSpec, L0Source, RunSource, Source, validate_spec
from slatedb.settings_scheduler import SizeTieredOptions  # noqa: F401  (re-exported)


class CompactionScheduler(Protocol):
    def propose(self, manifest: ManifestV2, active: Sequence[CompactionSpec], capacity: int) -> list[CompactionSpec]:
        """Up to ``capacity`` new specs that do not conflict with ``active``."""

    def validate(self, manifest: ManifestV2, spec: CompactionSpec) -> str | None:
        """Why the scheduler refuses ``spec`` (None: accepted)."""


def sst_size_bytes(info: SsTableInfo) -> int:
    """The size of an SST object, from its metadata (the largest end of a section)."""
    return max(info.index_offset + info.index_len, info.filter_offset + info.filter_len,
               info.stats_offset + info.stats_len)


@attrs.frozen
class _Sized:
    source: Source
    size_bytes: int


class SizeTieredScheduler:
    def __init__(self, options: SizeTieredOptions | None = None) -> None:
        self.options = options or SizeTieredOptions()
        #: The last proposal: (manifest, active specs, capacity, options, specs proposed). A
        #: coordinator ticks on the same manifest object (its read of an unchanged latest file
        #: returns the value it held) with the same active jobs most of the time.
        self._last: tuple | None = None

    def validate(self, manifest: ManifestV2, spec: CompactionSpec) -> str | None:
        return None  # the generic rules of validate_spec are all size-tiered needs

    def propose(self, manifest: ManifestV2, active: Sequence[CompactionSpec], capacity: int) -> list[CompactionSpec]:
        """Up to ``capacity`` new specs that do not conflict with ``active`` (a pure function of
        the frozen values and the options: the last answer is given again for the same ones)."""
        active = tuple(active)
        last = self._last
        if (last is not None and last[0] is manifest and last[2] == capacity and last[3] is self.options
                and last[1] == active):
            return list(last[4])
        out = self._propose(manifest, active, capacity)
        self._last = (manifest, active, capacity, self.options, tuple(out))
        return out

    def _propose(self, manifest: ManifestV2, active: Sequence[CompactionSpec], capacity: int) -> list[CompactionSpec]:
        sizes = {s.id: sst_size_bytes(s.info) for s in manifest.ssts}
        l0 = [_Sized(L0Source(v.id), sizes.get(v.sst_id, 0)) for v in manifest.l0]
        runs = [_Sized(RunSource(r.id), sum(sizes.get(v.sst_id, 0) for v in r.ssts)) for r in manifest.compacted]
        busy = list(active)
        out: list[CompactionSpec] = []
        while len(out) < capacity:
            spec = self._pick(manifest, l0, runs, busy)
            if spec is None:
                break
            out.append(spec)
            busy.append(spec)
        return out

    # -- picking ---------------------------------------------------------------------------

    def _pick(self, manifest: ManifestV2, l0: list[_Sized], runs: list[_Sized],
              busy: list[CompactionSpec]) -> CompactionSpec | None:
        o = self.options
        if len(l0) >= o.min_compaction_sources:
            chosen = l0[-o.max_compaction_sources:]  # the oldest ones
            dest = runs[0].source.run_id + 1 if runs else 0  # type: ignore[union-attr]
            spec = CompactionSpec(tuple(s.source for s in chosen), dest)
            if self._allowed(manifest, spec, chosen, runs[0] if runs else None, runs, busy):
                return spec
        for i in range(len(runs)):
            series = self._series(runs, i)
            # Shrink from the newest end until the back-pressure and conflict checks pass.
            while len(series) >= o.min_compaction_sources:
                chosen = series[-o.max_compaction_sources:]
                last = runs.index(chosen[-1])
                nxt = runs[last + 1] if last + 1 < len(runs) else None
                spec = CompactionSpec(tuple(s.source for s in chosen), chosen[-1].source.run_id)  # type: ignore[union-attr]
                if self._allowed(manifest, spec, chosen, nxt, runs, busy):
                    return spec
                series = series[:-1]
        return None

    def _series(self, runs: list[_Sized], start: int) -> list[_Sized]:
        """Consecutive runs from ``start`` whose sizes stay within the threshold of the smallest."""
        out: list[_Sized] = []
        smallest = None
        for r in runs[start:]:
            if smallest is not None and r.size_bytes > smallest * self.options.include_size_threshold:
                break
            smallest = r.size_bytes if smallest is None else min(smallest, r.size_bytes)
            out.append(r)
        return out

    def _allowed(self, manifest: ManifestV2, spec: CompactionSpec, chosen: list[_Sized], nxt: _Sized | None,
                 runs: list[_Sized], busy: list[CompactionSpec]) -> bool:
        if validate_spec(spec, manifest, busy) is not None:
            return False
        # Back-pressure: the output would be compactable with ``nxt``; wait if ``nxt`` already
        # heads a full series.
        if nxt is not None:
            out_size = sum(s.size_bytes for s in chosen)
            if nxt.size_bytes <= out_size * self.options.include_size_threshold:
                if len(self._series(runs, runs.index(nxt))) >= self.options.max_compaction_sources:
                    return False
        return True
