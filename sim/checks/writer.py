"""Invariant checks the simulator applies to the event trace of every run.

Each check is named by the invariant id of ``spec/protocols/`` it enforces and reads only the
protocol events the engine reports through ``Runtime.event`` (see the trace vocabulary in
``spec/protocols/README.md``). A violation raises :class:`InvariantViolation` at the event that
breaks the rule, so the failing trace ends exactly there.
"""

from __future__ import annotations

from collections import defaultdict

from sim.world.invariants import InvariantViolation
from sim.world.trace import Event, Trace, listens


def _wal_id(path: str) -> int:
    return int(path.rsplit("/", 1)[1].split(".")[0])


class WriterChecks:
    """FENCE-1, FENCE-3, FENCE-4, DUR-1, DUR-3 and BOUNDARY-3 over the events of one simulated world."""

    def __init__(self) -> None:
        self.halted: set[str] = set()
        self.fences: list[tuple[int, int]] = []  # (epoch, fence id)
        self.acks: list[tuple[int, int, Event]] = []  # (wal id, epoch, event)
        self.wal_created: set[int] = set()
        self.wal_floor = 0
        self.epochs_seen: dict[int, str] = {}
        self.pending_puts: dict[tuple[str, int], str] = {}
        self.boundary_reads: dict[str, list[int]] = defaultdict(list)
        #: Events by kind, of the kinds :meth:`on_event` listens to, and ``fault.transient`` (a
        #: store result that is a transient error): what the scenarios' fault counts read.
        self.counts: dict[str, int] = defaultdict(int)
        self.acked_seq: dict[str, int] = defaultdict(int)  # process -> highest seq of its acks

    def attach(self, trace: Trace) -> "WriterChecks":
        trace.listeners.append(self.on_event)
        return self

    def durable_returned(self, process: str, seq: int, e: Event) -> None:
        """DUR-3: a client's durable wait for ``seq`` returned (``e``: the trace's last event
        then): ``process`` must have acknowledged a WAL object holding it (an ``ack`` event with
        a seq at least ``seq``) before."""
        if self.acked_seq[process] < seq:
            raise InvariantViolation("DUR-3", e, f"{process}: a durable wait for seq {seq} returned, but its "
                                     f"WAL acks reach only seq {self.acked_seq[process]}")

    # Called on the kinds it checks and on those the scenarios' fault counts read from
    # ``counts`` (most of a run's events are store gets and lists it has nothing to do with).
    @listens("writer_epoch", "store.put", "store.result", "create", "fence_written", "ack", "halt", "boundary_read",
             "commit", "store.reply-lost", "fault.stall", "fault.pause", "crash", "clock.skew", "clock.jump",
             "fault.bitflip", "corruption")
    def on_event(self, e: Event) -> None:
        f = e.f
        kind = e.kind
        self.counts[kind] += 1
        if kind == "store.result" and f.get("outcome") == "transient-error":
            self.counts["fault.transient"] += 1
        if kind == "writer_epoch":
            # FENCE-4: every writer-open bump yields an epoch nobody else holds.
            epoch = f["epoch"]
            owner = self.epochs_seen.get(epoch)
            if owner is not None and owner != e.process:
                raise InvariantViolation("FENCE-4", e, f"epoch {epoch} already held by {owner}")
            self.epochs_seen[epoch] = e.process
        elif kind == "store.put":
            # The store's own events: a request leaves (here) and applies later (store.result).
            key = f["key"]
            if key.startswith("wal/"):
                if e.process in self.halted:
                    raise InvariantViolation("FENCE-3", e, f"{e.process} sent a create of {key} after it halted")
                self.pending_puts[(e.process, f["n"])] = key
        elif kind == "store.result":
            key = self.pending_puts.pop((e.process, f["n"]), None)
            if key is not None and str(f["outcome"]).startswith("ok"):
                wal_id = _wal_id(key)
                if wal_id > 1 and (wal_id - 1) not in self.wal_created and wal_id - 1 > self.wal_floor:
                    raise InvariantViolation("FENCE-1", e, f"{key} created while wal id {wal_id - 1} does not exist")
                self.wal_created.add(wal_id)
        elif kind == "create":
            if f["path"].startswith("manifest/"):
                self.boundary_reads[e.process] = []
        elif kind == "fence_written":
            epoch, fence = f["epoch"], f["id"]
            for wal_id, acked_epoch, ack in self.acks:
                if acked_epoch < epoch and wal_id >= fence:
                    raise InvariantViolation("DUR-1", e, f"ack of wal {wal_id} (epoch {acked_epoch}) is above fence {fence}")
            self.fences.append((epoch, fence))
        elif kind == "ack":
            if e.process in self.halted:
                raise InvariantViolation("FENCE-3", e, f"{e.process} acknowledged after it halted")
            wal_id, epoch = _wal_id(f["path"]), f["epoch"]
            for fence_epoch, fence in self.fences:
                if fence_epoch > epoch and wal_id >= fence:
                    raise InvariantViolation("DUR-1", e, f"wal {wal_id} acked at epoch {epoch} is above epoch {fence_epoch}'s fence {fence}")
            self.acks.append((wal_id, epoch, e))
            self.acked_seq[e.process] = max(self.acked_seq[e.process], f["seq"])
        elif kind == "halt":
            self.halted.add(e.process)
        elif kind == "boundary_read":
            self.boundary_reads[e.process].append(f["boundary"])
        elif kind == "commit":
            # BOUNDARY-3: success only after a post-create boundary read below the id.
            ns, i = f["ns"], f["id"]
            reads = self.boundary_reads.get(e.process, [])
            if not reads or reads[-1] >= i:
                raise InvariantViolation("BOUNDARY-3", e, f"{ns} id {i} committed without a boundary read below it")
