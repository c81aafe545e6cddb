"""``ObjectStore``, ``ObjectStoreBuilder`` and ``Settings`` with the official signatures.

An :class:`ObjectStore` here is a root URL (plus provider options) that this engine's URL
resolver opens; a database lives at ``root/path`` (``DbBuilder(path, store)``). The official
``memory:///`` store is private to its ``ObjectStore`` value: each one maps to its own
``memory://uniffi-N`` store of the in-process registry."""

from __future__ import annotations

import itertools
import json
import os
import urllib.parse
from typing import Any, Mapping

from slatedb.config import Settings as _Settings
from slatedb.errors import InvalidArgumentError
from slatedb.objstore.base import validate_key
from slatedb.redact import shown_url
from slatedb.uniffi.errors import Error, refused, translated
from slatedb.uniffi.values import ObjectStoreType

_memory_ids = itertools.count(1)

#: The official (object_store crate) S3 configuration keys this engine's S3 store takes.
_S3_KEYS = {
    "aws_endpoint": "endpoint_url", "aws_endpoint_url": "endpoint_url", "endpoint": "endpoint_url",
    "aws_region": "region", "region": "region",
    "aws_access_key_id": "access_key_id", "access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key", "secret_access_key": "secret_access_key",
    "aws_session_token": "session_token", "session_token": "session_token", "aws_token": "session_token",
}
#: Keys accepted without effect because this engine already behaves so.
_S3_IMPLIED = {"aws_allow_http": "http endpoints are used as given", "allow_http": "http endpoints are used as given"}


class ObjectStore:
    """An object store root: :meth:`resolve` a URL, or build one with :class:`ObjectStoreBuilder`."""

    def __init__(self, url: str, options: Mapping[str, str] | None = None) -> None:
        root = url.rstrip("/")
        self._url = url[:len(root) + 2] if root.endswith(":") else root  # "file://" stays whole
        self._options = dict(options or {})

    @staticmethod
    def resolve(url: str) -> "ObjectStore":
        """An object store from a URL (``file:///``, ``memory:///``, ``s3://bucket``); as in the
        official, a path in the URL is refused: give it to the builder."""
        kind, root = _parse(url)
        if kind == "file" and root.strip("/"):
            raise Error.Invalid(f"invalid object store path. provide path to builder instead. path=`{root.strip('/')}`")
        return _store(kind, url, {})

    @staticmethod
    def from_env(env_file: str | None = None) -> "ObjectStore":
        raise refused("ObjectStore.from_env", "build the store from a URL (ObjectStore.resolve or ObjectStoreBuilder)")

    def url_of(self, path: str) -> str:
        """The URL of the database at ``path`` under this store."""
        if not isinstance(path, str):
            raise Error.Invalid(f"path must be a str, not {type(path).__name__}")
        path = path.strip("/")
        if not path:
            return self._url + "/" if self._url.endswith("://") else self._url
        try:
            validate_key(path)
        except Exception as e:
            raise Error.Invalid(f"invalid database path {path!r}: {e}") from None
        return f"{self._url}/{urllib.parse.quote(path, safe='/')}"

    @property
    def options(self) -> dict[str, str]:
        return dict(self._options)

    def __repr__(self) -> str:
        return f"ObjectStore({shown_url(self._url)!r})"


def _parse(url: Any) -> tuple[str, str]:
    if not isinstance(url, str) or "://" not in url:
        raise Error.Invalid(f"object store URL must look like scheme://..., got {shown_url(url)!r}")
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    if scheme not in ("file", "memory", "s3"):
        raise refused(f"object store scheme {scheme!r}", "use file:///, memory:/// or s3://")
    return scheme, parsed.path


def _store(kind: str, url: str, options: Mapping[str, str]) -> ObjectStore:
    if kind == "memory":
        return ObjectStore(f"memory://uniffi-{next(_memory_ids)}")
    if kind == "file":
        path = urllib.parse.urlsplit(url).path or "/"
        with translated():
            os.makedirs(path, exist_ok=True)
        return ObjectStore("file://" + path.rstrip("/") if path != "/" else "file://")
    return ObjectStore(url, options)


class ObjectStoreBuilder:
    """Builds an :class:`ObjectStore` of a provider type, configured by URL and key/value entries."""

    def __init__(self, store_type: Any) -> None:
        if not isinstance(store_type, ObjectStoreType):
            raise TypeError(f"store_type must be an ObjectStoreType, not {type(store_type).__name__}")
        if store_type in (ObjectStoreType.AZURE, ObjectStoreType.GCS):
            raise refused(f"ObjectStoreType.{store_type.name}", "use LOCAL, IN_MEMORY or S3")
        self._type = store_type
        self._url: str | None = None
        self._config: dict[str, str] = {}
        self._built = False

    @staticmethod
    def from_url(url: str) -> "ObjectStoreBuilder":
        kind, _ = _parse(url)
        b = ObjectStoreBuilder({"file": ObjectStoreType.LOCAL, "memory": ObjectStoreType.IN_MEMORY,
                                "s3": ObjectStoreType.S3}[kind])
        b._url = url
        return b

    @staticmethod
    def from_env(store_type: Any, env_file: str | None = None) -> "ObjectStoreBuilder":
        if store_type is not ObjectStoreType.S3:
            return ObjectStoreBuilder(store_type)
        b = ObjectStoreBuilder(store_type)
        for var, value in os.environ.items():
            if var.lower() in _S3_KEYS:
                b._config[var.lower()] = value
        return b

    def with_url(self, url: str) -> None:
        _parse(url)
        self._url = url

    def with_config(self, key: str, value: str) -> None:
        if self._type is not ObjectStoreType.S3:
            raise refused(f"config key {key!r} for {self._type.name}", "only S3 stores take configuration")
        k = key.lower()
        if k not in _S3_KEYS and k not in _S3_IMPLIED:
            raise refused(f"S3 config key {key!r}", f"known keys: {', '.join(sorted({*_S3_KEYS, *_S3_IMPLIED}))}")
        self._config[k] = value

    def build(self) -> ObjectStore:
        if self._built:
            raise Error.Invalid("this ObjectStoreBuilder was already built")
        self._built = True
        if self._type is ObjectStoreType.IN_MEMORY:
            return _store("memory", "memory:///", {})
        if self._url is None:
            if self._type is ObjectStoreType.LOCAL:
                return _store("file", "file:///", {})
            bucket = self._config.get("aws_bucket") or self._config.get("bucket")
            if not bucket:
                raise Error.Invalid("an S3 store needs a URL (s3://bucket)")
            self._url = f"s3://{bucket}"
        kind, _ = _parse(self._url)
        options = {_S3_KEYS[k]: v for k, v in self._config.items() if k in _S3_KEYS}
        return _store(kind, self._url, options)


class Settings:
    """Database settings in the official JSON shape; :meth:`set` takes a dotted path and a JSON
    literal. Every change is validated at once (a bad key or value raises ``Error.Invalid``)."""

    def __init__(self, settings: _Settings) -> None:
        self._s = settings

    @staticmethod
    def default() -> "Settings":
        return Settings(_Settings.default())

    @staticmethod
    def from_json_string(json_str: str) -> "Settings":
        with translated():
            return Settings(_Settings.from_json(json_str))

    @staticmethod
    def from_file(path: str) -> "Settings":
        with translated():
            return Settings(_Settings.from_file(path))

    @staticmethod
    def from_env(prefix: str) -> "Settings":
        with translated():
            return Settings(_Settings.from_env(os.environ, prefix))

    @staticmethod
    def from_env_with_default(prefix: str, default_settings: "Settings") -> "Settings":
        with translated():
            base = default_settings._s.to_dict()
            env = _Settings.from_env(os.environ, prefix).to_dict()
            defaults = _Settings.default().to_dict()
            return Settings(_Settings.from_dict(_overlay(base, env, defaults)))

    @staticmethod
    def load() -> "Settings":
        with translated():
            return Settings(_Settings.load(None, os.environ))

    def set(self, key: str, value_json: str) -> None:
        if not isinstance(key, str) or not key:
            raise Error.Invalid(f"settings key must be a non-empty str, got {key!r}")
        try:
            value = json.loads(value_json)
        except (TypeError, json.JSONDecodeError) as e:
            raise Error.Invalid(f"settings value for {key!r} is not a JSON literal: {e}") from None
        data = self._s.to_dict()
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {} if node.get(part) is None else node[part]
            node = node[part]
            if not isinstance(node, dict):
                raise Error.Invalid(f"settings key {key!r}: {part!r} is not a section")
        old = node.get(parts[-1])
        if old is not None and value is not None and _json_kind(old) != _json_kind(value):
            raise Error.Invalid(f"settings update produced invalid settings: {key}: invalid type: "
                                f"{_json_kind(value)} `{value_json}`, expected a {_json_kind(old)}")
        node[parts[-1]] = value
        try:
            self._s = _Settings.from_dict(data)
        except InvalidArgumentError as e:
            raise Error.Invalid(f"settings update produced invalid settings: {e}") from None

    def to_json_string(self) -> str:
        return json.dumps(self._s.to_official_dict())

    @property
    def settings(self) -> _Settings:
        """This engine's settings value."""
        return self._s


def _json_kind(value: Any) -> str:
    """The JSON type of a settings value as the official parser names it (durations are strings)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "integer" if isinstance(value, int) else "number"
    if isinstance(value, str):
        return "string"
    return "map" if isinstance(value, dict) else type(value).__name__


def _overlay(base: dict, env: dict, defaults: dict) -> dict:
    """``base`` with each value ``env`` sets away from the defaults."""
    out = dict(base)
    for k, v in env.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _overlay(out[k], v, defaults.get(k) or {})
        elif v != defaults.get(k):
            out[k] = v
    return out
