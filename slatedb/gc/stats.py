"""What one garbage-collection pass did, as a frozen value (summed over passes by ``+``)."""

from __future__ import annotations

import attrs


@attrs.frozen
class GcStats:
    """Counts of one :meth:`GarbageCollector.run_once` (or the total of a :meth:`run`).

    ``*_deleted`` count objects actually deleted; a directory in ``dry_run`` deletes nothing and
    counts its candidates in ``dry_run_candidates`` instead. ``boundary_advances`` counts the
    namespaces whose ``gc/<ns>.boundary`` this collector moved up. ``db_destroyed`` is True when
    the pass removed a soft-destroyed database (then ``destroyed_objects`` counts what it
    deleted, the last manifest included).
    """

    manifests_deleted: int = 0
    compactions_deleted: int = 0
    wal_deleted: int = 0
    wal_fences_deleted: int = 0
    ssts_deleted: int = 0
    checkpoints_expired: int = 0
    boundary_advances: int = 0
    clones_detached: int = 0
    dry_run_candidates: int = 0
    db_destroyed: bool = False
    destroyed_objects: int = 0

    def __add__(self, other: "GcStats") -> "GcStats":
        if not isinstance(other, GcStats):
            return NotImplemented
        # Positional, in field order (a GC world sums thousands of passes: issue 27 item 2).
        return GcStats(*[(a or b) if a.__class__ is bool else a + b
                         for a, b in zip(map(self.__getattribute__, _FIELDS), map(other.__getattribute__, _FIELDS))])

    def as_dict(self) -> dict[str, int | bool]:
        """The counts by field name, in field order (``attrs.asdict`` without its recursion)."""
        return dict(zip(_FIELDS, map(self.__getattribute__, _FIELDS)))

    @property
    def deleted(self) -> int:
        """Every object deleted by the pass."""
        return (self.manifests_deleted + self.compactions_deleted + self.wal_deleted + self.wal_fences_deleted
                + self.ssts_deleted + self.destroyed_objects)


#: The field names of :class:`GcStats`, in order.
_FIELDS = tuple(f.name for f in attrs.fields(GcStats))
