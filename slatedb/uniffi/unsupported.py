"""Official classes whose features this engine does not have: each constructor refuses at the
call with ``Error.Invalid`` naming what to use instead."""

from __future__ import annotations

from typing import Any

from slatedb.uniffi.errors import refused


class DbCache:
    """The official foyer / moka / split block caches: refused (the block cache here is in
    memory, sized by the ``block_cache_size_bytes`` setting)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise refused("DbCache", "the block cache is in memory, sized by settings")

    @staticmethod
    def new_foyer_cache(*args: Any) -> "DbCache":
        raise refused("DbCache.new_foyer_cache (foyer cache)", "the block cache is in memory, sized by settings")

    @staticmethod
    def new_moka_cache(*args: Any) -> "DbCache":
        raise refused("DbCache.new_moka_cache (moka cache)", "the block cache is in memory, sized by settings")

    @staticmethod
    def new_split_cache(*args: Any) -> "DbCache":
        raise refused("DbCache.new_split_cache", "the block cache is in memory, sized by settings")


class FilterPolicy:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise refused("FilterPolicy", "SSTs carry this engine's bloom filter (filter_bits_per_key setting)")

    @staticmethod
    def bloom(*args: Any) -> "FilterPolicy":
        raise refused("FilterPolicy.bloom", "SSTs carry this engine's bloom filter (filter_bits_per_key setting)")

    @staticmethod
    def bloom_with_options(*args: Any) -> "FilterPolicy":
        raise refused("FilterPolicy.bloom_with_options", "set filter_bits_per_key in the settings")


class PrefixExtractor:
    """Segments (RFC 0024): refused; databases have one segment."""

    def name(self) -> str:
        raise NotImplementedError

    def prefix_len(self, key: bytes, target: Any) -> Any:
        raise NotImplementedError

