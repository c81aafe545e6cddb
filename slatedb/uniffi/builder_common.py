"""The builder calls ``DbBuilder`` and ``DbReaderBuilder`` share (the official builders repeat
them): the merge operator, the metrics recorder, the cache switches, and what this engine refuses
(foyer/moka caches, filter policies, segments, a separate WAL store)."""

from __future__ import annotations

from typing import Any

from slatedb.uniffi.errors import refused
from slatedb.uniffi.handles import MergeOperator
from slatedb.uniffi.observe import attach_recorder


class SharedBuilderCalls:
    """Mixin: sets ``_merge``, ``_recorder`` and ``_no_cache`` on the builder."""

    _merge: Any = None
    _no_cache: bool = False

    def with_merge_operator(self, merge_operator: Any) -> None:
        if not isinstance(merge_operator, MergeOperator):
            raise TypeError(f"merge_operator must subclass MergeOperator, not {type(merge_operator).__name__}")
        self._merge = merge_operator

    def with_metrics_recorder(self, metrics_recorder: Any) -> None:
        self._recorder = attach_recorder(metrics_recorder)

    def with_db_cache(self, db_cache: Any, db_cache_id: int) -> None:
        raise refused("with_db_cache (foyer/moka caches)", "the block cache is in memory, sized by settings")

    def with_db_cache_disabled(self) -> None:
        self._no_cache = True

    def with_filter_policies(self, policies: list) -> None:
        raise refused("with_filter_policies", "SSTs carry this engine's bloom filter")

    def with_segment_extractor(self, extractor: Any) -> None:
        raise refused("with_segment_extractor (segments)", "databases have one segment")

    def with_wal_object_store(self, wal_object_store: Any) -> None:
        raise refused("with_wal_object_store", "the WAL lives in the database's own store")
