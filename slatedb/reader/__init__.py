"""Read-only access to a database: :class:`DbReader` (RFC 000 "Readers", RFC 001 "Reader
Protocol"; ``spec/protocols/reader.md``, ``docs/reader.md``). The trio API with the same shape is
``slatedb.aio.DbReader``."""

from .core import ReaderCore, WalTable
from .options import DbReaderOptions
from .sync import DbReader

__all__ = ["DbReader", "DbReaderOptions", "ReaderCore", "WalTable"]
