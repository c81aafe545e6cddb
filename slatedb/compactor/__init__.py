"""The compactor: size-tiered scheduling, execution with resume, persisted job state.

Where things are: ``spec.py`` (what a compaction is, validation), ``scheduler.py`` (size-tiered
scheduler), ``executor.py`` (merge, retention, outputs, resume), ``store.py`` (the
``.compactions`` files, external submission), ``compactor.py`` (fencing, poll loop, commit).
Protocol: ``spec/protocols/compaction.md``.
"""

from .compactor import Compactor, CompactorEpochError, apply_compaction, failed_reason_key
from .scheduler import SizeTieredOptions, SizeTieredScheduler
from slatedb.manifest.compaction import CompactionSpec, L0Source, RunSource, full_spec, validate_spec
from .store import CompactionsStore, submit_compaction

__all__ = [
    "CompactionSpec",
    "CompactionsStore",
    "Compactor",
    "CompactorEpochError",
    "L0Source",
    "RunSource",
    "SizeTieredOptions",
    "SizeTieredScheduler",
    "apply_compaction",
    "failed_reason_key",
    "full_spec",
    "submit_compaction",
    "validate_spec",
]
