"""What a compaction is (RFC 003): re-exported from :mod:`slatedb.manifest.compaction`, where
the rule lives next to the manifest edit that applies a compaction."""

from slatedb.manifest.compaction import (
    CompactionSpec,
    L0Source,
    RunSource,
    Source,
    full_spec,
    logical_order,
    validate_spec,
)

__all__ = ["CompactionSpec", "L0Source", "RunSource", "Source", "full_spec", "logical_order", "validate_spec"]
