"""Manifest projection and union (RFC 000 "Manifest Projection and Union"): splitting a
database into key-range shards and merging shards back, without copying SSTs.

:func:`project` and :func:`union` are pure functions over manifests (``ops``);
:func:`create_database` (``create``) makes a database from one or several sources, each at its
own checkpoint and projected onto its own range (the official ``CloneBuilder`` with
``CloneSourceSpec``s). See docs/rescaling.md and spec/protocols/projection-union.md.
"""

from __future__ import annotations

from .ops import UnionSource, manifest_bounds, owned_sst_ids, project, referenced_sst_ids, referencing, union
from .ranges import FULL_RANGE, KeyRange, format_range, parse_range

__all__ = [
    "FULL_RANGE", "KeyRange", "UnionSource", "format_range", "manifest_bounds", "owned_sst_ids",
    "parse_range", "project", "referenced_sst_ids", "referencing", "union",
]
