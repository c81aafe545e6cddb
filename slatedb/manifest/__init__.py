"""The manifest: the database's state, versioned as ``manifest/<id:020>.manifest``.

Protocol: ``spec/protocols/sequenced-metadata.md`` (SEQMETA-*, BOUNDARY-*). Every change is a
typed edit (:mod:`slatedb.manifest.edits`) committed by :meth:`ManifestStore.commit`.
"""

from .edit import Attempt, Change, CompactorFence, Edit, WriterFence, apply_edit
from .store import (
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    Committed,
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
    "Attempt",
    "Change",
    "Committed",
    "CompactorFence",
    "Edit",
    "ManifestConflict",
    "ManifestStore",
    "StoredManifest",
    "WriterFence",
    "apply_edit",
    "manifest_key",
    "parse_id",
    "read_boundary",
]
