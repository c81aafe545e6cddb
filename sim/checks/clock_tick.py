"""DUR-5 (wal-fencing.md): row create times never go back, and no row a writer may replay is older
than the manifest's ``last_l0_clock_tick``.

The official engine keeps its write clock monotonic (upstream ``MonotonicClock``, started at the
manifest's ``last_l0_clock_tick``) and, when it replays the WAL after a crash, refuses a replayed
table whose newest create time is below that tick (``InvalidClockTick``): its L0 flusher stops,
its shutdown fails, and the manifest it leaves loses acknowledged rows (the twenty-first
session's engine switch). So in every database's history:

* within a WAL object and from one WAL object to the next (by seq, across writers), create
  times never decrease;
* a manifest with ``last_l0_seq`` L and ``last_l0_clock_tick`` T has no landed WAL row with a
  seq above L created before T (checked when the manifest lands, against the WAL objects landed
  before it, and when a WAL object lands, against the newest manifest).

Fed by :class:`sim.checks.manifest.ManifestFenceChecks` (the same store events: a ``wal/`` put's
reply, read from the bucket at that moment; a manifest's landing). Catalogue switches
``l0-tick-commit-now`` (the tick is the L0 commit's clock, the bug fixed in ``b216176``) and
``row-clock-unclamped`` (a writer stamps rows with its wall clock as it is, so a clock behind
the database's, a skewed host taking over or a clock stepped back, writes older rows).
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from typing import Callable

from slatedb.format.types import ManifestV2
from slatedb.format.wal_sst import decode_wal_sst

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event

WAL_KEY = re.compile(r"^(?P<root>.*?)wal/(?P<id>[0-9]{20})\.sst$")

#: One landed WAL object's rows: (first seq, last seq, ((seq, create ms), ...)) with a create time.
_Rows = tuple[int, int, tuple[tuple[int, int], ...]]


class ClockTickRule:
    """DUR-5 over one world's WAL and manifest landings (see the module docstring)."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self.read = read
        self.wal: dict[str, dict[int, _Rows]] = defaultdict(dict)  # root -> wal id -> rows
        self.wal_ids: dict[str, list[int]] = defaultdict(list)  # root -> sorted ids of ``wal``
        self.tick: dict[str, tuple[int, int, int]] = {}  # root -> (manifest id, last_l0_seq, tick)
        self.counts: dict[str, int] = defaultdict(int)

    # -- WAL objects -------------------------------------------------------------------------

    def wal_landed(self, e: Event, key: str) -> None:
        m_key = WAL_KEY.match(key)
        if m_key is None:
            return
        root, wal_id = m_key["root"], int(m_key["id"])
        data = self.read(key)
        if not data:
            return  # gone already, or a fence
        try:
            wal = decode_wal_sst(bytes(data), key[len(root):])
        except Exception:  # noqa: BLE001 - a bit flip: not ours to judge (FLIP-1's)
            return
        rows = tuple((r.seq, r.create_ts_ms) for r in wal.rows if r.create_ts_ms is not None)
        if not rows:
            return
        self.counts["wal_rows_checked"] += len(rows)
        for (seq_a, ts_a), (seq_b, ts_b) in zip(rows, rows[1:]):
            if ts_b < ts_a:
                raise InvariantViolation("DUR-5", e, f"{key}: row seq {seq_b} created at {ts_b}, before row seq "
                                                       f"{seq_a} at {ts_a} (create times go back)")
        entry = (rows[0][0], rows[-1][0], rows)
        ids = self.wal_ids[root]
        if wal_id not in self.wal[root]:
            bisect.insort(ids, wal_id)
        self.wal[root][wal_id] = entry
        at = bisect.bisect_left(ids, wal_id)
        if at > 0:
            self._in_order(e, root, ids[at - 1], wal_id)
        if at + 1 < len(ids):
            self._in_order(e, root, wal_id, ids[at + 1])
        newest = self.tick.get(root)
        if newest is not None:
            self._not_before_tick(e, root, wal_id, entry, newest)

    def _in_order(self, e: Event, root: str, lower: int, upper: int) -> None:
        a, b = self.wal[root][lower], self.wal[root][upper]
        if a[1] < b[0] and b[2][0][1] < a[2][-1][1]:  # seqs in order (a replayed lower id), times not
            raise InvariantViolation(
                "DUR-5", e, f"{root}wal {upper}'s first row (seq {b[0]}) created at {b[2][0][1]}, before wal "
                              f"{lower}'s last row (seq {a[1]}) at {a[2][-1][1]} (create times go back)")

    # -- manifests ---------------------------------------------------------------------------

    def manifest_landed(self, e: Event, root: str, mid: int, m: ManifestV2) -> None:
        newest = self.tick.get(root)
        if mid == 1:
            self._forget(root)  # a new database (again, at the same root, after a destroy)
            newest = None
        if newest is not None and mid < newest[0]:
            return  # a late landing below the newest: that one was judged already
        self.tick[root] = now = (mid, m.last_l0_seq, m.last_l0_clock_tick)
        self.counts["manifests_checked"] += 1
        wal, ids = self.wal[root], self.wal_ids[root]
        keep = [i for i in ids if wal[i][1] > now[1]]  # rows at or below last_l0_seq are in L0: done
        for i in ids:
            if wal[i][1] <= now[1]:
                del wal[i]
        self.wal_ids[root] = keep
        for i in keep:
            self._not_before_tick(e, root, i, wal[i], now)

    def _not_before_tick(self, e: Event, root: str, wal_id: int, entry: _Rows, newest: tuple[int, int, int]) -> None:
        mid, last_l0_seq, tick = newest
        if entry[1] <= last_l0_seq:
            return
        for seq, ts in entry[2]:
            if seq > last_l0_seq and ts < tick:
                raise InvariantViolation(
                    "DUR-5", e, f"{root}wal {wal_id}: row seq {seq} (above last_l0_seq {last_l0_seq}) created at "
                                  f"{ts}, before manifest {mid}'s last_l0_clock_tick {tick}: a writer replaying it "
                                  f"refuses the tick (upstream InvalidClockTick)")

    def _forget(self, root: str) -> None:
        self.wal.pop(root, None)
        self.wal_ids.pop(root, None)
        self.tick.pop(root, None)
