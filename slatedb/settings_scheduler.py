"""The size-tiered scheduler's options (``compactor_options.scheduler_options``, a string map).

:mod:`slatedb.config` checks the map through :meth:`SizeTieredOptions.from_map` when settings are
built (``Settings(...)``, a dict, a file, ``attrs.evolve``), so a bad option raises
:class:`~slatedb.errors.InvalidArgumentError` at that call, not later in the compactor's
background task; :mod:`slatedb.compactor.scheduler` builds its scheduler from the same class.
"""

from __future__ import annotations

from typing import Mapping

import attrs

from slatedb.errors import InvalidArgumentError

#: The map's prefix in messages.
PREFIX = "compactor_options.scheduler_options"


@attrs.frozen
class SizeTieredOptions:
    min_compaction_sources: int = 4
    max_compaction_sources: int = 8
    include_size_threshold: float = 4.0

    def __attrs_post_init__(self) -> None:
        if self.min_compaction_sources < 1:
            raise InvalidArgumentError(f"min_compaction_sources must be >= 1, got {self.min_compaction_sources}")
        if self.max_compaction_sources < self.min_compaction_sources:
            raise InvalidArgumentError(
                f"max_compaction_sources ({self.max_compaction_sources}) must be >= min_compaction_sources "
                f"({self.min_compaction_sources})")
        if not self.include_size_threshold >= 1.0:
            raise InvalidArgumentError(f"include_size_threshold must be >= 1.0, got {self.include_size_threshold}")

    @classmethod
    def from_map(cls, options: Mapping[str, str]) -> "SizeTieredOptions":
        """From ``compactor_options.scheduler_options`` (values are strings, as in the official engine)."""
        known = {"min_compaction_sources": int, "max_compaction_sources": int, "include_size_threshold": float}
        kwargs = {}
        for name, text in options.items():
            if name not in known:
                raise InvalidArgumentError(f"unknown scheduler option {PREFIX}.{name}")
            try:
                kwargs[name] = known[name](str(text))
            except ValueError as e:
                raise InvalidArgumentError(f"{PREFIX}.{name}: {text!r} is not a {known[name].__name__}") from e
        try:
            return cls(**kwargs)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"setting {PREFIX}: {e}") from None
