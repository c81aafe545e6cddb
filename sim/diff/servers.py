"""Two engine servers speaking one JSON-lines protocol on stdin/stdout, so that a campaign drives
our engine and the official 0.17 wheel (in its own venv: its import name collides with ours) the
same way, and can SIGKILL either.

Requests (bytes are base64 strings; ``None`` is JSON null):

    open {root, path, settings}          close                          ping
    put {key, value[, ttl_ms]}           delete {key}                   batch {ops: [put/delete]}
    get {key} -> {value}                 scan {start, end} -> {rows}    (start inclusive, end exclusive)
    snapshot -> {id}                     snap_scan {id} -> {rows}
    flush_wal                            flush_l0
    checkpoint -> {id}                   (flush to L0, then a detached checkpoint of 1 h)
    read_checkpoint {id} -> {rows}       (a reader opened on that checkpoint)
    read_db {path} -> {rows}             (a reader on another database of the same root)
    clone {dest} -> {}                   (a clone of ``path`` at ``dest``, from its current state)
    project {root, src, dest, start, end}  union {root, dest, sources}   (key bounds as text, end exclusive)
    compact_db {root, path}              (the engine's own compactor until L0 holds < 2 views)

Every reply is one line ``{"ok": true, ...}`` or ``{"ok": false, "error": "Type: message"}``.
"""

from __future__ import annotations

OURS = r'''
import base64, json, sys, traceback, uuid
import trio
import slatedb
from slatedb import admin
from slatedb.checkpoint import CheckpointOptions
from slatedb.objstore import resolve_store

d = lambda s: None if s is None else base64.b64decode(s)
e = lambda b: None if b is None else base64.b64encode(bytes(b)).decode()
state = {"db": None, "snaps": {}, "root": None, "path": None, "settings": None}

def url(path=None, root=None):
    return "file://" + (root or state["root"]) + "/" + (path or state["path"])

def rows(it):
    return [[e(k), e(v)] for k, v in it]

def admin_call(fn, *args, path=None):
    async def go():
        store = resolve_store(url(path))
        try:
            return await fn(store, *args)
        finally:
            await store.aclose()
    return trio.run(go)

def handle(r):
    op = r["op"]
    db = state["db"]
    if op == "ping":
        return {}
    if op == "open":
        state.update(root=r["root"], path=r["path"], settings=r["settings"])
        state["db"] = slatedb.Db.open(url(), slatedb.Settings.from_dict(r["settings"]))
        return {}
    if op == "close":
        state["snaps"].clear()
        if db is not None:
            db.close()
        state["db"] = None
        return {}
    if op == "put":
        ttl = r.get("ttl_ms")
        db.put(d(r["key"]), d(r["value"]), None if ttl is None else ttl / 1000)
        return {}
    if op == "delete":
        db.delete(d(r["key"]))
        return {}
    if op == "batch":
        b = slatedb.WriteBatch()
        for x in r["ops"]:
            if x["op"] == "put":
                b.put(d(x["key"]), d(x["value"]))
            else:
                b.delete(d(x["key"]))
        db.write(b)
        return {}
    if op == "get":
        return {"value": e(db.get(d(r["key"])))}
    if op == "scan":
        return {"rows": rows(db.scan(d(r.get("start")), d(r.get("end"))))}
    if op == "snapshot":
        sid = len(state["snaps"]) + 1
        state["snaps"][sid] = db.snapshot()
        return {"id": sid}
    if op == "snap_scan":
        return {"rows": rows(state["snaps"][r["id"]].scan())}
    if op == "flush_wal":
        db.flush()
        return {}
    if op == "flush_l0":
        db.flush(wal=False)
        return {}
    if op == "checkpoint":
        db.flush(wal=False)
        made = admin_call(admin.create_checkpoint, CheckpointOptions(lifetime_s=3600))
        return {"id": str(made.id)}
    if op == "read_checkpoint":
        with slatedb.DbReader.open(url(r["path"], r["root"]), r["id"]) as reader:
            return {"rows": rows(reader.scan())}
    if op == "read_db":
        with slatedb.DbReader.open(url(r["path"], r["root"])) as reader:
            return {"rows": rows(reader.scan())}
    if op == "clone":
        db.flush(wal=False)
        trio.run(lambda: admin.create_clone(url(r["dest"]), url()))
        return {}
    if op == "project":
        rng = (r["start"] or "") + ".." + (r["end"] or "")
        trio.run(lambda: admin.project(url(r["dest"], r["root"]), url(r["src"], r["root"]), rng))
        return {}
    if op == "union":
        trio.run(lambda: admin.union(url(r["dest"], r["root"]), [url(p, r["root"]) for p in r["sources"]]))
        return {}
    if op == "compact_db":
        async def compact():
            store = resolve_store(url(r["path"], r["root"]))
            try:
                try:
                    await admin.submit_compaction(store, "Full")
                except slatedb.InvalidArgumentError as err:
                    if "nothing to compact" in str(err):
                        return
                    raise
                await admin.run_compactor(store, once=True)
            finally:
                await store.aclose()
        trio.run(compact)
        return {}
    raise ValueError(f"unknown op {op!r}")

for line in sys.stdin:
    req = json.loads(line)
    try:
        out = {"ok": True, **handle(req)}
    except BaseException as err:  # noqa: BLE001 - every error is the campaign's to judge
        out = {"ok": False, "error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()[-2000:]}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
'''

OFFICIAL = r'''
import asyncio, base64, json, sys, traceback
import slatedb.uniffi as u

d = lambda s: None if s is None else base64.b64decode(s)
e = lambda b: None if b is None else base64.b64encode(bytes(b)).decode()
state = {"db": None, "snaps": {}, "root": None, "path": None}

def store(root=None):
    return u.ObjectStoreBuilder.from_url("file://" + (root or state["root"])).build()

def settings(overrides):
    s = u.Settings.default()
    for key, value in overrides.items():
        s.set(key, json.dumps(value))
    return s

async def scan_all(src, start=None, end=None):
    it = await src.scan(u.KeyRange(start=start, start_inclusive=start is not None, end=end, end_inclusive=False))
    out = []
    while True:
        batch = await it.next_batch(1000)
        if not batch:
            return out
        out.extend([e(kv.key), e(kv.value)] for kv in batch)

async def flush_l0(db):
    await db.flush_with_options(u.FlushOptions(flush_type=u.FlushType.MEM_TABLE))

async def handle(r):
    op = r["op"]
    db = state["db"]
    if op == "ping":
        return {}
    if op == "open":
        state.update(root=r["root"], path=r["path"], settings=r["settings"])
        b = u.DbBuilder(r["path"], store())
        b.with_settings(settings(r["settings"]))
        state["db"] = await b.build()
        return {}
    if op == "close":
        state["snaps"].clear()
        if db is not None:
            await db.shutdown()
        state["db"] = None
        return {}
    if op == "put":
        if r.get("ttl_ms") is not None:
            await db.put_with_options(d(r["key"]), d(r["value"]),
                                      u.PutOptions(ttl=u.Ttl.EXPIRE_AFTER_MILLIS(r["ttl_ms"])), u.WriteOptions())
        else:
            await db.put(d(r["key"]), d(r["value"]))
        return {}
    if op == "delete":
        await db.delete(d(r["key"]))
        return {}
    if op == "batch":
        b = u.WriteBatch()
        for x in r["ops"]:
            if x["op"] == "put":
                b.put(d(x["key"]), d(x["value"]))
            else:
                b.delete(d(x["key"]))
        await db.write(b)
        return {}
    if op == "get":
        return {"value": e(await db.get(d(r["key"])))}
    if op == "scan":
        return {"rows": await scan_all(db, d(r.get("start")), d(r.get("end")))}
    if op == "snapshot":
        sid = len(state["snaps"]) + 1
        state["snaps"][sid] = await db.snapshot()
        return {"id": sid}
    if op == "snap_scan":
        return {"rows": await scan_all(state["snaps"][r["id"]])}
    if op == "flush_wal":
        await db.flush()
        return {}
    if op == "flush_l0":
        await flush_l0(db)
        return {}
    if op == "checkpoint":
        await flush_l0(db)
        a = u.AdminBuilder(state["path"], store()).build()
        cp = await a.create_detached_checkpoint(u.CheckpointOptions(lifetime_ms=3600 * 1000, source=None, name=None))
        return {"id": str(cp.id)}
    if op == "read_checkpoint":
        b = u.DbReaderBuilder(r["path"], store(r["root"]))
        b.with_reader_mode(u.ReaderMode.CHECKPOINT(r["id"]))
        reader = await b.build()
        try:
            return {"rows": await scan_all(reader)}
        finally:
            await reader.shutdown()
    if op == "read_db":
        reader = await u.DbReaderBuilder(r["path"], store(r["root"])).build()
        try:
            return {"rows": await scan_all(reader)}
        finally:
            await reader.shutdown()
    if op == "clone":
        await flush_l0(db)
        a = u.AdminBuilder(r["dest"], store()).build()
        builder = a.create_clone_builder_from_source(
            u.CloneSourceSpec(path=state["path"], checkpoint=None, projection_range=None))
        await builder.build()
        return {}
    if op == "project":
        a = u.AdminBuilder(r["dest"], store(r["root"])).build()
        start, end = r["start"], r["end"]
        rng = u.KeyRange(start=None if start is None else start.encode(), start_inclusive=start is not None,
                         end=None if end is None else end.encode(), end_inclusive=False)
        await a.create_clone_builder_from_source(
            u.CloneSourceSpec(path=r["src"], checkpoint=None, projection_range=rng)).build()
        return {}
    if op == "union":
        a = u.AdminBuilder(r["dest"], store(r["root"])).build()
        first, *rest = r["sources"]
        b = a.create_clone_builder_from_source(u.CloneSourceSpec(path=first, checkpoint=None, projection_range=None))
        for p in rest:
            b.with_source(u.CloneSourceSpec(path=p, checkpoint=None, projection_range=None))
        await b.build()
        return {}
    if op == "compact_db":
        s = u.Settings.default()
        s.set("compactor_options.poll_interval", json.dumps("50ms"))
        s.set("compactor_options.scheduler_options", json.dumps({"min_compaction_sources": "2"}))
        b = u.DbBuilder(r["path"], store(r["root"]))
        b.with_settings(s)
        cdb = await b.build()
        a = u.AdminBuilder(r["path"], store(r["root"])).build()
        try:
            for _ in range(300):
                m = await a.read_manifest(None)
                if len(m.l0) < 2:
                    break
                await asyncio.sleep(0.05)
        finally:
            await cdb.shutdown()
        return {}
    raise ValueError(f"unknown op {op!r}")

async def main():
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        req = json.loads(line)
        try:
            out = {"ok": True, **(await handle(req))}
        except BaseException as err:  # noqa: BLE001
            out = {"ok": False, "error": f"{type(err).__name__}: {err}", "trace": traceback.format_exc()[-2000:]}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()

asyncio.run(main())
'''
