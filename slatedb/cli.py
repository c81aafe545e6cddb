"""The admin command line: ``slatedb --path URL [--json] <command> [options]`` (docs/admin.md).

Output: readable text, or JSON with ``--json`` (before or after the command; lists print one JSON
object per line; the compaction commands print JSON either way, as their output always was).

Errors print one line, ``slatedb: error: ...``, never a traceback (unless ``SLATEDB_DEBUG=1``), and exit
with status 2 (bad usage or input: an empty or malformed URL, UUID, duration or number, an id outside
``[0, 2^64)``, an inverted range) or 1 (the operation failed: no database (every command but
``list-objects`` and ``check``), no such checkpoint or manifest, a refused state, a store error). Output
cut short by its reader (``| head``) ends quietly with status 141. URLs are shown without secrets.

Durations (``--lifetime``, ``--db-delete-grace``): ``"7days 30min 10s"``, ``"1.5h"``, ``"90s"``; a bare number is
seconds. ``SLATEDB_*`` variables set settings for ``run-gc`` / ``run-compactor`` (not ``SLATEDB_DEBUG``; a name
close to a setting's is an error, any other is ignored with a warning).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

import trio

from slatedb.cli_progress import STOPS, ProgressRuntime, print_stop, wanted as progress_wanted
from slatedb import __version__ as slatedb_version
from slatedb.config import Settings
from slatedb.errors import InvalidArgumentError, ManifestsMissingError, NotFoundError, SlateDBError, sole_exception
from slatedb.manifest.segments import segments_text
from slatedb.merge_operator import load_merge_operator
from slatedb.objstore import resolve_store
from slatedb.redact import redact_text, shown_url

DEBUG_ENV = "SLATEDB_DEBUG"


# ---------------------------------------------------------------------------------------------
# Output helpers
# ---------------------------------------------------------------------------------------------


def _emit(obj: object) -> None:
    print(json.dumps(obj, indent=None, sort_keys=False))


def _when(epoch_s: int | None) -> str:
    if not epoch_s:
        return "never"
    return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _checkpoint_text(c: dict) -> str:
    expires = _when(c["expire_time_s"]) + (" (expired)" if c.get("expired") else "")
    extra = f"  writer epoch {c['writer_epoch']}" if "writer_epoch" in c else ""
    name = c["name"] if c["name"] is not None else "-"
    return f"{c['id']}  manifest {c['manifest_id']:<6}  created {_when(c['create_time_s'])}  expires {expires:<31}  name {name}{extra}"


def _manifest_text(m: dict) -> str:
    lines = [
        f"manifest {m['id']}",
        f"  writer epoch {m['writer_epoch']}, compactor epoch {m['compactor_epoch']}, "
        f"initialized {str(m['initialized']).lower()}, destroyed at {_when(m['destroyed_at_s']) if m['destroyed_at_s'] else '-'}",
        f"  WAL: replay after {m['replay_after_wal_id']}, last seen {m['wal_id_last_seen']}; last L0 seq {m['last_l0_seq']}",
        f"  L0 ({len(m['l0'])}): {' '.join(m['l0']) or '-'}",
        f"  sorted runs ({len(m['compacted'])}):"]
    lines += [f"    run {r['id']} ({len(r['ssts'])} SSTs): {' '.join(r['ssts'])}" for r in m["compacted"]]
    lines.append(f"  checkpoints ({len(m['checkpoints'])}):")
    lines += ["    " + _checkpoint_text(c) for c in m["checkpoints"]]
    lines.append(f"  external dbs ({len(m['external_dbs'])}):")
    lines += [f"    {e['path']}  source checkpoint {e['source_checkpoint_id']}  final checkpoint "
              f"{e['final_checkpoint_id'] or '-'}  {len(e['sst_ids'])} SSTs" for e in m["external_dbs"]]
    return "\n".join(lines + segments_text(m))


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


async def _with_store(url: str, fn: Callable[[Any], Any]) -> int:
    store = resolve_store(url)
    try:
        return await fn(store)
    finally:
        await store.aclose()


async def _list_objects(ns: argparse.Namespace) -> int:
    async def body(store) -> int:
        for m in await store.list(ns.prefix):
            view = {"key": m.key, "size_bytes": m.size_bytes, "last_modified_ms": m.last_modified_ms, "etag": m.etag}
            _emit(view) if ns.as_json else print(f"{m.size_bytes:>12}  {m.key}")
        return 0

    return await _with_store(ns.path, body)


async def _compactions_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    if ns.command == "list-compactions":
        _check_range(ns)
    async def body(store) -> int:
        if ns.command == "submit-compaction":
            if ns.scheduler != "size-tiered":
                raise InvalidArgumentError(f"unknown scheduler {ns.scheduler!r} (only size-tiered)")
            c = await admin.submit_compaction(store, ns.request)
            _emit(admin.compaction_json(c))
        elif ns.command == "read-compaction":
            try:
                c = await admin.read_compaction(store, ns.id, ns.compactions_id)
            except NotFoundError:
                await _require_db(store)  # no database here, rather than "no .compactions file yet"
                raise
            _emit(admin.compaction_json(c, await admin.failure_reason(store, c.id)))
        elif ns.command == "read-compactions":
            try:
                stored = await admin.read_compactions(store, ns.id)
            except NotFoundError:
                await _require_db(store)
                raise
            _emit(admin.compactions_json(stored))
        elif ns.command == "list-compactions":
            listed = await admin.list_compactions(store, ns.start, ns.end)  # a damaged latest manifest need not decode
            if not listed:  # a database at all? (exit 1 if not)
                await _require_db(store)
            for stored in listed:
                _emit(admin.compactions_json(stored))
        elif ns.command == "run-compactor":
            if ns.spark_master is not None and ns.engine != "spark":  # else ignored: a local run taken for Spark's
                raise InvalidArgumentError("--spark-master applies to --engine spark only (the local engine runs here)")
            settings = _settings(ns.settings)
            op = None if ns.merge_operator is None else load_merge_operator(ns.merge_operator)
            await _require_db(store)
            rt = ns.service_runtime = ProgressRuntime("compactor", enabled=progress_wanted(ns.as_json))
            try:
                if ns.engine == "spark":
                    from slatedb.spark.compaction import spark_compactor_cli
                    c = await spark_compactor_cli(ns.path, settings, once=ns.once, master=ns.spark_master or "local[2]",
                                                  merge_operator=op, runtime=rt)
                else:
                    c = await admin.run_compactor(store, settings, once=ns.once, merge_operator=op, runtime=rt)
            finally:
                rt.close()
            _emit({"epoch": c.epoch, **c.stats, "fenced": c.fenced, "engine": ns.engine})
        return 0

    return await _with_store(ns.path, body)


def _lifetime(text: str | None) -> float | None:
    from slatedb.checkpoint import parse_duration

    return None if text is None else parse_duration(text)


def _now_s() -> int:
    from slatedb.runtime.production import ProductionRuntime

    return ProductionRuntime("admin").now_ms() // 1000


def _settings(path: str | None) -> Settings:
    if path is not None and not Path(path).is_file():
        raise InvalidArgumentError(f"settings file {path!r} " + ("is not a file" if Path(path).exists() else "does not exist"))

    def unrelated(var: str) -> None:
        print(f"slatedb: warning: ignoring {var}: not a setting", file=sys.stderr)

    return Settings.load(path, os.environ, on_unrelated=unrelated)


def _check_range(ns: argparse.Namespace) -> None:
    if ns.start is not None and ns.end is not None and ns.start > ns.end:
        raise InvalidArgumentError(f"--start {ns.start} is above --end {ns.end}: the range is empty")


async def _require_db(store) -> None:
    """NotFoundError (exit 1) when the path holds no database, like every other command."""
    from slatedb.manifest.missing import require_latest
    from slatedb.manifest.store import ManifestStore
    from slatedb.runtime.production import ProductionRuntime

    await require_latest(ManifestStore(store, ProductionRuntime("admin")))


async def _checkpoint_command(ns: argparse.Namespace) -> int:
    from slatedb import admin
    from slatedb.checkpoint import CheckpointOptions

    # Validate the input before touching the store (exit 2 even when the path is wrong too).
    lifetime = _lifetime(getattr(ns, "lifetime", None))
    cid = admin.as_checkpoint_id(ns.id) if getattr(ns, "id", None) is not None else None
    source = admin.as_checkpoint_id(ns.source) if getattr(ns, "source", None) is not None else None
    if ns.command == "list-checkpoints" and ns.name is not None and not ns.name.strip():
        # No checkpoint has an empty name (create-checkpoint refuses one): listing by it would
        # print nothing, as if there were no checkpoints.
        raise InvalidArgumentError("checkpoint name must not be empty (leave -n out to list every checkpoint)")

    async def body(store) -> int:
        if ns.command == "create-checkpoint":
            got = await admin.create_checkpoint(store, CheckpointOptions(lifetime_s=lifetime, source=source, name=ns.name))
            cps = [c for c in await admin.list_checkpoints(store) if c.id == got.id]
            view = admin.checkpoint_json(cps[0]) if cps else {"id": str(got.id), "manifest_id": got.manifest_id}
            if ns.as_json:
                _emit(view)
            else:
                print(f"created checkpoint {got.id} pinning manifest {got.manifest_id}, expires {_when(view.get('expire_time_s'))}")
        elif ns.command == "refresh-checkpoint":
            cp = await admin.refresh_checkpoint(store, cid, lifetime)  # type: ignore[arg-type]
            _emit(admin.checkpoint_json(cp)) if ns.as_json else print(f"checkpoint {cp.id} now expires {_when(cp.checkpoint_expire_time_s)}")
        elif ns.command == "delete-checkpoint":
            await admin.delete_checkpoint(store, cid)  # type: ignore[arg-type]
            if ns.as_json:
                _emit({"deleted": str(cid)})
            else:
                print(f"deleted checkpoint {cid}")
        elif ns.command == "list-checkpoints":
            now = _now_s()
            for c in await admin.list_checkpoints(store, ns.name):
                view = admin.checkpoint_json(c, now)
                _emit(view) if ns.as_json else print(_checkpoint_text(view))
        return 0

    return await _with_store(ns.path, body)


async def _manifest_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    if ns.command == "list-manifests":
        _check_range(ns)
    async def body(store) -> int:
        if ns.command == "read-manifest":
            view = admin.manifest_json(await admin.read_manifest(store, ns.id), _now_s())
            _emit(view) if ns.as_json else print(_manifest_text(view))
        else:
            infos = await admin.list_manifests(store, ns.start, ns.end)  # listed, not decoded: a damaged one too
            if not infos:  # a database at all? (exit 1 if not)
                await _require_db(store)
            for info in infos:
                if ns.as_json:
                    _emit(admin.manifest_info_json(info))
                else:
                    print(f"{info.id:>8}  {info.size_bytes:>8} B  {_when(info.last_modified_ms // 1000)}  {info.key}")
        return 0

    return await _with_store(ns.path, body)


async def _gc_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    settings = _settings(ns.settings)
    grace = _lifetime(ns.db_delete_grace)

    async def body(store) -> int:
        await _require_db(store)
        rt = ns.service_runtime = ProgressRuntime("gc", enabled=progress_wanted(ns.as_json))
        try:
            stats = await admin.run_gc(store, settings, once=ns.once, db_delete_grace_s=grace, runtime=rt)
        finally:
            rt.close()
        view = admin.gc_stats_json(stats)
        if ns.as_json:
            _emit(view)
        else:
            done = ", ".join(f"{k} {v}" for k, v in view.items() if v and k != "deleted") or "nothing to do"
            print(f"gc: {view['deleted']} objects deleted ({done})")
        return 0

    return await _with_store(ns.path, body)


async def _clone_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    if ns.source:
        if ns.parent_path is not None or ns.parent_checkpoint is not None:
            raise InvalidArgumentError("--source (its checkpoint as URL@CHECKPOINT) or --parent-*, not both")
        from slatedb.projection.create import parse_clone_source

        sources = [parse_clone_source(s) for s in ns.source]
        stored = await admin.create_clone_from_sources(ns.path, sources)
        m = stored.manifest
        view = {"clone": shown_url(ns.path), "sources": [shown_url(str(s)) for s in sources], "manifest": admin.manifest_json(stored)}
        if ns.as_json:
            _emit(view)
        else:
            kind = "projected" if len(sources) == 1 else f"united {len(sources)} sources"
            print(f"{kind} into {shown_url(ns.path)} (manifest {stored.id}, {len(m.l0)} L0 views, {len(m.compacted)} sorted runs, "
                  f"{sum(len(e.sst_ids) for e in m.external_dbs)} SSTs read in place from {len(m.external_dbs)} "
                  f"external databases, last_l0_seq {m.last_l0_seq})")
        return 0
    if ns.parent_path is None:
        raise InvalidArgumentError("clone needs --parent-path or at least one --source URL[@CHECKPOINT][:RANGE]")
    cp = admin.as_checkpoint_id(ns.parent_checkpoint) if ns.parent_checkpoint is not None else None
    stored = await admin.create_clone(ns.path, ns.parent_path, cp)
    view = {"clone": shown_url(ns.path), "parent": shown_url(ns.parent_path), "manifest": admin.manifest_json(stored)}
    if ns.as_json:
        _emit(view)
    else:
        ext = stored.manifest.external_dbs
        print(f"cloned {shown_url(ns.parent_path)} into {shown_url(ns.path)} (manifest {stored.id}, "
              f"{sum(len(e.sst_ids) for e in ext)} parent SSTs read in place, from checkpoint "
              f"{ext[-1].source_checkpoint_id if ext else '-'})")
    return 0


async def _destroy_command(ns: argparse.Namespace) -> int:
    from slatedb import admin

    async def body(store) -> int:
        try:
            await _require_db(store)  # the API's hard destroy of an empty path does nothing, quietly
        except ManifestsMissingError:
            pass  # data but no manifest: the destroy refuses it, saying why
        await admin.destroy(store, ns.soft)
        if ns.as_json:
            _emit({"destroyed": shown_url(ns.path), "soft": ns.soft})
        elif ns.soft:
            print(f"soft-destroyed {shown_url(ns.path)}: the garbage collector deletes it after the grace period, once no checkpoint is active")
        else:
            print(f"destroyed {shown_url(ns.path)}")
        return 0

    return await _with_store(ns.path, body)


async def _check_command(ns: argparse.Namespace) -> int:
    """``check``: exit 0 healthy, 1 findings, 2 no database or the store cannot be read."""
    from slatedb.checker import CheckAccessError, check_store
    from slatedb.checker.image import local_dir_of
    from slatedb.runtime.production import ProductionRuntime

    store = resolve_store(ns.path)  # a malformed URL first (exit 2 naming its fault); creates nothing
    local = local_dir_of(ns.path)
    if local is not None and not os.path.isdir(local):
        return _fail(f"no database at {shown_url(ns.path)}: {local} is not a directory", 2)
    settings = _settings(ns.settings)
    try:
        report = await check_store(store, deep=ns.deep, now_ms=ProductionRuntime().now_ms,
                                   gc_options=settings.garbage_collector_options)
    except CheckAccessError as e:
        return _fail(str(e), 2)
    finally:
        await store.aclose()
    if ns.as_json:
        _emit(report.to_json(garbage=not ns.no_garbage))
    else:
        print("\n".join(report.lines(garbage=not ns.no_garbage)))
    return 0 if report.healthy else 1


# ---------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------

_LIFETIME_HELP = ("a lifetime in a human-friendly format that uses years/days/min/s, e.g. \"7days 30min 10s\". The "
                  "checkpoint's expiry time is set to the current wallclock time plus this lifetime. If not "
                  "given, the checkpoint {} no expiry and must be explicitly removed")
_ID_HELP = "the UUID of the checkpoint (e.g. 01740ee5-6459-44af-9a45-85deb6e468e3)"
_NAME_HELP = ("a name for the checkpoint, usable to list checkpoints. Names need not be unique: listing by name "
              "can return several checkpoints")


def _u64(flag: str) -> Callable[[str], int]:
    """An argparse type: a manifest/compactions id, an integer in [0, 2^64)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer id, got {text!r}") from None
        if not 0 <= value < 2**64:
            raise argparse.ArgumentTypeError(f"{flag} must be an id in [0, 2^64), got {text}")
        return value

    parse.__name__ = "id"
    return parse


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``slatedb: error: ...``, exit 2) instead of usage + error."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def _add(sub, name: str, description: str, json_help: str = "print JSON (lists: one object per line)"):
    p = sub.add_parser(name, help=description.split(". ")[0], description=description)
    p.add_argument("--path", dest="path_here", default=None, metavar="URL", help="database URL (as the global --path)")
    p.add_argument("--json", action="store_true", dest="json_here", help=json_help)
    return p


def _add_compaction_commands(sub) -> None:
    note = "its output is JSON with or without --json"
    p = _add(sub, "submit-compaction", "Submit a compaction: \"Full\" or a JSON spec. The running compactor validates "
             "and runs it", note)
    p.add_argument("--request", required=True,
                   help='"Full", or {"Spec": {"sources": [{"Sst": "<ULID>"}, {"SortedRun": 3}], "destination": 3}}')
    p.add_argument("--scheduler", default="size-tiered", help="the scheduler that validates it (size-tiered)")
    p = _add(sub, "read-compaction", "Print one compaction (JSON), with its failure reason if any", note)
    p.add_argument("--id", required=True, help="the compaction's ULID")
    p.add_argument("--compactions-id", type=_u64("--compactions-id"), default=None, help="read this .compactions file instead of the latest")
    p = _add(sub, "read-compactions", "Print the latest (or a given) .compactions file as JSON", note)
    p.add_argument("--id", type=_u64("--id"), default=None, help="a .compactions file id (default: the latest)")
    p = _add(sub, "list-compactions", "Print the .compactions files in an id range, one JSON per line", note)
    p.add_argument("--start", type=_u64("--start"), default=None, help="lowest id (inclusive)")
    p.add_argument("--end", type=_u64("--end"), default=None, help="highest id (inclusive)")
    p = _add(sub, "run-compactor", "Run a compactor in the foreground (fences any other compactor)", note)
    p.add_argument("--once", action="store_true", help="compact what L0 holds now, then stop (newer L0 SSTs wait)")
    p.add_argument("--settings", default=None, help="settings file (JSON or TOML); SLATEDB_* variables apply too")
    p.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="local: merge in this process; spark: this process coordinates and each subcompaction "
                        "range runs as a Spark task (compactor_options.worker.max_subcompactions ranges per job)")
    p.add_argument("--spark-master", default=None, help="Spark master URL for --engine spark (default local[2])")
    p.add_argument("--merge-operator", default=None, metavar="MODULE:NAME",
                   help="the database's merge operator (a callable or a class, importable here) to fold merge "
                        "operands; without it they are kept as they are")


def _add_admin_commands(sub) -> None:
    p = _add(sub, "create-checkpoint", "Create a new checkpoint pointing to the database's current state (the latest "
             "manifest; a writer's unflushed writes are not in it), or to an existing checkpoint's")
    p.add_argument("-l", "--lifetime", default=None, help="optionally, " + _LIFETIME_HELP.format("is created with"))
    p.add_argument("-s", "--source", default=None, metavar="UUID",
                   help="optionally, an existing checkpoint to use as the base for the new one (it must not have "
                        "expired). If not given, the checkpoint is taken against the latest manifest")
    p.add_argument("-n", "--name", default=None, help="optionally, " + _NAME_HELP)
    p = _add(sub, "refresh-checkpoint", "Refresh an existing checkpoint's expiry time. This command looks for an "
             "existing checkpoint and updates its expiry time using the specified lifetime")
    p.add_argument("-i", "--id", required=True, help=_ID_HELP)
    p.add_argument("-l", "--lifetime", default=None, help="optionally, a new " + _LIFETIME_HELP.format("is updated with"))
    p = _add(sub, "delete-checkpoint", "Delete an existing checkpoint")
    p.add_argument("-i", "--id", required=True, help=_ID_HELP)
    p = _add(sub, "list-checkpoints", "List the current checkpoints of the db (writer checkpoints and expired ones "
             "not yet collected included)")
    p.add_argument("-n", "--name", default=None,
                   help="optionally, only the checkpoints with this name (names need not be unique). If not given, "
                        "all checkpoints are listed")
    p = _add(sub, "read-manifest", "Print a manifest: epochs, WAL range, L0 and sorted runs with their SST ids, "
             "checkpoints, external databases")
    p.add_argument("--id", type=_u64("--id"), default=None, help="the manifest id (default: the latest)")
    p = _add(sub, "list-manifests", "List the manifest files (id, size, last modified) in an id range")
    p.add_argument("--start", type=_u64("--start"), default=None, help="lowest manifest id (inclusive)")
    p.add_argument("--end", type=_u64("--end"), default=None, help="highest manifest id (inclusive)")
    p = _add(sub, "run-gc", "Run the garbage collector in the foreground: expired checkpoints, old manifests, WAL "
             "objects and SSTs no checkpoint needs, soft-destroyed databases (docs/gc.md)")
    p.add_argument("--once", action="store_true", help="one pass over every directory, then exit")
    p.add_argument("--settings", default=None,
                   help="settings file (JSON or TOML) whose garbage_collector_options apply; SLATEDB_* variables too")
    p.add_argument("--db-delete-grace", default=None, metavar="DURATION",
                   help="how long after a soft destroy the database is removed (e.g. \"1day\"; default 24h)")
    p = _add(sub, "clone", "Create (or finish) a clone at --path of the database at --parent-path, from a checkpoint "
             "of the parent or its current state; or, with --source, a projection of one database onto a key range "
             "or the union of several. The result reads its sources' SSTs in place (docs/clones.md, "
             "docs/rescaling.md)")
    p.add_argument("--parent-path", default=None, help="the parent database's URL")
    p.add_argument("--parent-checkpoint", default=None, metavar="UUID",
                   help="a checkpoint of the parent to clone from (default: a new one of its current state)")
    p.add_argument("--source", action="append", default=[], metavar="URL[@CHECKPOINT][:RANGE]",
                   help="instead of --parent-path: a source database, optionally at a checkpoint and projected onto "
                        "a key range START..END (either side may be empty; \\xNN escapes a byte, \\x3a a ':' in a "
                        "key). One --source with a range = a projection; several = their union, which must not "
                        "overlap (docs/rescaling.md)")
    p = _add(sub, "destroy", "Destroy the database. --soft marks it destroyed and leaves the deletion to the garbage "
             "collector (after the grace period, once no checkpoint is active); without --soft every object is "
             "deleted now (no writer may be running), refused while an unexpired checkpoint exists")
    p.add_argument("--soft", action="store_true", help="mark destroyed only; GC deletes it later")


CHECKPOINT_COMMANDS = ("create-checkpoint", "refresh-checkpoint", "delete-checkpoint", "list-checkpoints")
COMPACTION_COMMANDS = ("submit-compaction", "read-compaction", "read-compactions", "list-compactions", "run-compactor")
COMMANDS: dict[str, Callable[[argparse.Namespace], Any]] = {
    "list-objects": _list_objects,
    **{c: _compactions_command for c in COMPACTION_COMMANDS},
    **{c: _checkpoint_command for c in CHECKPOINT_COMMANDS},
    "read-manifest": _manifest_command,
    "list-manifests": _manifest_command,
    "run-gc": _gc_command,
    "clone": _clone_command,
    "destroy": _destroy_command,
    "check": _check_command,
}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="slatedb", description="slatedb admin tool: inspect and administer a database without "
                     "opening a writer (docs/admin.md)")
    parser.add_argument("--path", default=None, help="database URL: memory://name, file:///abs/dir, s3://bucket/prefix "
                        "(required; also accepted after the command)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text (also accepted after the command)")
    parser.add_argument("--version", action="version", version=f"slatedb-py {slatedb_version} (SlateDB 0.17 formats)")
    # Not required here: main() names an unknown option first, then a missing command (argparse
    # would report "<command> required" for ``slatedb --bogus``, hiding the typo).
    sub = parser.add_subparsers(dest="command", required=False, metavar="<command>", parser_class=_Parser)
    p = _add(sub, "list-objects", "List the objects under the database root")
    p.add_argument("--prefix", default="", help="only keys starting with this (e.g. manifest/)")
    _add_compaction_commands(sub)
    _add_admin_commands(sub)
    p = _add(sub, "check", "Check the database's structure against the invariants of spec/protocols (read-only; any "
             "engine's database). One line per finding (invariant id, object, what is wrong), then the garbage "
             "report. Exit 0 healthy, 1 findings, 2 no database or an access error", "print one JSON object")
    p.add_argument("--deep", action="store_true", help="also read every block of every referenced SST and WAL "
                   "object: checksums, rows in key and seq order")
    p.add_argument("--no-garbage", action="store_true", help="leave out the garbage report (findings only)")
    p.add_argument("--settings", default=None, help="settings file whose garbage_collector_options the garbage "
                   "report assumes (default: the defaults)")
    return parser


#: Commands that run until stopped: SIGTERM (a service manager's stop) stops them as Ctrl-C does.
SERVICE_COMMANDS = ("run-compactor", "run-gc")

async def _until_terminated(ns: argparse.Namespace) -> int:
    """Run a service command; Ctrl-C or SIGTERM cancels it (a compactor drops its startup pin),
    it prints what it did (``print_stop``) and exits 128 + the signal (130, 143)."""
    stopped: signal.Signals | None = None
    result, ns.service_runtime = 0, None
    async with trio.open_nursery() as nursery:
        async def watch() -> None:
            nonlocal stopped
            with trio.open_signal_receiver(*STOPS) as signals:
                async for signum in signals:
                    stopped = signal.Signals(signum)
                    nursery.cancel_scope.cancel()
                    return

        nursery.start_soon(watch)
        result = await COMMANDS[ns.command](ns)
        nursery.cancel_scope.cancel()
    if stopped is None:
        return result
    print_stop(ns.service_runtime, ns.command, stopped, as_json=ns.as_json, engine=getattr(ns, "engine", None))
    return 128 + int(stopped)


def _fail(message: str, code: int) -> int:
    print(f"slatedb: error: {redact_text(' '.join(str(message).split()))}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's parser (its --help lists its options), else the tool's
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (sub.choices.get(ns.command) or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if ns.command is None:
        parser.error("the following arguments are required: <command>")
    if ns.path is not None and ns.path_here is not None and ns.path != ns.path_here:
        parser.error(f"--path given twice, {shown_url(ns.path)!r} and {shown_url(ns.path_here)!r}")
    ns.path = ns.path if ns.path is not None else ns.path_here
    if ns.path is not None and not ns.path.strip():  # a script's unset variable: say so, not "required"
        parser.error(f"--path is empty ({ns.path!r}): give a database URL, file:///abs/dir, s3://bucket/prefix or memory://name")
    if ns.path is None:
        parser.error("the following arguments are required: --path")
    ns.as_json = ns.json or ns.json_here
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        try:
            return trio.run(_until_terminated if ns.command in SERVICE_COMMANDS else COMMANDS[ns.command], ns)
        except BaseExceptionGroup as group:  # a nursery's single error: report the error itself
            error = sole_exception(group)
            if error is group:
                raise
            raise error from None
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep the interpreter's final
        # flush of stdout from complaining too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except InvalidArgumentError as e:
        if debug:
            raise
        return _fail(str(e), 2)
    except SlateDBError as e:
        if debug:
            raise
        return _fail(str(e) or type(e).__name__, 1)
    except Exception as e:  # noqa: BLE001 - the CLI's contract: one line, no traceback
        if debug:
            raise
        return _fail(f"unexpected {type(e).__name__}: {e} (set {DEBUG_ENV}=1 for a traceback)", 1)


if __name__ == "__main__":
    sys.exit(main())
