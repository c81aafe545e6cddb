"""The official SlateDB 0.17.0 engine keeps a database whose path has a non-ASCII character in
two places: its manifests (and SSTs, .compactions) under the path percent-encoded once, its WAL
objects under the path percent-encoded twice (found trying paths a user would type; docs/objstore.md
"Paths the two engines share"). Runs against the official wheel alone:

    python -m venv /tmp/official && /tmp/official/bin/pip install slatedb==0.17.0
    /tmp/official/bin/python docs/official-defects/non_ascii_path_split.py

What happens: ``DbBuilder("café", store)`` (a local store, S3 alike: ``object_store``'s
``Path::from`` percent-encodes each segment: every non-ASCII byte and ``% # ? * [ ] { } < > ^ ` ~ | \\ "``)
writes ``caf%C3%A9/manifest/...`` and ``caf%25C3%25A9/wal/...``: the WAL path is built from the
already encoded path and encoded again. The official engine finds its own rows again (both
sides encode the same way), but another engine, or a tool listing ``caf%C3%A9/``, sees a database
whose WAL is empty, and a write acknowledged durable but not yet in an L0 SST is not there. Exit
status 1 when the two directories differ (the defect), 0 otherwise.
"""

import asyncio
import os
import shutil
import sys
import tempfile

import slatedb.uniffi as u


async def main() -> int:
    root = tempfile.mkdtemp(prefix="official-non-ascii-")
    store = u.ObjectStoreBuilder.from_url("file://" + root).build()
    db = await u.DbBuilder("café", store).build()
    await db.put(b"k", b"v")
    await db.flush()  # durable: in a WAL object
    await db.shutdown()
    dirs = {}
    for top in sorted(os.listdir(root)):
        for sub in sorted(os.listdir(os.path.join(root, top))):
            dirs.setdefault(top, []).append(sub)
    for top, subs in dirs.items():
        print(f"{top}/: {', '.join(subs)}")
    db = await u.DbBuilder("café", store).build()
    print("the official engine reads its row back:", await db.get(b"k"))
    await db.shutdown()
    shutil.rmtree(root)
    return 1 if len(dirs) > 1 else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
