"""SlateDB in Python: an LSM key-value store whose only storage is an object store.

``with slatedb.Db.open("file:///path/to/db") as db: db.put(b"key", b"value")``; the trio
API with the same shape is :mod:`slatedb.aio`.
"""

from slatedb.api.options import (
    CloseReason,
    DbReaderStatus,
    DbStatus,
    DurabilityLevel,
    IterationOrder,
    KeyValue,
    ReadOptions,
    ScanOptions,
)
from slatedb.api.metrics_export import metrics_collector
from slatedb.api.txn import IsolationLevel, Transaction
from slatedb.batch import NO_EXPIRY, WriteBatch
from slatedb.checkpoint import CheckpointCreateResult, CheckpointOptions, CheckpointScope
from slatedb.config import Settings
from slatedb.db import Db, DbIterator, Snapshot, WriteHandle
from slatedb.errors import (
    ClosedError,
    CorruptionError,
    Fenced,
    FencedError,
    InvalidArgumentError,
    ManifestsMissingError,
    MergeOperatorError,
    MergeOperatorMissingError,
    NotFoundError,
    ReadOnlyError,
    ReentrantCallError,
    SeekKeyOutOfRangeError,
    SlateDBError,
    TransactionClosedError,
    TransactionConflictError,
)
from slatedb.reader import DbReader, DbReaderOptions
from slatedb.wal_reader import ChangeRow, WalGapError, WalReader

# Last: the checker reads through the modules above (slatedb.check(url), docs/check.md).
from slatedb.checker import check  # noqa: E402,I001

#: Submodules the documentation names as ``slatedb.<name>`` after a plain ``import slatedb``:
#: imported on first use (PEP 562), so ``import slatedb`` stays as cheap as it is.
_LAZY_SUBMODULES = frozenset({"aio", "admin", "destroy", "uniffi"})


def __getattr__(name: str):
    if name == "__version__":
        return _version()
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"slatedb.{name}")
    raise AttributeError(f"module 'slatedb' has no attribute {name!r}")



def _version() -> str:
    """``slatedb.__version__``: this package's version (``slatedb-py``; it reads and writes
    SlateDB 0.17's formats), read from its installed metadata on first use."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("slatedb-py")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        return "0+unknown"

__all__ = [
    "__version__",
    "metrics_collector",
    "ChangeRow",
    "WalGapError",
    "WalReader",
    "IsolationLevel",
    "Transaction",
    "TransactionClosedError",
    "TransactionConflictError",
    "CloseReason",
    "DbReaderStatus",
    "DbStatus",
    "DurabilityLevel",
    "IterationOrder",
    "KeyValue",
    "ReadOptions",
    "ScanOptions",
    "SeekKeyOutOfRangeError",
    "NO_EXPIRY",
    "CheckpointCreateResult",
    "CheckpointOptions",
    "CheckpointScope",
    "ClosedError",
    "CorruptionError",
    "Db",
    "DbIterator",
    "DbReader",
    "DbReaderOptions",
    "Fenced",
    "FencedError",
    "InvalidArgumentError",
    "ManifestsMissingError",
    "MergeOperatorError",
    "MergeOperatorMissingError",
    "NotFoundError",
    "ReadOnlyError",
    "ReentrantCallError",
    "Settings",
    "SlateDBError",
    "Snapshot",
    "WriteBatch",
    "check",
    "WriteHandle",
]
