"""``slatedb check``: the structural invariants of ``spec/protocols/`` checked on any stored
database (ours or the official engine's; local directory, S3 or memory; clones, projections and
unions), read-only, each finding naming its invariant id and the object; plus a garbage report.
See docs/check.md."""

from .image import CheckAccessError, DbImage, load_image
from .report import CheckReport, Finding, Garbage
from .run import check, check_store

__all__ = ["CheckAccessError", "CheckReport", "DbImage", "Finding", "Garbage", "check", "check_store", "load_image"]
