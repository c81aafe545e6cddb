"""The admin command line: ``slatedb --path URL <command>``.

It grows with the database (checkpoints, GC, compactions, clones, destroy). Errors print one
line, never a traceback, and exit with status 2 (bad usage or input) or 1 (operation failed).
"""

from __future__ import annotations

import argparse
import json
import sys

import trio

from slatedb.errors import InvalidArgumentError, SlateDBError
from slatedb.objstore import resolve_store


async def _list_objects(url: str, prefix: str, as_json: bool) -> int:
    store = resolve_store(url)
    try:
        metas = await store.list(prefix)
    finally:
        await store.aclose()
    for m in metas:
        if as_json:
            print(json.dumps({"key": m.key, "size_bytes": m.size_bytes,
                              "last_modified_ms": m.last_modified_ms, "etag": m.etag}))
        else:
            print(f"{m.size_bytes:>12}  {m.key}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slatedb", description="slatedb admin tool")
    parser.add_argument("--path", required=True, help="database URL: memory://name, file:///abs/dir, s3://bucket/prefix")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list-objects", help="list the objects under the database root")
    p.add_argument("--prefix", default="", help="only keys starting with this (e.g. manifest/)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    ns = parser.parse_args(argv)
    try:
        if ns.command == "list-objects":
            return trio.run(_list_objects, ns.path, ns.prefix, ns.json)
    except InvalidArgumentError as e:
        print(f"slatedb: error: {e}", file=sys.stderr)
        return 2
    except SlateDBError as e:
        print(f"slatedb: error: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
