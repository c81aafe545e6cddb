"""Object stores: one async interface, backends for memory, a local directory and S3."""

from .base import (
    CREATE_IF_ABSENT,
    OVERWRITE,
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutKind,
    PutMode,
    install_url_resolver,
    validate_key,
)
from .memory import DEFAULT_REGISTRY, MemoryRegistry, MemoryStore
from .url import resolve_store

# The package wires its parts: a store reaches another database's store (ObjectStore.open_url)
# through the resolver, which imports the stores, so the stores never import it.
install_url_resolver(resolve_store)

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
