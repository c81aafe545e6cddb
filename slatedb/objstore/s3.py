"""An S3 object store through s3fs (AWS S3, SeaweedFS, moto, any S3-compatible server).

Conditional puts use S3's ``If-None-Match: *`` (create-if-absent) and ``If-Match`` (update).
Servers disagree in their error shapes, so we classify on the botocore error s3fs keeps as the
``__cause__`` of the exception it raises, not on the exception s3fs chose:

- AWS and moto answer a failed ``If-None-Match`` with 412 carrying ``<Condition>``; SeaweedFS
  omits it (s3fs then raises ``OSError(EINVAL)``). Both are "already exists" here.
- ``If-Match`` on a missing key is 404 on AWS and moto, but 412 on SeaweedFS: on a 412 we HEAD
  the key to tell "not found" from "precondition failed".
- 409 ``ConditionalRequestConflict`` (a concurrent conditional write in flight), 5xx, throttling
  and connection errors are transient.
- Permanent, raised at once and never retried (issue 16): ``NoSuchBucket`` ->
  :class:`BucketNotFoundError` ("bucket X does not exist at ENDPOINT"); 403 and the credential
  codes -> :class:`AccessDeniedError`; no credentials at all (botocore's ``NoCredentialsError``)
  -> :class:`CredentialsMissingError`; any other 4xx, and a request botocore refuses to send
  (parameter validation) -> :class:`PermanentObjectStoreError`. Every message names the bucket
  and the endpoint.

s3fs's and botocore's own retries are disabled (``retries=1``, ``total_max_attempts=1``):
retrying a conditional put inside the client would turn an applied-but-unanswered request into a
false "lost the race". Callers retry with knowledge of that ambiguity, bounded by the runtime's
retry policy (slatedb/objstore/retry.py). Connecting times out after
:data:`CONNECT_TIMEOUT_S`, a socket read after :data:`READ_TIMEOUT_S`.

s3fs runs its requests on its own asyncio loop thread; each call here hops to a worker thread
with ``trio.to_thread`` and from there into that loop.
"""

from __future__ import annotations

import asyncio
import calendar
from typing import Any, Awaitable, Callable, TypeVar

import trio
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)

from slatedb.errors import (
    AccessDeniedError,
    BucketNotFoundError,
    CredentialsMissingError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
    PermanentObjectStoreError,
    PreconditionFailedError,
    TransientObjectStoreError,
)

from .base import (
    OVERWRITE,
    GetResult,
    ObjectMeta,
    ObjectStore,
    PutKind,
    PutMode,
    validate_key,
    validate_prefix,
    validate_range,
)

T = TypeVar("T")

_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_PRECONDITION_CODES = {"PreconditionFailed", "412"}
_TRANSIENT_CODES = {
    "ConditionalRequestConflict", "409", "SlowDown", "Throttling", "ThrottlingException",
    "RequestTimeout", "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "500", "502",
    "503", "504", "429", "TooManyRequests",
}
_ACCESS_CODES = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
                 "AllAccessDisabled", "AccountProblem", "InvalidSecurity", "403", "Forbidden"}

#: Seconds to establish a connection, and to wait for a socket read, before a transient error.
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 60.0


def _client_error(exc: BaseException) -> tuple[str, int] | None:
    """(code, http status) of the botocore ClientError behind ``exc``, if there is one."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        response = getattr(cur, "response", None)
        if isinstance(response, dict) and "Error" in response:
            code = str(response["Error"].get("Code", ""))
            status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            return code, status
        cur = cur.__cause__ or cur.__context__
    return None


def _ms(last_modified: Any) -> int:
    return calendar.timegm(last_modified.utctimetuple()) * 1000 + last_modified.microsecond // 1000


class S3Store(ObjectStore):
    """Objects under ``s3://bucket/prefix``."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        url: str | None = None,
    ) -> None:
        import s3fs  # optional dependency (extra "s3")

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.url = url or f"s3://{bucket}/{self.prefix}"
        self.endpoint = endpoint_url or f"AWS S3{' ' + region if region else ''}"
        client_kwargs: dict[str, Any] = {}
        if endpoint_url:
            client_kwargs["endpoint_url"] = endpoint_url
        if region:
            client_kwargs["region_name"] = region
        self._fs = s3fs.S3FileSystem(
            key=access_key_id,
            secret=secret_access_key,
            token=session_token,
            client_kwargs=client_kwargs,
            config_kwargs={"retries": {"total_max_attempts": 1}, "connect_timeout": CONNECT_TIMEOUT_S,
                           "read_timeout": READ_TIMEOUT_S},
            skip_instance_cache=True,
            use_listings_cache=False,
        )
        self._fs.retries = 1  # an instance attribute in s3fs, not a constructor argument

    # -- plumbing -----------------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return self.prefix + validate_key(key)

    async def _call(self, key: str, coro_fn: Callable[[], Awaitable[T]]) -> T:
        from fsspec.asyn import sync

        fs = self._fs

        def run() -> T:
            return sync(fs.loop, coro_fn)

        try:
            # abandon_on_cancel: a retry deadline (slatedb/objstore/retry.py) cuts off a request
            # to a frozen endpoint; the abandoned thread ends at its own read timeout.
            return await trio.to_thread.run_sync(run, abandon_on_cancel=True)
        except ObjectStoreError:
            raise
        except (OSError, BotoCoreError, ClientError, asyncio.TimeoutError) as exc:
            # I/O failures become typed errors; programming errors (TypeError, ...) propagate.
            raise self._classify(key, exc) from exc

    def _where(self) -> str:
        return f"bucket {self.bucket} at {self.endpoint}"

    def _classify(self, key: str, exc: Exception) -> ObjectStoreError:
        """The typed error for ``exc`` (see the module docstring for the rules)."""
        err = _client_error(exc)
        if err is None:
            if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
                return CredentialsMissingError(key, f"no credentials for {self._where()}: {exc} (set "
                                                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or access_key_id "
                                                    "and secret_access_key in the store options)")
            if isinstance(exc, ParamValidationError):
                return PermanentObjectStoreError(key, f"invalid request to {self._where()}: {exc}")
            if isinstance(exc, FileNotFoundError):
                return ObjectNotFoundError(key, "no such object")
            if isinstance(exc, PermissionError):
                return AccessDeniedError(key, f"access denied to {self._where()}: {exc}")
            return TransientObjectStoreError(key, f"{type(exc).__name__}: {exc} ({self._where()})")
        code, status = err
        if code == "NoSuchBucket":
            return BucketNotFoundError(key, self.bucket, self.endpoint)
        if code in _NOT_FOUND_CODES or status == 404:
            return ObjectNotFoundError(key, "no such object")
        if code in _TRANSIENT_CODES or status >= 500 or status in (409, 429):
            return TransientObjectStoreError(key, f"S3 {status} {code} from {self._where()}")
        if code in _ACCESS_CODES or status == 403:
            return AccessDeniedError(key, f"S3 {status} {code}: access denied to {self._where()} "
                                          "(check the access key, secret and permissions)")
        if 400 <= status < 500:
            return PermanentObjectStoreError(key, f"S3 {status} {code}: request refused by {self._where()}: {exc}")
        return TransientObjectStoreError(key, f"unexpected S3 error {status} {code} from {self._where()}: {exc}")

    def _meta(self, key: str, resp: dict[str, Any], size: int) -> ObjectMeta:
        return ObjectMeta(key, size, _ms(resp["LastModified"]), resp["ETag"])

    # -- operations ---------------------------------------------------------------------------

    async def get(self, key: str, byte_range: tuple[int, int] | None = None) -> GetResult:
        s3_key = self._key(key)
        byte_range = validate_range(key, byte_range)
        fs = self._fs

        async def go() -> GetResult:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Key": s3_key}
            if byte_range is not None:
                if byte_range[0] == byte_range[1]:
                    head = await fs._call_s3("head_object", Bucket=self.bucket, Key=s3_key)
                    return GetResult(b"", self._meta(key, head, int(head["ContentLength"])))
                kw["Range"] = f"bytes={byte_range[0]}-{byte_range[1] - 1}"
            try:
                resp = await fs._call_s3("get_object", **kw)
            except Exception as exc:
                err = _client_error(exc)
                if byte_range is not None and err is not None and err[0] == "InvalidRange":
                    head = await fs._call_s3("head_object", Bucket=self.bucket, Key=s3_key)
                    return GetResult(b"", self._meta(key, head, int(head["ContentLength"])))
                raise
            async with resp["Body"] as body:
                data = await body.read()
            size = len(data)
            content_range = resp.get("ContentRange")
            if content_range and "/" in content_range:
                size = int(content_range.rsplit("/", 1)[1])
            return GetResult(data, self._meta(key, resp, size))

        return await self._call(key, go)

    async def head(self, key: str) -> ObjectMeta:
        s3_key = self._key(key)

        async def go() -> ObjectMeta:
            resp = await self._fs._call_s3("head_object", Bucket=self.bucket, Key=s3_key)
            return self._meta(key, resp, int(resp["ContentLength"]))

        return await self._call(key, go)

    async def put(self, key: str, data: bytes, mode: PutMode = OVERWRITE) -> ObjectMeta:
        s3_key = self._key(key)
        data = bytes(data)
        fs = self._fs

        async def go() -> ObjectMeta:
            kw: dict[str, Any] = {"Bucket": self.bucket, "Key": s3_key, "Body": data}
            if mode.kind is PutKind.CREATE_IF_ABSENT:
                kw["IfNoneMatch"] = "*"
            elif mode.kind is PutKind.UPDATE_IF_MATCH:
                kw["IfMatch"] = mode.etag
            try:
                await fs._call_s3("put_object", **kw)
            except Exception as exc:
                err = _client_error(exc)
                if err is not None and (err[0] in _PRECONDITION_CODES or err[1] == 412):
                    if mode.kind is PutKind.CREATE_IF_ABSENT:
                        raise ObjectAlreadyExistsError(key, "object already exists (create-if-absent)") from exc
                    if mode.kind is PutKind.UPDATE_IF_MATCH:
                        # SeaweedFS answers If-Match on a missing key with 412: look.
                        try:
                            await fs._call_s3("head_object", Bucket=self.bucket, Key=s3_key)
                        except Exception as head_exc:
                            herr = _client_error(head_exc)
                            if herr is not None and (herr[0] in _NOT_FOUND_CODES or herr[1] == 404):
                                raise ObjectNotFoundError(key, "no such object (update-if-match)") from exc
                            raise
                        raise PreconditionFailedError(key, f"etag does not match {mode.etag}") from exc
                if err is not None and (err[0] in _NOT_FOUND_CODES or err[1] == 404) and mode.kind is PutKind.UPDATE_IF_MATCH:
                    raise ObjectNotFoundError(key, "no such object (update-if-match)") from exc
                raise
            head = await fs._call_s3("head_object", Bucket=self.bucket, Key=s3_key)
            return self._meta(key, head, int(head["ContentLength"]))

        return await self._call(key, go)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        s3_prefix = self.prefix + validate_prefix(prefix)
        n = len(self.prefix)

        async def go() -> list[ObjectMeta]:
            out: list[ObjectMeta] = []
            token: str | None = None
            while True:
                kw: dict[str, Any] = {"Bucket": self.bucket, "Prefix": s3_prefix}
                if token:
                    kw["ContinuationToken"] = token
                resp = await self._fs._call_s3("list_objects_v2", **kw)
                for obj in resp.get("Contents", []):
                    out.append(ObjectMeta(obj["Key"][n:], int(obj["Size"]), _ms(obj["LastModified"]), obj["ETag"]))
                if not resp.get("IsTruncated"):
                    break
                token = resp.get("NextContinuationToken")
            out.sort(key=lambda m: m.key.encode())
            return out

        return await self._call(prefix, go)

    async def check_root(self) -> None:
        async def go() -> None:
            await self._fs._call_s3("head_bucket", Bucket=self.bucket)

        try:
            await self._call("", go)
        except ObjectNotFoundError:  # HEAD answers a missing bucket with a bare 404
            raise BucketNotFoundError("", self.bucket, self.endpoint) from None

    async def delete(self, key: str) -> None:
        s3_key = self._key(key)

        async def go() -> None:
            await self._fs._call_s3("delete_object", Bucket=self.bucket, Key=s3_key)

        await self._call(key, go)

    async def copy(self, src_key: str, dst_key: str) -> ObjectMeta:
        src = self._key(src_key)
        dst = self._key(dst_key)

        async def go() -> ObjectMeta:
            await self._fs._call_s3(
                "copy_object", Bucket=self.bucket, Key=dst, CopySource={"Bucket": self.bucket, "Key": src}
            )
            head = await self._fs._call_s3("head_object", Bucket=self.bucket, Key=dst)
            return self._meta(dst_key, head, int(head["ContentLength"]))

        return await self._call(src_key, go)
