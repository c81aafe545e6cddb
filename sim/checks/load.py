"""The bulk-load oracle (spec/protocols/bulk-load.md): a live writer's history and the loads that
committed into its database, judged against every manifest and WAL object the run left.

The ``load`` scenario (``sim/scenarios/load.py``) runs no GC and no compactor, so every manifest
and every WAL object it wrote is still in the bucket at the end: the oracle reads them all
(:func:`collect`) and judges, with the scenario's own record of what the writer acknowledged and
what each load's driver staged and was told (:class:`Write`, :class:`Load`):

* **LOAD-1** (all or nothing): in every manifest, the rows carrying a load's seq are none of its
  rows or all of them; a load whose commit returned is in some manifest, a refused one in none;
* **LOAD-6** (no row twice; clean-up is safe): those rows are exactly the attempt the driver
  committed (no row of a retried or speculative attempt), and every SST the latest manifest
  references still exists after every clean-up and abort; and, as it happens
  (:class:`CleanupChecks` on the trace), no delete of a load's process removes an SST the latest
  manifest references at that moment;
* **LOAD-4** (real-time order): the manifest that shows a load's rows raises ``last_l0_seq`` to
  the load's seq; a write acknowledged before a load's commit was called carries a seq below the
  load's; an acknowledged write called after the commit returned carries a seq above it;
* **LOAD-5** (unique load seq): no two committed loads share a seq, no load commits over a
  manifest whose ``last_l0_seq`` reached its seq (another load's, planned later, committed
  first), and no row of a WAL object below a committed load's fence reaches it;
* **LOAD-7** (``last_l0_seq`` keeps its meaning): in an append load's commit manifest, every row of every
  WAL object at or below its ``replay_after_wal_id`` (the fence; above an earlier overwrite's) is
  in one of its SSTs, or a newer version of its key below the load's seq is (the load's own rows
  shadow it but do not hold it): the WAL tail went to L0 in the same update;
* **DUR-1** (end to end): the final read of every key returns a version at least as new as the
  newest acknowledged durable write of the key and the newest committed load row of it; an
  overwrite load drops every row below its seq (older rows then neither count nor may be read:
  LOAD-1), and the rows of loads committed before it (LOAD-1's "lost" does not apply).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import attrs
from ulid import ULID

from slatedb.errors import ObjectNotFoundError
from slatedb.format.manifest import decode_manifest_v2
from slatedb.format.sst_reader import SstReader
from slatedb.format.types import ManifestV2
from slatedb.gc.retention import manifest_sst_ids
from slatedb.lsm.paths import SstLocator
from slatedb.lsm.view import sst_key
from slatedb.manifest.store import ManifestStore
from slatedb.objstore.base import ObjectStore
from slatedb.row import RowKind
from slatedb.runtime import Runtime
from slatedb.wal.reader import WalReaderCore

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace

_SST_KEY = re.compile(r"^compacted/(?P<id>[0-9A-Z]{26})\.sst$")
_MANIFEST_KEY = re.compile(r"^manifest/[0-9]{20}\.manifest$")


class CleanupChecks:
    """LOAD-6 as it happens: when a delete of an SST by one of ``is_load(process)``'s processes
    applies, the latest manifest in the bucket (``objects``: key -> (bytes, ...)) does not
    reference it. Run by the ``load`` scenario, where no GC or compactor deletes SSTs."""

    def __init__(self, objects: dict, is_load: Callable[[str], bool]) -> None:
        self.objects = objects
        self.is_load = is_load
        self.pending: dict[tuple[str, int], str] = {}
        self.deletes = 0

    def attach(self, trace: Trace) -> "CleanupChecks":
        trace.listeners.append(self.on_event)
        return self

    def on_event(self, e: Event) -> None:
        if e.kind == "store.delete" and self.is_load(e.process):
            f = e.f
            if _SST_KEY.match(f["key"]):
                self.pending[(e.process, f["n"])] = f["key"]
        elif e.kind == "store.result":
            f = e.f
            key = self.pending.pop((e.process, f["n"]), None)
            if key is None or not str(f["outcome"]).startswith("ok"):
                return
            self.deletes += 1
            manifests = sorted(k for k in self.objects if _MANIFEST_KEY.match(k))
            if not manifests:
                return
            latest = decode_manifest_v2(bytes(self.objects[manifests[-1]][0]), manifests[-1])
            sid = _SST_KEY.match(key)["id"]  # type: ignore[index]
            if ULID.from_str(sid) in manifest_sst_ids(latest):
                raise InvariantViolation("LOAD-6", e, f"{e.process} deleted {key}, which the latest manifest "
                                                      f"({manifests[-1]}) references")


@attrs.define
class Write:
    """One put of the live writer: its value is unique in the run."""

    key: bytes
    value: bytes
    called_s: float
    seq: int | None = None  # known once the put returned
    acked_s: float | None = None  # when its durable wait returned


@attrs.define
class Load:
    """One load's driver: its plan's seq, the rows of the attempt of each partition it passed to
    the commit, every attempt's values, and what the commit told it."""

    name: str
    seq: int | None = None
    load_id: str | None = None
    overwrite: bool = False
    rows: dict = attrs.Factory(dict)  # key -> value (None: a delete): the attempts the commit was given
    attempt_values: set = attrs.Factory(set)  # every value any attempt staged
    staged_ids: set = attrs.Factory(set)  # every SST id any attempt staged
    staged_infos: set = attrs.Factory(set)  # their SsTableInfo (a re-minted copy has the same)
    commit_called_s: float | None = None
    outcome: str = "planned"  # planned | committed | refused | crashed | empty
    returned_s: float | None = None
    why: str = ""  # a refused commit's reason
    sharded: bool = False  # the union route (sim/scenarios/load_sharded.py): staged_ids are its shards' SSTs
    aborted: bool = False  # its driver crashed and an operator aborted it
    ended: bool = False  # its end ran to completion: the driver's clean-up, or an operator's abort (LOAD-10)
    done: bool = False  # its driver's process is over, whatever the outcome (a second sharded load waits for it)
    crash_then_abort: bool = False  # its driver crashes and an operator aborts it (then re-runs the job: s2)


@attrs.frozen
class Store:
    """What the run left: manifests by id, the rows of each WAL object, the rows of each SST."""

    manifests: dict[int, ManifestV2]
    wal: dict[int, list]  # wal id -> rows
    ssts: dict[ULID, list | None]  # sst id -> rows (None: the SST is gone)


async def collect(store: ObjectStore, rt: Runtime) -> Store:
    manifests_store = ManifestStore(store, rt)
    manifests = {i: (await manifests_store.read(i)).manifest for i in await manifests_store.list_ids()}
    wal_reader = WalReaderCore(store, rt)
    wal = {i: list(await wal_reader.read(i) or ()) for i in await wal_reader.wal_ids()}
    ssts: dict[ULID, list | None] = {}
    locator = SstLocator(store, rt)
    try:
        for m in manifests.values():
            external = {sid: e.path for e in m.external_dbs for sid in e.sst_ids}  # a sharded load's union
            for sid in sorted(manifest_sst_ids(m) - set(ssts)):
                where = await locator.root_of(external[sid]) if sid in external else store
                try:
                    reader = await SstReader.open(where, sst_key(sid))
                    ssts[sid] = [row async for row in reader.scan()]
                except ObjectNotFoundError:
                    ssts[sid] = None
    finally:
        await locator.aclose()
    return Store(manifests, wal, ssts)


def _load_rows(s: Store, m: ManifestV2, ld: "Load") -> dict[bytes, Any]:
    """The rows of ``ld``'s SSTs that ``m``'s L0 and sorted runs show (what a reader sees): the
    SSTs an attempt of it staged, or their copies (the commit re-mints an SST under a new id,
    byte for byte: the same info)."""
    info = {sst.id: sst.info for sst in m.ssts}
    visible = {v.sst_id for v in m.l0} | {v.sst_id for run in m.compacted for v in run.ssts}
    out: dict[bytes, Any] = {}
    for sid in sorted(visible):
        rows = s.ssts.get(sid) or ()
        if info.get(sid) in ld.staged_infos and _staged_by(rows, ld):
            for row in rows:
                out[row.key] = row.value if row.kind == RowKind.VALUE else None
    return out


def _staged_by(rows: list, ld: "Load") -> bool:
    """Whether an SST with these rows is one ``ld`` staged: every row at its seq, every value one
    of its attempts' (two loads' SSTs may share an info: the same keys, values of one length)."""
    return bool(rows) and all(r.seq == ld.seq and (r.kind != RowKind.VALUE or r.value in ld.attempt_values)
                              for r in rows)


def _newest(s: Store, m: ManifestV2, below_seq: int) -> dict[bytes, int]:
    """Key -> the newest seq below ``below_seq`` of it in ``m``'s SSTs."""
    out: dict[bytes, int] = {}
    for sid in manifest_sst_ids(m):
        for row in s.ssts.get(sid) or ():
            if row.seq < below_seq:
                out[row.key] = max(out.get(row.key, 0), row.seq)
    return out


def check(writes: Iterable[Write], loads: Iterable[Load], s: Store, final: dict[bytes, Any]) -> list[str]:
    """Every violation, as ``"ID: what"`` messages."""
    writes, loads = list(writes), list(loads)
    out: list[str] = []
    committed: list[tuple[Load, int]] = []
    planned = [ld for ld in loads if ld.seq is not None]
    shown = {ld.name: [i for i in sorted(s.manifests) if _load_rows(s, s.manifests[i], ld)] for ld in planned}
    #: manifest id -> the overwrite load whose commit it is (it drops every older row)
    overwrites = {shown[ld.name][0]: ld for ld in planned if ld.overwrite and shown[ld.name]}
    for ld in planned:
        # LOAD-1 and LOAD-6 in every manifest: none of the load's rows, or exactly its committed attempts'.
        at = None
        for i in sorted(s.manifests):
            rows = _load_rows(s, s.manifests[i], ld) if i in shown[ld.name] else {}
            if not rows:
                if at is not None:
                    if any(at < o <= i for o in overwrites):
                        break  # a later overwrite load dropped them
                    out.append(f"LOAD-1: manifest {i} lost {ld.name}'s rows, visible from manifest {at} on")
                    break
                continue
            if at is None:
                at = i
                if s.manifests[i].last_l0_seq != ld.seq:  # later writes must get seqs above the load's
                    out.append(f"LOAD-4: manifest {i} shows {ld.name}'s rows with last_l0_seq "
                               f"{s.manifests[i].last_l0_seq}, not the load's seq {ld.seq}")
            if ld.outcome == "refused":
                out.append(f"LOAD-1: {ld.name}'s commit was refused but manifest {i} shows {len(rows)} of its rows")
                break
            if rows != ld.rows:
                missing = sorted(set(ld.rows) - set(rows))
                wrong = sorted(k for k in rows if k in ld.rows and rows[k] != ld.rows[k])
                stray = sorted(set(rows) - set(ld.rows))
                which = "LOAD-6" if wrong and not missing and not stray else "LOAD-1"
                out.append(f"{which}: manifest {i} shows {len(rows)} of {ld.name}'s {len(ld.rows)} rows "
                           f"(missing {missing[:3]}, another attempt's or a wrong value {wrong[:3]}, "
                           f"stray {stray[:3]})")
                break
        if ld.outcome == "committed" and at is None:
            out.append(f"LOAD-1: {ld.name}'s commit returned but no manifest shows its rows")
        if at is not None:
            committed.append((ld, at))
    # LOAD-5: unique seqs; no WAL row below a committed load's fence reaches its seq.
    seqs = [ld.seq for ld, _ in committed]
    if len(seqs) != len(set(seqs)):
        out.append(f"LOAD-5: two committed loads share a seq ({sorted(seqs)})")
    for ld, at in committed:
        m = s.manifests[at]
        below = [i for i in s.manifests if i < at]
        if below and s.manifests[max(below)].last_l0_seq >= ld.seq:
            out.append(f"LOAD-5: {ld.name} committed at seq {ld.seq} in manifest {at} over manifest {max(below)}, "
                       f"whose last_l0_seq {s.manifests[max(below)].last_l0_seq} already reached it")
        over = [(i, r.seq) for i, rows in s.wal.items() if i < m.replay_after_wal_id for r in rows if r.seq >= ld.seq]
        if over:
            out.append(f"LOAD-5: WAL rows below {ld.name}'s fence {m.replay_after_wal_id} reach its seq {ld.seq}: "
                       f"{over[:3]}")
        if ld.overwrite:
            continue  # an overwrite drops the WAL below its fence on purpose
        # LOAD-7: the WAL at or below the commit's replay point is in the commit manifest's SSTs:
        # each row, or a newer version of its key *below the load's seq* (the writer's own, which
        # superseded it before a flush). The load's own rows (seq = its seq) do not count: a WAL row
        # they shadow is still missing from L0 (a read at a seq below the load's, a change feed,
        # would miss it), and "every seq up to last_l0_seq is in L0" is what LOAD-7 says. Before
        # this bound, load-wal-tail-short went unseen in mixed load seed 42: the lost row's key
        # (k02) was one the load also wrote. (Mixed seed 154 is no such case: there the switch
        # changes nothing, the commit's tail (86, 87) is empty, the run's digest is the same.)
        newest = _newest(s, m, ld.seq)
        dropped = max((s.manifests[o].replay_after_wal_id for o in overwrites if o < at), default=0)
        lost = [(i, r.key, r.seq) for i, rows in sorted(s.wal.items()) if dropped < i <= m.replay_after_wal_id
                for r in rows if newest.get(r.key, 0) < r.seq]
        if lost:
            out.append(f"LOAD-7: {ld.name}'s commit (manifest {at}, replay_after_wal_id {m.replay_after_wal_id}, "
                       f"last_l0_seq {m.last_l0_seq}) leaves {len(lost)} WAL rows out of its SSTs, first "
                       f"(wal id, key, seq) {lost[:3]}")
    # LOAD-4: real-time order of the writer's writes around each committed load.
    for ld, _at in committed:
        for w in writes:
            if w.seq is None:
                continue
            if w.acked_s is not None and ld.commit_called_s is not None and w.acked_s < ld.commit_called_s \
                    and w.seq >= ld.seq:
                out.append(f"LOAD-4: write of {w.key!r} acknowledged at {w.acked_s:.3f} s, before {ld.name}'s commit "
                           f"was called ({ld.commit_called_s:.3f} s), carries seq {w.seq} >= the load's {ld.seq}")
                break
            if ld.returned_s is not None and w.acked_s is not None and w.called_s > ld.returned_s \
                    and w.seq <= ld.seq:
                out.append(f"LOAD-4: write of {w.key!r} called at {w.called_s:.3f} s, after {ld.name}'s commit "
                           f"returned ({ld.returned_s:.3f} s), carries seq {w.seq} <= the load's {ld.seq}")
                break
    # LOAD-6: every SST the latest manifest references exists after the clean-ups.
    if s.manifests:
        latest = s.manifests[max(s.manifests)]
        gone = sorted(str(i) for i in manifest_sst_ids(latest) if s.ssts.get(i) is None)
        if gone:
            staged = set().union(*(ld.staged_ids for ld in loads))
            which = "LOAD-6" if any(g in staged for g in gone) else "LOAD-3"
            out.append(f"{which}: the latest manifest references SSTs that are gone: {gone[:3]}")
    out += durability(writes, [ld for ld, _ in committed], loads, final)
    return out


def durability(writes: list[Write], committed: list[Load], loads: list[Load], final: dict[bytes, Any]) -> list[str]:
    """DUR-1 end to end: the final version of each key is at least as new as its newest
    acknowledged write and its newest committed load row."""
    seq_of: dict[bytes, int] = {w.value: w.seq for w in writes if w.seq is not None}
    maybe_unknown = {w.value for w in writes if w.seq is None}  # a put whose call never returned
    # An overwrite load drops every row below its seq: only what came at or after it counts.
    erased = max((ld.seq for ld in committed if ld.overwrite), default=0)
    out: list[str] = []
    for key, got in sorted(final.items()):
        floor = max((w.seq for w in writes if w.key == key and w.acked_s is not None and w.seq is not None
                     and w.seq > erased), default=0)
        floor = max([floor] + [ld.seq for ld in committed if key in ld.rows and ld.seq >= erased])
        if got is None:
            ok = floor == 0 or any(ld.seq >= floor and key in ld.rows and ld.rows[key] is None
                                   for ld in committed)
            if not ok:
                out.append(f"DUR-1: {key!r} reads as absent, but a write or load row at seq {floor} was acknowledged")
            continue
        if got in seq_of:
            seq = seq_of[got]
        elif got in maybe_unknown:
            continue
        else:
            hits = [ld.seq for ld in committed if ld.rows.get(key) == got]
            if not hits:
                source = [ld.name for ld in loads if got in ld.attempt_values]
                what = f"a value of {source[0]} that never committed" if source else "a value nobody wrote"
                out.append(f"{'LOAD-1' if source else 'DUR-1'}: {key!r} reads {got!r}, {what}")
                continue
            seq = max(hits)
        if seq < floor:
            out.append(f"DUR-1: {key!r} reads the version at seq {seq}, older than the acknowledged seq {floor}")
        elif seq < erased:
            out.append(f"LOAD-1: {key!r} reads the version at seq {seq}, below the overwrite load at seq {erased}")
    return out
