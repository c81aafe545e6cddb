"""Admin.delete_db: a dry run names the objects and deletes nothing; a confirmed run deletes every
object of the database (and only of it); again, and on an empty path, it deletes nothing; a path
with objects but no manifest is refused with Error.Data. The official engine also writes, deletes
and lists a ``<path>/.deleting`` marker: left out of what is compared (docs/api.md)."""
import asyncio, json, os, sys

import slatedb.uniffi as u


def real(paths):
    return sorted(p for p in paths if not p.endswith("/.deleting"))


def files(root, sub, hidden=False):
    """The files under ``root/sub``; with ``hidden`` false, not those under a ``.``-named
    directory (a store's own bookkeeping, e.g. ours' lock files of objects that exist)."""
    out = []
    for d, dirs, fs in os.walk(os.path.join(root, sub)):
        if not hidden:
            dirs[:] = [x for x in dirs if not x.startswith(".")]
        out += [os.path.relpath(os.path.join(d, f), root) for f in fs]
    return sorted(out)


async def main(root):
    out = {}
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    s = u.Settings.default()
    s.set("compactor_options", "null")  # no compactor pins (ours refuses to delete under a live checkpoint)
    for name in ("db1", "db2"):
        b = u.DbBuilder(name, store)
        b.with_settings(s)
        db = await b.build()
        await db.put(b"k", name.encode())
        await db.flush()
        await db.shutdown()
    admin = u.AdminBuilder("db1", store).build()
    dry = real(await admin.delete_db(False))
    out["dry_names_the_objects"] = dry == files(root, "db1")
    out["dry_has_a_manifest"] = any(p.startswith("db1/manifest/") for p in dry)
    b = u.DbBuilder("db1", store)
    b.with_settings(s)
    db = await b.build()
    out["dry_deleted_nothing"] = (await db.get(b"k")) == b"db1"
    await db.shutdown()
    before = files(root, "db1")
    deleted = real(await admin.delete_db(True))
    out["deleted_what_was_there"] = deleted == before
    out["db1_left"] = files(root, "db1", hidden=True)  # nothing at all, bookkeeping included
    out["again"] = real(await admin.delete_db(True))
    out["empty_path"] = real(await u.AdminBuilder("nothing", store).build().delete_db(True))
    b = u.DbBuilder("db2", store)
    b.with_settings(s)
    db = await b.build()
    out["db2_untouched"] = (await db.get(b"k")) == b"db2"
    await db.shutdown()
    os.makedirs(os.path.join(root, "junk"), exist_ok=True)
    with open(os.path.join(root, "junk", "x.txt"), "w") as f:
        f.write("x")
    try:
        await u.AdminBuilder("junk", store).build().delete_db(True)
        out["junk"] = "deleted"
    except u.Error.Data:
        out["junk"] = "Error.Data"
    out["junk_left"] = files(root, "junk")
    return out


print(json.dumps(asyncio.run(main(sys.argv[1])), sort_keys=True))
