"""The checks across settings that a writer's open makes (:func:`check_writer_settings`).

Raised at ``Db.open`` (sync and async, at the call), before anything is started; a reader, which
writes nothing, does not make them. Each names a combination of valid settings under which a
write could wait for good: refused rather than honoured with a hang.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slatedb.errors import InvalidArgumentError
from slatedb.settings_scheduler import PREFIX, SizeTieredOptions

if TYPE_CHECKING:
    from slatedb.config import Settings


def check_writer_settings(settings: Settings) -> Settings:
    """Refuse (:class:`InvalidArgumentError`) the settings under which a writer's writes could
    wait for good:

    - ``max_unflushed_bytes`` not above ``l0_sst_size_bytes`` (the official builder's check, with
      its words): writes wait while more than ``max_unflushed_bytes`` are unflushed, and a
      memtable goes to L0 only once it holds ``l0_sst_size_bytes``;
    - with the in-process compactor, ``l0_max_ssts`` below the size-tiered scheduler's
      ``min_compaction_sources``: the L0 flush stops once L0 holds ``l0_max_ssts`` SSTs, the
      compactor compacts L0 only from ``min_compaction_sources`` SSTs on, so L0 would stay full
      and writes wait once ``max_unflushed_bytes`` are buffered (the official engine accepts it
      and hangs: upstream slatedb #854, #872, #922). A database without an in-process compactor
      (``compactor_options`` None) is compacted elsewhere, under settings this open cannot see.
    """
    if settings.max_unflushed_bytes <= settings.l0_sst_size_bytes:
        raise InvalidArgumentError(
            f"invalid configuration: max_unflushed_bytes ({settings.max_unflushed_bytes}) must be greater than "
            f"l0_sst_size_bytes ({settings.l0_sst_size_bytes}): writes wait while more than max_unflushed_bytes "
            "are unflushed, and a memtable goes to L0 only once it holds l0_sst_size_bytes")
    compactor = settings.compactor_options
    if compactor is not None:
        least = SizeTieredOptions.from_map(compactor.scheduler_options).min_compaction_sources
        if settings.l0_max_ssts < least:
            raise InvalidArgumentError(
                f"invalid configuration: l0_max_ssts ({settings.l0_max_ssts}) must be at least "
                f"{PREFIX}.min_compaction_sources ({least}): the L0 flush stops once L0 holds l0_max_ssts SSTs, "
                "and the in-process compactor compacts L0 only from min_compaction_sources SSTs on, so L0 would "
                "stay full and writes wait for good")
    return settings
