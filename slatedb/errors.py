"""Typed errors of slatedb.

Every failure a caller can act on has its own class, and each message names the problem (the
argument, the object key, the offset). Corruption is never silent: a decoder that finds bytes it
cannot trust raises :class:`CorruptionError` naming the object and the offset, rather than
returning something that might be wrong.
"""

from __future__ import annotations

from slatedb.redact import shown_url


class SlateDBError(Exception):
    """Base class of every error raised by slatedb."""


class InvalidArgumentError(SlateDBError, ValueError):
    """A caller passed an argument that is not acceptable (wrong type, empty key, too large...)."""


class FencedError(SlateDBError):
    """This writer (or compactor) was fenced: a newer one took over the database.

    A fenced writer stops: every later write raises this error and every pending durability
    wait fails with it. Nothing is acknowledged after the fence was observed (FENCE-3).
    """


#: The name the issue and the official engine use for :class:`FencedError`.
Fenced = FencedError


class ClosedError(SlateDBError):
    """The database (or iterator, or snapshot) was used after ``close()``."""


class ReentrantCallError(SlateDBError):
    """A synchronous call on a database from that database's own runtime thread: a merge
    operator (run there by a read that fetches blocks, by a flush or by a compaction) calling the
    database it merges for. The call would wait for the thread that is making it; it is refused
    instead (a read then raises :class:`MergeOperatorError` naming the key). An operator must
    compute its result from its arguments."""

    def __init__(self, what: str = "database") -> None:
        super().__init__(
            f"a call on this {what} from its own runtime thread (a merge operator calling the database it merges "
            "for) would wait for itself: a merge operator must compute its result from its arguments")


class ReadOnlyError(InvalidArgumentError):
    """A write was attempted through a read-only view (a snapshot or a reader)."""


class SeekKeyOutOfRangeError(InvalidArgumentError):
    """``seek`` to a key outside the iterator's scan range (the official ``SeekKeyOutOfKeyRange``).
    The iterator is left where it was."""


class MergeOperatorError(SlateDBError):
    """A merge operand could not be resolved (spec/protocols/merge.md MERGE-7): the merge operator
    raised or returned something other than bytes, naming the key. Raised by the read or the
    compaction that met the operand; nothing is written by it, and the database stays usable."""

    def __init__(self, key: bytes, message: str) -> None:
        self.key = key
        super().__init__(f"merge operator failed for key {key!r}: {message}")


class MergeOperatorMissingError(InvalidArgumentError):
    """A merge needs a merge operator and none was configured (the official
    ``MergeOperatorMissing``): ``merge`` without one at open, or a read meeting a merge operand
    of ``key`` in a database opened without one (MERGE-8)."""

    def __init__(self, message: str, key: bytes | None = None) -> None:
        self.key = key
        super().__init__(message)


class TransactionConflictError(SlateDBError):
    """A transaction's commit found a conflicting write committed after it began (the official
    ``Error.Transaction("transaction conflict")``). Nothing of the transaction was written."""


class TransactionClosedError(ClosedError):
    """A transaction was used after ``commit()`` or ``rollback()``."""


class NotFoundError(SlateDBError):
    """The thing asked for does not exist: a checkpoint id, a compaction, a manifest id, a
    database at a path."""


class CheckpointNotFoundError(NotFoundError):
    """No checkpoint with this id in the latest manifest (deleted, or expired and collected)."""

    def __init__(self, checkpoint_id: object, where: str = "") -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(f"no checkpoint {checkpoint_id}{' in ' + where if where else ''}")


class CheckpointExpiredError(CheckpointNotFoundError):
    """A refresh of a checkpoint that expired and is not collected yet: GC may have read the
    manifest in which it had expired and be deleting what it pinned, so it is not revived
    (checkpoints-gc.md step 3). Create a new checkpoint instead."""

    def __init__(self, checkpoint_id: object, expired_at_s: int) -> None:
        self.expired_at_s = expired_at_s
        super().__init__(checkpoint_id, f"the latest manifest: it expired at {expired_at_s} s and is not revived "
                                        f"(GC may already be collecting what it pinned); create a new checkpoint")


class InvalidDbStateError(SlateDBError):
    """The database is not in a state that allows the operation: not initialized (a clone that
    never finished), destroyed, or a source checkpoint that has expired (RFC 000)."""


class SegmentsUnsupportedError(InvalidDbStateError):
    """The database has key segments (RFC 0024): the official engine wrote it with a segment
    extractor, which this engine does not implement (slatedb/manifest/segments.py). The official
    engine opened without that extractor refuses it too (``Error.Invalid``)."""


class ManifestsMissingError(InvalidDbStateError):
    """A database path holds WAL objects, SSTs, ``.compactions`` or GC boundary files but no
    manifest: its manifests were lost or deleted. Opening refuses rather than create a new
    database over the data (``Db.open(..., create="force")`` asks for one anyway).

    ``found`` maps each directory (``"wal/"``, ``"compacted/"``...) to how many objects it holds.
    """

    def __init__(self, url: str, found: dict[str, int], examples: list[str]) -> None:
        self.url = url = shown_url(url)  # the store URL as messages show it (no secret)
        self.found = dict(found)
        self.examples = list(examples)
        names = {"wal/": "WAL object", "compacted/": "SST", "compactions/": ".compactions file", "gc/": "GC boundary file"}
        what = ", ".join(f"{n} {names.get(d, 'object')}{'s' if n != 1 else ''} under {d}" for d, n in found.items())
        super().__init__(
            f"database at {url} has no manifest under manifest/ but holds {what} (e.g. {', '.join(examples)}): "
            "its manifests were lost or deleted. Refusing to create a new database over that data; restore "
            'manifest/, or open with create="force" to start a new, empty database there anyway')


class InvalidDeletionError(SlateDBError):
    """A hard destroy was refused: the database still has active (unexpired) checkpoints."""


class BoundaryVanishedError(SlateDBError):
    """A GC boundary file that this process had seen is gone. GC never deletes boundary files
    (RFC 004), so the store has been tampered with: stop rather than risk a stale commit."""


class ObjectVersionBehindBoundaryError(SlateDBError):
    """A sequenced-metadata create landed at or behind the GC boundary (RFC 004): the write did
    not commit, although the create itself succeeded."""

    def __init__(self, namespace: str, object_id: int, boundary: int) -> None:
        self.namespace = namespace
        self.object_id = object_id
        self.boundary = boundary
        super().__init__(f"{namespace} id {object_id} is at or behind the GC boundary {boundary}: not committed")


class CommitOutcomeUnknownError(SlateDBError):
    """A manifest commit whose earlier create landed but was reported behind the GC boundary
    (RFC 004's false negative) was then refused by a guard or precondition (``cause``: a newer
    writer fenced it, a seq reached): the refusal does not say the first create did not land
    and become part of the history. Raised instead of the refusal for edits that declare it
    (:attr:`slatedb.manifest.edit.Edit.unsure_refusals`); nothing the edit names may be deleted."""

    def __init__(self, what: str, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"{what}: an earlier attempt landed but was reported behind the GC boundary, then the "
                         f"retry was refused ({cause}); it may have committed")


class CorruptionError(SlateDBError):
    """Stored bytes failed a check: CRC mismatch, truncation, unknown version, bad flags, ...

    ``object_name`` is the object's key (or another name of where the bytes came from) and
    ``offset`` the byte offset in that object where the problem was found, when known.
    """

    def __init__(self, object_name: str, offset: int | None, reason: str) -> None:
        self.object_name = object_name
        self.offset = offset
        self.reason = reason
        where = f"{object_name}" if offset is None else f"{object_name} at offset {offset}"
        super().__init__(f"corrupt object {where}: {reason}")


# ---------------------------------------------------------------------------------------------
# Object store
# ---------------------------------------------------------------------------------------------


class ObjectStoreError(SlateDBError):
    """Base class of the object-store layer's typed errors."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        super().__init__(f"{key}: {message}")


class ObjectNotFoundError(ObjectStoreError):
    """The object does not exist (get, head, copy source, update-if-match of a missing key)."""


class ObjectAlreadyExistsError(ObjectStoreError):
    """A create-if-absent put found the key already present: the caller lost the race."""


class PreconditionFailedError(ObjectStoreError):
    """An update-if-match put found an ETag other than the expected one."""


class TransientObjectStoreError(ObjectStoreError):
    """A retryable failure (timeout, 5xx, throttling, connection reset).

    The operation may or may not have taken effect: callers that retry a conditional put must be
    ready to find their own earlier success (an *ambiguous outcome*).
    """


class PermanentObjectStoreError(ObjectStoreError):
    """A failure that retrying cannot fix: the request itself is refused (invalid request, an
    unexpected 4xx). Raised at once; the message names the bucket and endpoint."""


class AccessDeniedError(PermanentObjectStoreError):
    """The store refused the credentials or the permission (S3 403: wrong key or secret,
    signature mismatch, missing permission)."""


class CredentialsMissingError(AccessDeniedError):
    """No credentials were found for the store (none in the options, the URL or the ``AWS_*``
    variables): raised at once, never retried."""


def bucket_name_problem(bucket: str) -> str | None:
    """What makes ``bucket`` an invalid name under S3's current bucket naming rules, or None.
    Only a hint for :class:`BucketNotFoundError`: some servers, and AWS buckets made before the
    rules, accept other names, so such a name is not refused."""
    import re

    problems = []
    if bucket != bucket.lower():
        problems.append("uppercase letters")
    if not 3 <= len(bucket) <= 63:
        problems.append(f"{len(bucket)} characters")
    bad = sorted(set(re.sub(r"[a-zA-Z0-9.\-]", "", bucket)))
    if bad:
        problems.append(", ".join(repr(c) for c in bad))
    if bucket and not (bucket[0].isalnum() and bucket[-1].isalnum()):
        problems.append("does not start and end with a letter or digit")
    if ".." in bucket:
        problems.append("'..'")
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", bucket):
        problems.append("formatted as an IP address")
    return "; ".join(problems) or None


class BucketNotFoundError(PermanentObjectStoreError):
    """The bucket does not exist (it must be created before a database is opened in it)."""

    def __init__(self, key: str, bucket: str, endpoint: str) -> None:
        self.bucket = bucket
        self.endpoint = endpoint
        problem = bucket_name_problem(bucket)
        note = (f"; note that {bucket!r} is not a valid S3 bucket name: {problem} (a name is 3-63 characters "
                "of a-z, 0-9, '.' and '-', starting and ending with a letter or digit)") if problem else ""
        message = f"bucket {bucket} does not exist at {endpoint} (create it first{note})"
        super().__init__(key, message)
        if not key:  # the bucket check of an open names no object: no empty "key: " in front
            self.args = (message,)


class ObjectStoreRetriesExhaustedError(ObjectStoreError):
    """Transient failures went on past the retry bound (``object_store_max_retries`` attempts
    after the first, or the retry deadline). Not itself transient: callers stop here."""

    def __init__(self, key: str, what: str, attempts: int, elapsed_s: float, last: BaseException, bound: str = "") -> None:
        self.what = what
        self.attempts = attempts
        self.elapsed_s = elapsed_s
        self.last_error = last
        super().__init__(key, f"gave up on {what} after {attempts} attempts in {elapsed_s:.1f} s"
                              f"{' (' + bound + ')' if bound else ''}; last error: {last}")


class InvalidPathError(ObjectStoreError, InvalidArgumentError):
    """An object key or store URL is malformed (``..``, empty segment, leading ``/``, ...)."""


class InvalidUrlError(InvalidArgumentError):
    """A store URL cannot be resolved; the message says which part is wrong."""


def sole_exception(group: BaseExceptionGroup) -> BaseException:
    """The one error inside nested single-exception groups (trio nurseries wrap what a task
    raised); the group itself when it holds several."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


# --- Projection and union (RFC 000 "Manifest Projection and Union"; spec/protocols/projection-union.md)


class InvalidProjectionError(InvalidArgumentError):
    """A projection range or a projected source is not acceptable (an empty range, a start bound
    that is not inclusive, a source with segments)."""


class InvalidUnionError(InvalidArgumentError):
    """The official ``InvalidUnion``: the sources of a union cannot be combined (overlapping key
    ranges, given ranges that are not adjacent, colliding SST ids, segments)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid union: {reason}")


class UnionSetEmptyError(InvalidArgumentError):
    """The official ``InvalidUnionSetEmpty``: a clone or union without any source."""

    def __init__(self) -> None:
        super().__init__("Source manifest set must not be empty")


class SstIdCollisionError(InvalidUnionError):
    """Two sources of a union hold different physical SSTs under one ULID. The 0.17 format
    resolves an SST's object from its id alone (no ``original_id``), so they cannot share a
    manifest; see docs/rescaling.md."""


class CloneSourceWithWalError(InvalidArgumentError):
    """The official ``InvalidCloneSourceWithWal``: a source of a projection or union still has
    rows in its WAL (not yet in L0); flush its memtable (or write with the WAL off) first."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = list(paths)
        super().__init__(f"Projection and/or union with WAL is not supported, sources with WAL: {self.paths!r}")


class DuplicateCloneSourceError(InvalidArgumentError):
    """The official ``DuplicatedCloneSourcePath``: one source path named twice."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"clone source paths must be unique, found duplicate: {path!r}")


class IdenticalClonePathsError(InvalidArgumentError):
    """The official ``IdenticalClonePaths``: the destination is one of its own sources."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(f"the destination must differ from every source, both are {path!r}")
