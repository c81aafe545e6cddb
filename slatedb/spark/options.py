"""The options of the ``slatedb`` Spark data source, parsed and validated in one place.

Spark hands options over as strings (keys case-insensitive). Every option is checked when the
DataFrame is defined (``load()`` / ``save()``), and an unknown option is an error, never
silently ignored.
"""

from __future__ import annotations

import math
import uuid
from typing import Mapping

import attrs

from slatedb.merge_operator import load_merge_operator
from slatedb.lsm.view import KeyBounds
from slatedb.errors import InvalidArgumentError
from slatedb.redact import shown_url

from .plan import DEFAULT_SPLIT_SIZE_BYTES

#: Object-store options passed to :func:`slatedb.objstore.resolve_store` (S3).
STORE_OPTIONS = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token")

READ_OPTIONS = ("checkpoint", "start", "end", "start_hex", "end_hex", "split_size_bytes", "include_seq",
                "include_expiry", "checkpoint_lifetime_s", "batch_rows", "merge_operator")
WRITE_OPTIONS = ("sst_size_bytes", "block_size_bytes", "sharded")
COMMON_OPTIONS = ("url", "path")

DEFAULT_CHECKPOINT_LIFETIME_S = 600.0
DEFAULT_BATCH_ROWS = 8192
DEFAULT_SST_SIZE_BYTES = 64 * 1024 * 1024


def _bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    v = str(value).strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise InvalidArgumentError(f"option {name!r} must be true or false, got {value!r}")


def _positive_int(name: str, value: str | None, default: int, *, maximum: int = 2**64 - 1) -> int:
    """``maximum``: u64 unless less (a size the writer's settings would refuse above it)."""
    if value is None:
        return default
    try:
        n = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"option {name!r} must be a positive integer, got {value!r}") from None
    if n <= 0 or (maximum is not None and n > maximum):
        raise InvalidArgumentError(f"option {name!r} must be in 1..{maximum}, got {value!r}")
    return n


def _key(opts: Mapping[str, str], name: str) -> bytes | None:
    text, hexed = opts.get(name), opts.get(name + "_hex")
    if text is not None and hexed is not None:
        raise InvalidArgumentError(f"give option {name!r} or {name + '_hex'!r}, not both")
    if hexed is not None:
        try:
            return bytes.fromhex(hexed)
        except ValueError:
            raise InvalidArgumentError(f"option {name + '_hex'!r} is not hex: {hexed!r}") from None
    return None if text is None else text.encode("utf-8")


@attrs.frozen
class SourceOptions:
    """What one read or write was asked to do (see docs/spark.md for each option)."""

    url: str
    store_options: tuple[tuple[str, str], ...] = ()
    checkpoint: uuid.UUID | None = None
    start: bytes | None = None
    end: bytes | None = None
    split_size_bytes: int = DEFAULT_SPLIT_SIZE_BYTES
    include_seq: bool = False
    include_expiry: bool = False
    checkpoint_lifetime_s: float = DEFAULT_CHECKPOINT_LIFETIME_S
    batch_rows: int = DEFAULT_BATCH_ROWS
    #: ``module:name`` of the merge operator tasks fold merge operands with (None: an operand
    #: is an error naming its key, spec/protocols/merge.md MERGE-8).
    merge_operator: str | None = None
    sst_size_bytes: int = DEFAULT_SST_SIZE_BYTES
    block_size_bytes: int = 4096
    sharded: bool = False

    @property
    def bounds(self) -> KeyBounds:
        return KeyBounds(self.start, True, self.end, False)

    @property
    def store_dict(self) -> dict[str, str]:
        return dict(self.store_options)

    def schema_ddl(self) -> str:
        cols = ["key binary", "value binary"]
        if self.include_seq:
            cols.append("seq long")
        if self.include_expiry:
            cols.append("expire_ts_ms long")
        return ", ".join(cols)


def parse_options(options: Mapping[str, str], *, writing: bool = False) -> SourceOptions:
    """Validate Spark's option map (keys compared case-insensitively)."""
    opts = {str(k).lower(): str(v) for k, v in dict(options).items()}
    allowed = set(COMMON_OPTIONS) | set(STORE_OPTIONS) | set(WRITE_OPTIONS if writing else READ_OPTIONS)
    unknown = sorted(set(opts) - allowed)
    if unknown:
        what = "write" if writing else "read"
        raise InvalidArgumentError(f"unknown slatedb {what} option(s) {unknown}; known: {sorted(allowed)}")
    url = opts.get("url") or opts.get("path")
    if opts.get("url") and opts.get("path") and opts["url"] != opts["path"]:
        raise InvalidArgumentError(f"option 'url' ({shown_url(opts['url'])!r}) and the path ({shown_url(opts['path'])!r}) differ")
    if not url:
        raise InvalidArgumentError("the slatedb data source needs option 'url' (or a path in load()/save())")
    store = tuple(sorted((k, v) for k, v in opts.items() if k in STORE_OPTIONS))
    if writing:
        return SourceOptions(
            url=url, store_options=store,
            sst_size_bytes=_positive_int("sst_size_bytes", opts.get("sst_size_bytes"), DEFAULT_SST_SIZE_BYTES),
            block_size_bytes=_positive_int("block_size_bytes", opts.get("block_size_bytes"), 4096, maximum=65536),
            sharded=_bool("sharded", opts.get("sharded"), False),
        )
    cp = opts.get("checkpoint")
    checkpoint = None
    if cp is not None:
        try:
            checkpoint = uuid.UUID(cp)
        except ValueError:
            raise InvalidArgumentError(f"option 'checkpoint' must be a checkpoint id (UUID), got {cp!r}") from None
    start, end = _key(opts, "start"), _key(opts, "end")
    if start is not None and end is not None and start >= end:
        # As Db.scan (slatedb/api/args.py scan_bounds): a range with no key in it is a mistake,
        # refused, not a question whose answer is "no rows".
        if start == end:
            raise InvalidArgumentError(f"the key range is empty: option 'start' equals 'end' ({start!r}), and the "
                                       "end is exclusive (leave 'end' out to read from 'start' on)")
        raise InvalidArgumentError(f"option 'start' ({start!r}) is after 'end' ({end!r})")
    lifetime = opts.get("checkpoint_lifetime_s")
    lifetime_s = DEFAULT_CHECKPOINT_LIFETIME_S
    if lifetime is not None:
        try:
            lifetime_s = float(lifetime)
        except ValueError:
            lifetime_s = -1.0
        if not math.isfinite(lifetime_s) or lifetime_s < 2:
            raise InvalidArgumentError(f"option 'checkpoint_lifetime_s' must be a number of seconds >= 2, got {lifetime!r}")
        if checkpoint is not None:
            raise InvalidArgumentError("option 'checkpoint_lifetime_s' applies only without a given 'checkpoint'")
    return SourceOptions(
        url=url, store_options=store, checkpoint=checkpoint, start=start, end=end,
        split_size_bytes=_positive_int("split_size_bytes", opts.get("split_size_bytes"), DEFAULT_SPLIT_SIZE_BYTES),
        include_seq=_bool("include_seq", opts.get("include_seq"), False),
        include_expiry=_bool("include_expiry", opts.get("include_expiry"), False),
        checkpoint_lifetime_s=lifetime_s,
        batch_rows=_positive_int("batch_rows", opts.get("batch_rows"), DEFAULT_BATCH_ROWS),
        merge_operator=_merge_operator(opts.get("merge_operator")),
    )


def _merge_operator(spec: str | None) -> str | None:
    """Checked where the DataFrame is defined: a name that does not load is refused there."""
    if spec is not None:
        load_merge_operator(spec)
    return spec
