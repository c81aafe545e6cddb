"""The garbage collector (RFC 000 § "Garbage Collector", RFC 002, RFC 004).

:class:`GarbageCollector` deletes what no reader can need any more -- old manifests and
``.compactions`` files (behind the RFC 004 boundary), WAL objects outside every pinned range,
compacted SSTs that no live or checkpointed manifest references -- removes expired checkpoints,
detaches clones from parents they no longer use, and removes soft-destroyed databases. It runs
in the writer (``garbage_collector_options``), or standalone (``slatedb run-gc``, :func:`run_gc`).
See docs/gc.md and spec/protocols/checkpoints-gc.md.
"""

from .collector import DEFAULT_DB_DELETE_GRACE_S, GarbageCollector, Snapshot, run_gc
from .errors import GcInvariantError, PinnedManifestMissingError
from .stats import GcStats

__all__ = [
    "DEFAULT_DB_DELETE_GRACE_S",
    "GarbageCollector",
    "GcInvariantError",
    "GcStats",
    "PinnedManifestMissingError",
    "Snapshot",
    "run_gc",
]
