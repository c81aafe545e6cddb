"""The admin command line: ``slatedb --path URL <command>``.

It grows with the database (checkpoints, GC, compactions, clones, destroy). Errors print one
line, never a traceback, and exit with status 2 (bad usage or input) or 1 (operation failed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import trio

from slatedb.config import Settings
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


def _emit(obj: object) -> None:
    print(json.dumps(obj, indent=None, sort_keys=False))


async def _with_store(url: str, fn) -> int:
    store = resolve_store(url)
    try:
        return await fn(store)
    finally:
        await store.aclose()


async def _compactions_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    async def body(store) -> int:
        if ns.command == "submit-compaction":
            if ns.scheduler != "size-tiered":
                raise InvalidArgumentError(f"unknown scheduler {ns.scheduler!r} (only size-tiered)")
            c = await admin.submit_compaction(store, ns.request)
            _emit(admin.compaction_json(c))
        elif ns.command == "read-compaction":
            c = await admin.read_compaction(store, ns.id, ns.compactions_id)
            _emit(admin.compaction_json(c, await admin.failure_reason(store, c.id)))
        elif ns.command == "read-compactions":
            _emit(admin.compactions_json(await admin.read_compactions(store, ns.id)))
        elif ns.command == "list-compactions":
            for stored in await admin.list_compactions(store, ns.start, ns.end):
                _emit(admin.compactions_json(stored))
        elif ns.command == "run-compactor":
            settings = Settings.load(ns.settings, os.environ)
            c = await admin.run_compactor(store, settings, once=ns.once)
            _emit({"epoch": c.epoch, **c.stats, "fenced": c.fenced})
        return 0

    return await _with_store(ns.path, body)


def _add_compaction_commands(sub) -> None:
    p = sub.add_parser("submit-compaction", help="submit a compaction: \"Full\" or a JSON spec")
    p.add_argument("--request", required=True,
                   help='"Full", or {"Spec": {"sources": [{"Sst": "<ULID>"}, {"SortedRun": 3}], "destination": 3}}')
    p.add_argument("--scheduler", default="size-tiered", help="the scheduler that validates it (size-tiered)")
    p = sub.add_parser("read-compaction", help="print one compaction (JSON), with its failure reason if any")
    p.add_argument("--id", required=True, help="the compaction's ULID")
    p.add_argument("--compactions-id", type=int, default=None, help="read this .compactions file instead of the latest")
    p = sub.add_parser("read-compactions", help="print the latest (or a given) .compactions file as JSON")
    p.add_argument("--id", type=int, default=None, help="a .compactions file id (default: the latest)")
    p = sub.add_parser("list-compactions", help="print the .compactions files in an id range, one JSON per line")
    p.add_argument("--start", type=int, default=None)
    p.add_argument("--end", type=int, default=None)
    p = sub.add_parser("run-compactor", help="run a compactor in the foreground (fences any other compactor)")
    p.add_argument("--once", action="store_true", help="stop when there is nothing left to compact")
    p.add_argument("--settings", default=None, help="settings file (JSON or TOML); SLATEDB_* variables apply too")


COMPACTION_COMMANDS = ("submit-compaction", "read-compaction", "read-compactions", "list-compactions", "run-compactor")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="slatedb", description="slatedb admin tool")
    parser.add_argument("--path", required=True, help="database URL: memory://name, file:///abs/dir, s3://bucket/prefix")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list-objects", help="list the objects under the database root")
    p.add_argument("--prefix", default="", help="only keys starting with this (e.g. manifest/)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_compaction_commands(sub)
    ns = parser.parse_args(argv)
    try:
        if ns.command == "list-objects":
            return trio.run(_list_objects, ns.path, ns.prefix, ns.json)
        if ns.command in COMPACTION_COMMANDS:
            return trio.run(_compactions_command, ns)
    except KeyboardInterrupt:
        return 130
    except InvalidArgumentError as e:
        print(f"slatedb: error: {e}", file=sys.stderr)
        return 2
    except SlateDBError as e:
        print(f"slatedb: error: {e}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
