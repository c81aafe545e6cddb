"""Object stores: one async interface, backends for memory, a local directory and S3."""

from .base import (
    CREATE_IF_ABSENT,
    OVERWRITE,
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutKind,
    PutMode,
    validate_key,
)
from .memory import DEFAULT_REGISTRY, MemoryRegistry, MemoryStore
from .url import resolve_store

__all__ = [
    "CREATE_IF_ABSENT",
    "DEFAULT_REGISTRY",
    "GetResult",
    "MemoryRegistry",
    "MemoryStore",
    "OVERWRITE",
    "ObjectMeta",
    "ObjectStore",
    "PutKind",
    "PutMode",
    "resolve_store",
    "validate_key",
]
