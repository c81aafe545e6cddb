"""One resolver from URL to object store, for every backend.

- ``memory://name[/path]``: an in-process store shared by ``name`` (within one registry).
- ``file:///abs/dir``: a local directory (created if missing). One setting, ``fsync``, from
  ``options`` then the URL query (``file:///abs/dir?fsync=false``): ``true`` (the default) makes a
  put durable against a crash of the machine before it returns; ``false`` syncs nothing, so a put
  that returned survives a crash of the process but not of the machine (what the official engine's
  local store promises). Any other parameter or option is refused.
- ``s3://bucket[/prefix]``: S3 through s3fs. Endpoint, region and credentials come from
  ``options`` (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
  ``session_token``), then URL query parameters (``?endpoint_url=...&region=...``), then the
  standard AWS environment variables (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``,
  ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``).
"""

from __future__ import annotations

import os
import re
import urllib.parse
from typing import Callable, Mapping

from slatedb.errors import InvalidUrlError
from slatedb.redact import shown_url

from .base import ObjectStore, validate_key
from .memory import DEFAULT_REGISTRY, MemoryRegistry, MemoryStore

_S3_OPTIONS = ("endpoint_url", "region", "access_key_id", "secret_access_key", "session_token")
_FILE_OPTIONS = ("fsync",)
_S3_ENV = {
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
    "region": ("AWS_REGION", "AWS_DEFAULT_REGION"),
    "access_key_id": ("AWS_ACCESS_KEY_ID",),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY",),
    "session_token": ("AWS_SESSION_TOKEN",),
}


def _check_path(url: str, path: str) -> str:
    """Validate the key prefix a URL carries; returns it with a trailing '/' (or '')."""
    path = path.strip("/")
    if not path:
        return ""
    try:
        validate_key(path)
    except Exception as e:
        raise InvalidUrlError(f"invalid path in store URL {shown_url(url)!r}: {e}") from None
    return path + "/"


def _bool_setting(what: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidUrlError(f"{what} must be true or false, got {value!r}")


def _file_fsync(url: str, query: str, options: Mapping[str, object]) -> bool:
    """The ``fsync`` setting of a ``file://`` store: ``options`` first, then the URL's query;
    True when neither sets it. Unknown parameters and options are refused."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    unknown = set(params) - set(_FILE_OPTIONS)
    if unknown:
        raise InvalidUrlError(f"unknown file URL parameter(s) {sorted(unknown)} in {shown_url(url)!r}; known: {list(_FILE_OPTIONS)}")
    repeated = [k for k, v in params.items() if len(v) > 1]
    if repeated:
        raise InvalidUrlError(f"file URL parameter(s) {sorted(repeated)} given more than once in {shown_url(url)!r}")
    unknown = set(options) - set(_FILE_OPTIONS)
    if unknown:
        raise InvalidUrlError(f"unknown file store option(s) {sorted(unknown)}; known: {list(_FILE_OPTIONS)}")
    if "fsync" in options:
        return _bool_setting("file store option 'fsync'", options["fsync"])
    if "fsync" in params:
        return _bool_setting(f"file URL parameter 'fsync' in {shown_url(url)!r}", params["fsync"][0])
    return True


#: The region names botocore accepts (``botocore.utils.validate_region_name``).
_REGION = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?$")


def _check_s3_option(name: str, value: object, source: str) -> None:
    """Refuse a malformed S3 option at the open, naming it (``source``): botocore raised a bare
    ``ValueError`` / ``TypeError`` for these at the first request, or an error this store took
    for transient and retried ``object_store_max_retries`` times."""
    if not isinstance(value, str):
        raise InvalidUrlError(f"{source} must be a string, got {type(value).__name__} {value!r}")
    if name == "region" and not _REGION.match(value):
        raise InvalidUrlError(f"{source}: {value!r} is not a region name (letters, digits and '-', "
                              "such as us-east-1)")
    if name != "endpoint_url":
        return
    try:
        parsed = urllib.parse.urlsplit(value.strip())
        port = parsed.port
    except ValueError as e:  # an unclosed '[', a port that is no number or out of range
        what = "has a bad port" if "port" in str(e).lower() else "is not a URL"
        raise InvalidUrlError(f"{source}: {value!r} {what}: {e} (give http://HOST[:PORT] or "
                              "https://HOST[:PORT])") from None
    if not parsed.scheme or "://" not in value:
        raise InvalidUrlError(f"{source}: {value!r} has no scheme: give http://{value} or https://{value}")
    if parsed.scheme.lower() not in ("http", "https"):
        raise InvalidUrlError(f"{source}: {value!r} must start with http:// or https://")
    if not parsed.hostname:
        raise InvalidUrlError(f"{source}: {value!r} names no host (give http://HOST[:PORT])")
    if parsed.query or parsed.fragment:
        raise InvalidUrlError(f"{source}: {value!r} has a query or fragment: an endpoint is http(s)://HOST[:PORT]")
    del port  # read for its check only


def _check_utf8(what: str, text: str) -> str:
    """``text`` if it is UTF-8 text, else :class:`InvalidUrlError` naming ``what``: Python holds
    a non-UTF-8 file name or argument as lone surrogates (``\\udcff``), which S3 keys and the
    paths a manifest names cannot hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidUrlError(f"{what} {shown_url(text)!r} is not UTF-8 text ({text[e.start]!r} at {e.start}: a name that is "
                              "not UTF-8, such as a directory named with a byte like \\xff); rename it") from None
    return text


def check_url_type(url: object) -> None:
    """``url`` is a non-empty string, else :class:`InvalidUrlError` (an open checks it first)."""
    if not isinstance(url, str) or not url:
        raise InvalidUrlError(f"store URL must be a non-empty string, got {url!r}")


def check_store_url(url: object, options: Mapping[str, str] | None = None, *,
                    env: Mapping[str, str] | None = None) -> None:
    """Check ``url`` (and ``options``, and for S3 the ``AWS_*`` variables it would read) as
    :func:`resolve_store` does, opening nothing: the same :class:`InvalidUrlError` for the same
    mistake (``slatedb.aio``'s opens call it before anything is awaited)."""
    _plan(url, options, env)


def _plan(url: object, options: Mapping[str, str] | None, env: Mapping[str, str] | None) -> tuple:
    """The checked parts of a store URL: ``("memory", netloc, root)``, ``("file", path, fsync)`` or
    ``("s3", bucket, prefix, resolved options)``; raises ``InvalidUrlError`` naming what is wrong."""
    check_url_type(url)
    assert isinstance(url, str)
    parsed = urllib.parse.urlsplit(url)
    shown = shown_url(url)  # what the messages below show: no user-info, no secret parameter value
    if "#" in url:  # a fragment names no part of a store: dropped, it would open another path
        raise InvalidUrlError(f"store URL has a fragment '#{parsed.fragment}' in {shown!r}: a '#' in a path or "
                              "prefix must be percent-encoded as %23")
    scheme = parsed.scheme.lower()
    if options is not None and not isinstance(options, Mapping):
        raise InvalidUrlError(f"store_options must be a dict of option names to values, not {type(options).__name__}")
    options = dict(options or {})

    if scheme == "memory":
        if options or parsed.query:  # honoured or refused: a memory store has no option
            raise InvalidUrlError(f"unknown memory store option(s) {sorted(options) or parsed.query!r} in "
                                  f"{shown!r}: a memory:// store takes none")
        if not parsed.netloc:
            raise InvalidUrlError(f"memory URL needs a store name: memory://NAME[/path], got {shown!r}")
        return ("memory", parsed.netloc, _check_path(url, urllib.parse.unquote(parsed.path)))

    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise InvalidUrlError(
                f"file URL must be absolute, file:///abs/dir (three slashes); {shown!r} names host {parsed.netloc!r}"
            )
        path = urllib.parse.unquote(parsed.path)
        if not path.startswith("/"):
            raise InvalidUrlError(f"file URL must hold an absolute path: {shown!r}")
        if any(seg in (".", "..") for seg in path.split("/")):
            raise InvalidUrlError(f"file URL must not contain '.' or '..' segments: {shown!r}")
        return ("file", path, _file_fsync(url, parsed.query, options))

    if scheme == "s3":
        bucket = parsed.netloc
        if not bucket:
            raise InvalidUrlError(f"s3 URL needs a bucket: s3://BUCKET[/prefix], got {shown!r}")
        if "@" in bucket:  # the official engine ignores these: refused, not taken for part of the bucket
            raise InvalidUrlError(f"s3 URL must not hold credentials ('USER:PASSWORD@' before the bucket) in {shown!r}: "
                                  "give access_key_id and secret_access_key as store options, URL parameters or "
                                  "AWS_* variables")
        if ":" in bucket:
            raise InvalidUrlError(f"s3 URL names bucket {bucket!r} with a port in {shown!r}: give the server's host "
                                  "and port as endpoint_url (http://HOST:PORT), s3://BUCKET[/prefix]")
        _check_utf8("s3 URL", url)  # an S3 key is UTF-8
        prefix = _check_path(url, urllib.parse.unquote(parsed.path))  # as object_store's from_url_path
        params = urllib.parse.parse_qs(parsed.query)
        unknown = set(params) - set(_S3_OPTIONS)
        if unknown:
            raise InvalidUrlError(f"unknown s3 URL parameter(s) {sorted(unknown)} in {shown!r}; known: {list(_S3_OPTIONS)}")
        repeated = [k for k, v in params.items() if len(v) > 1]
        if repeated:
            raise InvalidUrlError(f"s3 URL parameter(s) {sorted(repeated)} given more than once in {shown!r}")
        query = {k: v[0] for k, v in params.items()}
        unknown = set(options) - set(_S3_OPTIONS)
        if unknown:
            raise InvalidUrlError(f"unknown s3 option(s) {sorted(unknown)}; known: {list(_S3_OPTIONS)}")
        env = os.environ if env is None else env
        resolved: dict[str, str | None] = {}
        for name in _S3_OPTIONS:
            if options.get(name):
                value, source = options[name], f"s3 option {name!r}"
            elif query.get(name):
                value, source = query[name], f"s3 URL query parameter {name!r} in {shown!r}"
            else:
                var = next((v for v in _S3_ENV[name] if env.get(v)), None)
                value, source = (env[var], f"environment variable {var} (s3 option {name!r})") if var else (None, "")
            if value is not None:
                _check_s3_option(name, value, source)
            resolved[name] = value
        return ("s3", bucket, prefix, resolved)

    if not scheme:
        raise InvalidUrlError(f"store URL has no scheme (memory://, file:///, s3://): {shown!r}")
    raise InvalidUrlError(f"unsupported store URL scheme {scheme!r} in {shown!r}; use memory://, file:/// or s3://")


def resolve_store(
    url: str,
    *,
    options: Mapping[str, str] | None = None,
    clock_ms: Callable[[], int] | None = None,
    memory_registry: MemoryRegistry | None = None,
    env: Mapping[str, str] | None = None,
) -> ObjectStore:
    """Open the object store that ``url`` names. Raises ``InvalidUrlError`` naming what is wrong
    (:func:`check_store_url` checks the same without opening it)."""
    plan = _plan(url, options, env)
    if plan[0] == "memory":
        _, netloc, root = plan
        if clock_ms is None:
            from slatedb.runtime.production import ProductionRuntime

            clock_ms = ProductionRuntime().now_ms
        registry = memory_registry or DEFAULT_REGISTRY
        return MemoryStore(registry.bucket(netloc), clock_ms, root=root, url=url, registry=registry)

    if plan[0] == "file":
        _, path, fsync = plan
        from .local import LocalStore

        return LocalStore(path, url=url, fsync=fsync)

    _, bucket, prefix, resolved = plan
    from .s3 import S3Store

    return S3Store(bucket, prefix, url=url, **resolved)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Paths between databases (clones: ExternalDb.path)
# ---------------------------------------------------------------------------------------------


def _split(url: str) -> tuple[str, list[str], str]:
    """``(scheme://netloc, path segments, query)`` of a store URL (no validation); the segments
    percent-decoded, as :func:`resolve_store` opens them (``p%20q`` is the directory ``p q``)."""
    parsed = urllib.parse.urlsplit(url)
    segments = [urllib.parse.unquote(s) for s in parsed.path.split("/") if s]
    return f"{parsed.scheme.lower()}://{parsed.netloc}", segments, parsed.query


def _url_segment(segment: str) -> str:
    """A decoded path segment written back into a URL: only what :func:`resolve_store` would
    read otherwise is escaped (``%``, and ``#``/``?``, which end a path)."""
    return segment.replace("%", "%25").replace("#", "%23").replace("?", "%3F")


def _join(base: str, segments: list[str], query: str) -> str:
    path = "/".join(_url_segment(s) for s in segments)
    if base.startswith("file://"):
        url = base + "/" + path
    else:
        url = base + ("/" + path if segments else "")
    return url + ("?" + query if query else "")


def relative_db_path(from_url: str, to_url: str) -> str:
    """How the database at ``from_url`` names the database at ``to_url`` in its manifest.

    The official engine stores a clone's parent as a path inside the *same* object store
    (``ExternalDb.path``, e.g. ``"parent"`` next to ``"clone"``). We write the path relative to
    the closest common ancestor of the two URLs, which is what the official engine wrote when
    both databases sit under the store root it was given. The path is the object-store path,
    percent-decoded as the official engine stores it (``file:///d/p%20q`` is ``p q``). Databases
    in different buckets (or schemes) get the full URL, which only this implementation resolves.
    """
    base_f, seg_f, _ = _split(from_url)
    base_t, seg_t, query_t = _split(to_url)
    if base_f != base_t or not seg_t:
        # A full URL, without its credentials: a manifest is no place for a secret (the reader
        # of the clone gives its own, db_url_candidates).
        return _check_utf8("the path of the database named in a manifest", _without_credentials(to_url))
    common = 0
    while common < min(len(seg_f) - 1, len(seg_t) - 1) and seg_f[common] == seg_t[common]:
        common += 1
    return _check_utf8(f"the path by which the manifest at {shown_url(from_url)!r} would name the database at {shown_url(to_url)!r},",
                       "/".join(seg_t[common:]))


def db_url_candidates(from_url: str, path: str) -> list[str]:
    """The URLs ``path`` (an ``ExternalDb.path``) may name, seen from ``from_url``: a full URL
    as is; a relative path under each ancestor of ``from_url``, nearest first (the caller picks
    the first that holds a database)."""
    if "://" in path:
        return [_with_credentials_of(path, from_url)]
    base, segments, query = _split(from_url)
    rel = [s for s in path.split("/") if s]
    if not segments:  # a database at the store's root: its paths are under the root itself
        return [_join(base, rel, query)]
    return [_join(base, segments[:i] + rel, query) for i in range(len(segments) - 1, -1, -1)]


#: The URL parameters that are credentials: never written into a manifest.
_CREDENTIALS = ("access_key_id", "secret_access_key", "session_token")


def _query_parts(url: str) -> tuple[urllib.parse.SplitResult, list[str]]:
    parsed = urllib.parse.urlsplit(url)
    return parsed, [p for p in parsed.query.split("&") if p]


def _without_credentials(url: str) -> str:
    """``url`` without its credential parameters (the full URL of a database in another bucket,
    as a clone's manifest names it)."""
    parsed, parts = _query_parts(url)
    kept = [p for p in parts if p.partition("=")[0] not in _CREDENTIALS]
    return url if len(kept) == len(parts) else parsed._replace(query="&".join(kept)).geturl()


def _with_credentials_of(path: str, from_url: str) -> str:
    """``path`` (a full URL a manifest names, written without credentials) with those of
    ``from_url``, the database that names it, when both are of one scheme and ``path`` has none
    of its own: the clone's reader reaches its parent with the credentials it was given."""
    parsed, parts = _query_parts(path)
    base, own = _query_parts(from_url)
    if parsed.scheme.lower() != base.scheme.lower() or any(p.partition("=")[0] in _CREDENTIALS for p in parts):
        return path
    extra = [p for p in own if p.partition("=")[0] in _CREDENTIALS]
    return parsed._replace(query="&".join(parts + extra)).geturl() if extra else path
