"""The manifest: the database's state, versioned as ``manifest/<id:020>.manifest``.

Protocol: ``spec/protocols/sequenced-metadata.md`` (SEQMETA-*, BOUNDARY-*).
"""

from .store import (
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    ManifestConflict,
    ManifestStore,
    StoredManifest,
    manifest_key,
    parse_id,
    read_boundary,
)

__all__ = [
    "MANIFEST_BOUNDARY_KEY",
    "MANIFEST_DIR",
    "ManifestConflict",
    "ManifestStore",
    "StoredManifest",
    "manifest_key",
    "parse_id",
    "read_boundary",
]
