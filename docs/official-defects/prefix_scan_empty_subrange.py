"""The official SlateDB 0.17.0 binding fails a prefix scan whose subrange is empty with an
internal error, where the same empty range as a plain scan returns no rows (found trying
boundary `KeyRange`s on both engines: docs/api.md, "Differences a program can see"). Runs against
the official wheel alone, or against ours (``slatedb.uniffi`` of this repository):

    python -m venv /tmp/official && /tmp/official/bin/pip install slatedb==0.17.0
    /tmp/official/bin/python docs/official-defects/prefix_scan_empty_subrange.py

What happens: with rows ``b"b"`` and ``b"b\\x00"``, ``db.scan(KeyRange(start=None, end=b"",
end_inclusive=False))`` (no key is below the empty key) returns no rows, but
``db.scan_prefix(b"b", KeyRange(start=None, end=b"", end_inclusive=False))`` -- the same
subrange under a prefix: the keys from ``b"b"`` up to, excluding, ``b"b"`` -- panics in
Rust (``assert`` in ``BytesRange::new``, "Range must be non-empty", a backtrace on stderr) and
the call raises uniffi's ``InternalError`` -- not one of the binding's ``Error`` variants --
rather than returning no rows (or ``Error.Invalid``, as an empty ``KeyRange`` like
``b"b"..b"b"`` gets on both paths). Here it returns no rows, as the plain scan does. Exit status 1 when the prefix scan
raises (the defect), 0 otherwise.
"""

import asyncio
import sys
import tempfile

import slatedb.uniffi as u


async def main() -> int:
    root = tempfile.mkdtemp(prefix="official-prefix-subrange-")
    db = await u.DbBuilder("db", u.ObjectStoreBuilder.from_url("file://" + root).build()).build()
    await db.put(b"b", b"1")
    await db.put(b"b\x00", b"2")
    empty_end = u.KeyRange(start=None, start_inclusive=False, end=b"", end_inclusive=False)
    plain = await (await db.scan(empty_end)).next_batch(10)
    print(f"scan(..b''): {len(plain)} rows")
    status = 0
    try:
        rows = await (await db.scan_prefix(b"b", empty_end)).next_batch(10)
        print(f"scan_prefix(b'b', ..b''): {len(rows)} rows")
    except Exception as e:  # the official: uniffi's InternalError (a Rust panic), not an Error variant
        print(f"scan_prefix(b'b', ..b''): {type(e).__name__}: {e}")
        status = 1
    await db.shutdown()
    return status


sys.exit(asyncio.run(main()))
