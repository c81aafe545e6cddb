"""Both engines on one database in a real S3 bucket (SeaweedFS, started here, stopped by PID).

The other interop tests use a local directory. Here the official 0.17 wheel writes through its
``object_store`` S3 client (``ObjectStore.resolve("s3://bucket")``, the database path given to
``DbBuilder``), ours through s3fs, at a key prefix holding a space: the official engine stores
``off x/db`` (its URL paths are percent-decoded, ``Path::from_url_path``), and ours must open that
same database as ``s3://bucket/off%20x/db`` and as ``s3://bucket/off x/db``. Before ours decoded
s3 prefixes (docs/objstore.md), ``%20`` opened an empty database at the literal prefix
``off%20x/db``.
"""

from __future__ import annotations

import pytest

import slatedb
from tests import servers

from .official import Official

BUCKET = "interop"
ROWS = 50


@pytest.fixture(scope="module")
def s3():
    gen = servers.seaweedfs()
    srv = next(gen)
    servers.create_bucket(srv, BUCKET)
    try:
        yield srv
    finally:
        gen.close()


@pytest.fixture
def official_s3(official: Official, s3, monkeypatch) -> Official:
    """The wheel's object_store reads the standard AWS variables (plain http allowed)."""
    for name, value in {"AWS_ENDPOINT_URL": s3.endpoint_url, "AWS_REGION": servers.REGION,
                        "AWS_ACCESS_KEY_ID": servers.ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": servers.SECRET_KEY,
                        "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(name, value)
    return official


WRITE = """
async def main():
    store = u.ObjectStore.resolve(sys.argv[1])
    db = await u.DbBuilder(sys.argv[2], store).build()
    for i in range(int(sys.argv[3])):
        await db.put(b"official:%03d" % i, b"v%d" % i)
    await db.flush()
    await db.shutdown()
    emit("ok")
asyncio.run(main())
"""

READ = """
async def main():
    store = u.ObjectStore.resolve(sys.argv[1])
    db = await u.DbBuilder(sys.argv[2], store).build()
    rows = await scan_all(db)
    await db.shutdown()
    emit({"keys": [bytes(kv.key).decode() for kv in rows], "ours": [bytes(kv.value).decode() for kv in rows if bytes(kv.key).startswith(b"ours")]})
asyncio.run(main())
"""


@pytest.mark.parametrize("n, spelling", [(1, "off%20x"), (2, "off x")])
def test_both_engines_share_a_database_in_an_s3_bucket_under_a_prefix_with_a_space(official_s3, s3, n, spelling) -> None:
    path = f"off x/db{n}"  # the official engine's database path in the bucket
    assert official_s3.run_json(WRITE, f"s3://{BUCKET}", path, str(ROWS)) == "ok"

    url = f"s3://{BUCKET}/{spelling}/db{n}"
    with slatedb.Db.open(url, store_options=s3.options()) as db:
        got = {k: v for k, v in db.scan(b"official:", b"official;")}
        assert len(got) == ROWS and got[b"official:007"] == b"v7", (url, len(got))
        db.put(b"ours", url.encode(), durable=True)

    seen = official_s3.run_json(READ, f"s3://{BUCKET}", path)
    assert seen["ours"] == [url]
    assert len([k for k in seen["keys"] if k.startswith("official:")]) == ROWS
