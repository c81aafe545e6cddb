"""Options of :class:`slatedb.DbReader` (RFC 000 ``DbReaderOptions``), with the official 0.17
defaults: poll every 10 s, a checkpoint lifetime of 10 min, 64 MiB in-memory tables."""

from __future__ import annotations

import math
from typing import Any

import attrs

from slatedb.config import MIN_INTERVAL_S
from slatedb.errors import InvalidArgumentError

DEFAULT_MANIFEST_POLL_INTERVAL_S = 10.0
DEFAULT_CHECKPOINT_LIFETIME_S = 600.0
DEFAULT_MAX_MEMTABLE_BYTES = 64 * 1024 * 1024


def _positive_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidArgumentError(f"DbReaderOptions.{name} must be a positive number of seconds, got {value!r}")


@attrs.frozen
class DbReaderOptions:
    """How a :class:`~slatedb.DbReader` polls and how much it buffers.

    * ``manifest_poll_interval_s``: how often a reader without a given checkpoint polls the
      manifest (and, with ``follow_latest``, the WAL).
    * ``checkpoint_lifetime_s``: the lifetime of the checkpoints such a reader creates; it
      refreshes the expiry once less than half of it remains. Must exceed twice the poll
      interval (RFC 000), or a slow poll could let the checkpoint expire.
    * ``max_memtable_bytes``: the size at which an in-memory table of replayed WAL rows is
      closed and a new one started (the tables are kept as a list).
    * ``follow_latest``: also poll the WAL for objects written after the checkpoint was
      established and serve them, so the reader sees newer durable writes within a poll
      interval (as the official 0.17 reader does; without it the view advances only when the
      SST set changes and the checkpoint is re-established). Ignored with a given checkpoint.
    """

    manifest_poll_interval_s: float = DEFAULT_MANIFEST_POLL_INTERVAL_S
    checkpoint_lifetime_s: float = DEFAULT_CHECKPOINT_LIFETIME_S
    max_memtable_bytes: int = DEFAULT_MAX_MEMTABLE_BYTES
    follow_latest: bool = True

    def __new__(cls, *args: Any, **kwargs: Any) -> "DbReaderOptions":
        # A typo (``manifest_poll_interval=``) is refused with a typed error naming it, not with
        # the bare TypeError of attrs' ``__init__``.
        names = {a.name for a in attrs.fields(cls)}
        unknown = sorted(k for k in kwargs if k not in names)
        if unknown:
            raise InvalidArgumentError(f"unknown DbReaderOptions option: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        return object.__new__(cls)

    @classmethod
    def of(cls, value: Any) -> "DbReaderOptions":
        """``value`` as options: None (the defaults), a DbReaderOptions, or a dict of its fields
        (as ``settings=`` and the read and scan options take one)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                raise InvalidArgumentError(f"DbReaderOptions keys must be option names (str), got {sorted(map(repr, value))}")
            return cls(**value)
        raise InvalidArgumentError(f"options must be a DbReaderOptions or a dict, not {type(value).__name__}")

    def __attrs_post_init__(self) -> None:
        _positive_seconds("manifest_poll_interval_s", self.manifest_poll_interval_s)
        if self.manifest_poll_interval_s < MIN_INTERVAL_S:  # as every interval setting of a Db
            raise InvalidArgumentError(
                f"DbReaderOptions.manifest_poll_interval_s must be at least {MIN_INTERVAL_S} s (1 ms, the official "
                f"ReaderOptions' unit): a shorter one polls the store without pause, got {self.manifest_poll_interval_s!r}")
        _positive_seconds("checkpoint_lifetime_s", self.checkpoint_lifetime_s)
        if self.checkpoint_lifetime_s >= 2**32:  # the manifest holds an expiry as u32 seconds
            raise InvalidArgumentError(
                f"DbReaderOptions.checkpoint_lifetime_s must be below 2^32 s (a checkpoint's expiry is u32 "
                f"seconds in the manifest), got {self.checkpoint_lifetime_s!r}")
        if not self.checkpoint_lifetime_s > 2 * self.manifest_poll_interval_s:
            raise InvalidArgumentError(
                f"DbReaderOptions.checkpoint_lifetime_s ({self.checkpoint_lifetime_s}) must be greater than twice "
                f"manifest_poll_interval_s ({self.manifest_poll_interval_s}): the checkpoint could expire between polls"
            )
        m = self.max_memtable_bytes
        if isinstance(m, bool) or not isinstance(m, int) or m <= 0:
            raise InvalidArgumentError(f"DbReaderOptions.max_memtable_bytes must be a positive int, got {m!r}")
        if m > 2**64 - 1:  # the official ReaderOptions' u64
            raise InvalidArgumentError(f"DbReaderOptions.max_memtable_bytes must be at most 2^64 - 1 (u64), got {m!r}")
        if not isinstance(self.follow_latest, bool):
            raise InvalidArgumentError(f"DbReaderOptions.follow_latest must be a bool, got {self.follow_latest!r}")
