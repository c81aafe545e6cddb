"""The URL resolver: every backend from one URL form; a bad URL says what is wrong."""

from __future__ import annotations

import pytest
import trio

from slatedb.errors import InvalidUrlError
from slatedb.objstore import MemoryRegistry, MemoryStore, resolve_store
from slatedb.objstore.local import LocalStore
from slatedb.objstore.s3 import S3Store


async def test_memory_stores_are_shared_by_name():
    registry = MemoryRegistry()
    a = resolve_store("memory://shared", memory_registry=registry)
    b = resolve_store("memory://shared", memory_registry=registry)
    other = resolve_store("memory://other", memory_registry=registry)
    assert isinstance(a, MemoryStore)
    await a.put("k", b"v")
    assert (await b.get("k")).data == b"v"
    assert await other.list() == []


async def test_path_inside_memory_url_is_a_key_prefix():
    registry = MemoryRegistry()
    root = resolve_store("memory://s", memory_registry=registry)
    db = resolve_store("memory://s/dbs/one", memory_registry=registry)
    await db.put("manifest/x", b"1")
    assert [m.key for m in await root.list()] == ["dbs/one/manifest/x"]
    assert [m.key for m in await db.list()] == ["manifest/x"]


def test_file_url(tmp_path):
    store = resolve_store(f"file://{tmp_path}/db")
    assert isinstance(store, LocalStore) and store.root == f"{tmp_path}/db"
    assert not (tmp_path / "db").exists()  # made by the first write (spec/objstore.md STORE-9)
    trio.run(store.put, "a/b", b"1")
    assert (tmp_path / "db" / "a" / "b").read_bytes() == b"1"


def test_s3_url_options_query_and_environment():
    env = {"AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_REGION": "eu-west-1",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
    store = resolve_store("s3://bucket/some/prefix?region=us-east-2", env=env)
    assert isinstance(store, S3Store)
    assert store.bucket == "bucket" and store.prefix == "some/prefix/"
    assert store._fs.key == "env-key" and store._fs.secret == "env-secret"
    assert store._fs.client_kwargs["region_name"] == "us-east-2"  # query beats environment
    assert store._fs.client_kwargs["endpoint_url"] == "http://127.0.0.1:1"
    store = resolve_store("s3://bucket", options={"access_key_id": "opt", "endpoint_url": "http://127.0.0.1:2"}, env=env)
    assert store._fs.key == "opt" and store.prefix == ""  # options beat everything


@pytest.mark.parametrize(
    "url, words",
    [
        ("", "non-empty"),
        ("bucket/path", "no scheme"),
        ("ftp://host/x", "unsupported store URL scheme 'ftp'"),
        ("memory://", "needs a store name"),
        ("file://relative/dir", "must be absolute"),
        ("file:///a/../b", "'..'"),
        ("s3:///prefix", "needs a bucket"),
        ("s3://bucket/a//b", "empty path segment"),
        ("s3://bucket/../x", "'..'"),
        ("s3://bucket/p?colour=blue", "unknown s3 URL parameter"),
        # A fragment was dropped: file:///tmp/a#b opened /tmp/a (found by trying a directory name).
        ("file:///tmp/a#b", "has a fragment '#b'"),
        ("file:///tmp/a#", "percent-encoded as %23"),
        ("s3://bucket/p#q", "has a fragment '#q'"),
        ("memory://m/p#q", "has a fragment '#q'"),
    ],
)
def test_invalid_urls_name_the_problem(url, words):
    with pytest.raises(InvalidUrlError) as info:
        resolve_store(url)
    assert words in str(info.value)


def test_a_percent_encoded_hash_names_the_directory(tmp_path):
    store = resolve_store(f"file://{tmp_path}/a%23b")
    trio.run(store.put, "k", b"1")
    assert store.root == f"{tmp_path}/a#b" and (tmp_path / "a#b").is_dir() and not (tmp_path / "a").exists()


def test_unknown_s3_option():
    with pytest.raises(InvalidUrlError, match="unknown s3 option"):
        resolve_store("s3://b", options={"endpoint": "x"})


def test_a_path_relative_to_a_database_at_the_store_root_resolves() -> None:
    """A database at a bucket's root (``s3://bucket``, ``memory://sim``) names another database of
    the bucket (a clone's parent, a sharded load's shard) by a path relative to that root; the
    candidates for that path must include it (they were empty: a sharded load into a root URL
    failed in its union with an IndexError, found by the load scenario's sharded seeds)."""
    from slatedb.objstore.url import db_url_candidates, relative_db_path

    for root in ("s3://bucket", "memory://sim"):
        for other in (f"{root}/shards/01J/0-0-01K", f"{root}/parent"):
            path = relative_db_path(root, other)
            assert other in db_url_candidates(root, path), (root, other, path)
    # Below the root, as before: relative to the closest common ancestor.
    assert db_url_candidates("s3://bucket/db", relative_db_path("s3://bucket/db", "s3://bucket/db/shards/a")) == [
        "s3://bucket/db/shards/a"]
    assert db_url_candidates("s3://b/x/clone", "parent") == ["s3://b/x/parent", "s3://b/parent"]


def test_an_s3_or_memory_prefix_is_percent_decoded_as_a_file_path_is():
    """docs/objstore.md: a path is percent-decoded (``%20`` a space, ``%23`` a ``#``, as the
    fragment error tells the user to write it). Before, only ``file://`` decoded:
    ``s3://bkt/x%20y`` put the database under the literal key prefix ``x%20y/`` (seen in a
    SeaweedFS bucket listing) and ``s3://bkt/a%23b`` under ``a%23b/``, where the official engine's
    ``object_store`` (``Path::from_url_path``) uses ``x y/`` and ``a#b/``."""
    creds = {"endpoint_url": "http://127.0.0.1:1", "region": "us-east-1", "access_key_id": "k",
             "secret_access_key": "s"}
    assert resolve_store("s3://bkt/x%20y/a%23b", options=creds).prefix == "x y/a#b/"
    assert resolve_store("s3://bkt/a b/c", options=creds).prefix == "a b/c/"
    assert resolve_store("s3://bkt/100%25", options=creds).prefix == "100%/"
    store = resolve_store("memory://m/x%20y", memory_registry=MemoryRegistry())
    assert store._full("k") == "x y/k"
    with pytest.raises(InvalidUrlError, match="empty path segment"):
        resolve_store("s3://bkt/a%2F%2Fb", options=creds)


def test_a_path_between_databases_is_the_decoded_object_store_path() -> None:
    """A clone's parent at ``file:///d/p%20q`` (the directory ``p q``) was recorded in the clone's
    manifest as ``ExternalDb.path`` ``p%20q``: the official wheel then looked for the directory
    ``p%20q`` and failed to open the clone ("Object at location .../p%252520q/compacted/... not
    found"). The path is now the decoded one, ``p q``, whichever way the URL spells it, and it
    resolves back to the same directory (a literal ``%`` or ``#`` in a name survives the trip)."""
    from slatedb.objstore.url import db_url_candidates, relative_db_path

    assert relative_db_path("file:///d/c", "file:///d/p%20q") == "p q"
    assert relative_db_path("file:///d/c", "file:///d/p q") == "p q"
    assert relative_db_path("s3://b/x%20y/c", "s3://b/x y/p") == "p"
    for name in ("p q", "100%", "a#b", "q?x", "é"):
        url = db_url_candidates("file:///d/c", name)[0]
        assert resolve_store(url).root == f"/d/{name}", (name, url)
        assert relative_db_path("file:///d/c", url) == name


@pytest.mark.parametrize(
    "option, value, words",
    [
        # Each was found by opening a database with it against SeaweedFS: a bare ValueError or
        # TypeError from botocore at the first request ("Invalid endpoint: 127.0.0.1:1"), or a
        # "transient" error retried object_store_max_retries times before giving up.
        ("endpoint_url", "127.0.0.1:8333", "scheme"),
        ("endpoint_url", "localhost", "scheme"),
        ("endpoint_url", "ftp://127.0.0.1:1", "http:// or https://"),
        ("endpoint_url", "http://", "host"),
        ("endpoint_url", "http:///x", "host"),
        ("endpoint_url", "http://[::1", "not a URL"),
        ("endpoint_url", "http://127.0.0.1:99999", "port"),
        ("endpoint_url", "http://127.0.0.1:8333?x=1", "query"),
        ("endpoint_url", 12345, "a string"),
        ("region", "us east", "region"),
        ("region", "a/b", "region"),
        ("region", 5, "a string"),
        ("access_key_id", 5, "a string"),
        ("secret_access_key", b"s", "a string"),
    ],
)
def test_a_malformed_s3_option_is_refused_at_the_open_naming_it(option, value, words):
    with pytest.raises(InvalidUrlError) as info:
        resolve_store("s3://bucket/db", options={option: value}, env={})
    assert option in str(info.value) and words in str(info.value)


def test_a_malformed_s3_endpoint_from_the_environment_names_the_variable():
    with pytest.raises(InvalidUrlError, match="AWS_ENDPOINT_URL.*scheme"):
        resolve_store("s3://bucket/db", env={"AWS_ENDPOINT_URL": "127.0.0.1:8333"})
    with pytest.raises(InvalidUrlError, match="query parameter 'endpoint_url'"):
        resolve_store("s3://bucket/db?endpoint_url=localhost", env={})


def test_well_formed_s3_endpoints_and_regions_are_accepted():
    for endpoint in ("http://127.0.0.1:8333", "https://s3.example.com", "http://[::1]:8333/", "http://host:1"):
        for region in ("us-east-1", "US-EAST-1", "eu-central-2"):
            store = resolve_store("s3://bucket/db", options={"endpoint_url": endpoint, "region": region}, env={})
            assert store._fs.client_kwargs["endpoint_url"] == endpoint


@pytest.mark.parametrize("url, words", [
    ("s3://key:s3cr3t@bkt/db", "must not hold credentials"),
    ("s3://key@bkt/db", "must not hold credentials"),
    ("s3://bkt:9000/db", "with a port"),
    ("s3://bkt/db?region=us-east-1&region=eu-west-1", "['region'] given more than once"),
    ("s3://bkt/db?secret_access_key=s3cr3t&secret_access_key=other", "['secret_access_key'] given more than once"),
    ("s3://bkt/db?secret_access_key=s3cr3t&regoin=x", "unknown s3 URL parameter(s) ['regoin']"),
])
def test_an_s3_url_with_userinfo_a_port_or_a_repeated_parameter_is_refused_without_its_secret(url, words):
    """Found opening ``s3://KEY:SECRET@bucket/db`` on SeaweedFS: the URL was taken and the first
    request failed with a PermanentObjectStoreError naming bucket 'KEY:SECRET@bucket' (the
    secret in the message); ``s3://bucket:9000`` the same; a repeated parameter was taken
    silently (the last one won), where a file:// URL refuses it. The official 0.17 wheel ignores
    all three, using other credentials, port and region than the URL's. Each is refused before
    any request, and no message shows a secret."""
    from slatedb.objstore.url import check_store_url

    env = {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s", "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
    with pytest.raises(InvalidUrlError) as info:
        check_store_url(url, env=env)
    assert words in str(info.value)
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(InvalidUrlError):
        resolve_store(url, options={"endpoint_url": "http://127.0.0.1:1", "access_key_id": "k",
                                    "secret_access_key": "s"})
