"""``manifest/<id:020>.manifest`` (and, through :class:`SequencedStore`, ``.compactions``):
read the latest, write the next with create-if-absent CAS.

The protocol (spec/protocols/sequenced-metadata.md, RFC 001 "Manifest Updates", RFC 004):

1. list ``manifest/`` and read the file with the highest id ``N``;
2. apply the edit in memory (:func:`slatedb.manifest.edit.apply_edit`: guards, already-applied
   detection, the change; :mod:`slatedb.manifest.edits` lists the edits);
3. create ``N+1`` with create-if-absent; "already exists" means another process won: go to 1;
4. read ``gc/manifest.boundary`` (missing = 0); if ``N+1 <= B`` the create landed behind the
   GC boundary and did **not** commit (a stalled writer's stale update): go to 1.

Only after step 4 is the update reported committed (BOUNDARY-3, SEQMETA-1). A create reported
not committed may still have landed (RFC 004's false negative): the retry re-applies the same
edit, whose already-applied detection then finds it (:meth:`ManifestStore.commit`).
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Awaitable, Callable, Generic, TypeVar

import attrs

from slatedb.errors import (
    BoundaryVanishedError,
    CommitOutcomeUnknownError,
    CorruptionError,
    FencedError,
    InvalidDbStateError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    ObjectVersionBehindBoundaryError,
    PreconditionFailedError,
    SlateDBError,
    TransientObjectStoreError,
)
from slatedb.format.layout import (  # noqa: F401 (re-exported: the manifest names)
    MANIFEST_BOUNDARY_KEY,
    MANIFEST_DIR,
    MANIFEST_SUFFIX,
    manifest_key,
    parse_id,
    sequenced_key,
)
from slatedb.format.manifest import decode_manifest_v2, encode_manifest
from slatedb.format.types import ManifestV2
from slatedb.objstore.base import CREATE_IF_ABSENT, ObjectStore, PutMode
from slatedb.objstore.retry import create_if_absent_tagged, retry_transient
from slatedb.runtime import Runtime, probes, switches

from .edit import Attempt, Edit, apply_edit
from .validate import check_manifest
from slatedb.redact import shown_url

@attrs.frozen
class StoredManifest:
    """A manifest together with the id it was read from or committed as."""

    id: int
    manifest: ManifestV2


R = TypeVar("R")


@attrs.frozen
class Committed(Generic[R]):
    """What :meth:`ManifestStore.commit` returns: the manifest now stored (the one written, or
    the one read when the edit had nothing to write), the edit's result, and whether this call
    wrote it (False: nothing to do, or an earlier attempt of this call had landed)."""

    stored: StoredManifest
    result: R
    written: bool


class SequenceConflict(Exception):
    """Internal: the create of the next id lost the race (or landed behind the boundary)."""


class ManifestConflict(SequenceConflict):
    pass


async def read_boundary_versioned(store: ObjectStore, runtime: Runtime, key: str) -> tuple[int, str | None]:
    """The GC boundary ``B`` stored at ``key`` and its ETag; ``(0, None)`` when the file does
    not exist. Always an unconditional GET of the store itself (RFC 004: never a cache)."""
    try:
        got = await retry_transient(runtime, lambda: store.get(key), what=f"get {key}")
    except ObjectNotFoundError:
        return 0, None
    text = bytes(got.data).decode("ascii", errors="replace").strip()
    if not text.isdigit() or int(text) >= 2**64:
        raise CorruptionError(key, 0, f"boundary file does not hold a decimal u64: {text[:40]!r}")
    return int(text), got.meta.etag


async def read_boundary(store: ObjectStore, runtime: Runtime, key: str) -> int:
    """The GC boundary ``B`` stored at ``key`` (0 when the file does not exist)."""
    return (await read_boundary_versioned(store, runtime, key))[0]


V = TypeVar("V")  # the decoded file
S = TypeVar("S")  # the file together with its id


async def _settle_by_reading(runtime: Runtime) -> bool:
    """A boundary put that failed ambiguously may or may not have applied: wait a moment and let
    the next read tell (False: not known to be applied)."""
    await runtime.sleep(0.05)
    return False


async def _bug_put_trusted(runtime: Runtime) -> bool:
    """Catalogued bug ``boundary-put-trusted`` (sim/scenarios/catalogue.py): an ambiguous boundary put is taken
    as applied, without reading the boundary back."""
    return True


async def _bug_no_boundary_check(file_id: int) -> None:
    """Catalogued bug ``no-boundary-check`` (sim/scenarios/catalogue.py): a create that succeeded is reported
    committed without the post-create boundary read (RFC 004's stale commit)."""


#: The ids of names already listed, by (directory, suffix) and name (None: not an id): every poll
#: lists the same names again, and the ids of a listing of known names are looked up in C.
_LISTED: dict[tuple[str, str], dict[str, int | None]] = {}
_MAX_LISTED = 65536
_KEY_OF = operator.attrgetter("key")
_AN_ID = functools.partial(operator.is_not, None)


#: The last listing (a copy) and its ids by (directory, suffix, the first object): a poll
#: listing the same objects again (the metadata objects the store's listing cache hands out
#: again: one identity comparison each) gets the same ids without reading the names. A listing
#: that grew replaces its entry; an entry goes stale only when its first object is deleted (GC),
#: and at most 64 are kept (each holds a listing).
_LAST: dict[tuple[str, str, int], tuple[list, list[int]]] = {}
_MAX_LAST = 64


def listed_ids(metas: Any, directory: str, suffix: str) -> list[int]:
    """The ids of the ``<directory><id:020><suffix>`` names among listed objects, ascending
    (:func:`parse_id` of each name; other names are left out)."""
    metas = metas if type(metas) is list else list(metas)
    last_key = (directory, suffix, id(metas[0]) if metas else 0)  # the entry keeps metas[0] alive
    last = _LAST.get(last_key)
    if last is not None and last[0] == metas:  # the same objects (or equal ones): the same names
        return list(last[1])
    ids = _listed_ids(metas, directory, suffix)
    if len(_LAST) >= _MAX_LAST:
        _LAST.clear()
    _LAST[last_key] = (list(metas), list(ids))  # copies: the caller may change either list
    return ids


def _listed_ids(metas: list, directory: str, suffix: str) -> list[int]:
    known = _LISTED.get((directory, suffix))
    if known is None:
        known = _LISTED.setdefault((directory, suffix), {})
    names = list(map(_KEY_OF, metas))
    try:
        ids = list(filter(_AN_ID, map(known.__getitem__, names)))
    except KeyError:  # names not seen yet (a new manifest since the last poll): parsed, then looked up
        if len(known) > _MAX_LISTED:
            known.clear()
        for name in set(names).difference(known):
            known[name] = parse_id(name, directory, suffix)
        try:
            ids = list(filter(_AN_ID, map(known.__getitem__, names)))
        except KeyError:  # another thread started the table again meanwhile
            ids = [i for name in names if (i := parse_id(name, directory, suffix)) is not None]
    ids.sort()
    return ids



def _etag_listed(metas: list, key: str) -> str | None:
    """The ETag of ``key`` among listed objects (None: not listed, or listed without one)."""
    for meta in reversed(metas):  # names of ids sort as the ids: the latest is listed last
        if meta.key == key:
            return meta.etag or None
    return None


class SequencedStore(Generic[V, S]):
    """One namespace of ``<dir><id:020><suffix>`` files written by the protocol of the module
    docstring (steps 1, 3 and 4; ``.manifest`` and ``.compactions`` share it). Subclasses bind
    the names, the codec and the "stored" value type."""

    namespace: str
    directory: str
    suffix: str
    boundary_key: str
    conflict: type[SequenceConflict]

    def __init__(self, store: ObjectStore, runtime: Runtime) -> None:
        self.store = store
        self.runtime = runtime
        #: This process has seen the boundary file exist (then its absence is fatal, RFC 004).
        self.boundary_seen = False
        #: The latest file :meth:`read_latest_listed` last read: (id, the ETag its GET returned,
        #: the value, its key). A later listing naming the same id with the same ETag names the
        #: same object, unchanged (a file is created once and never overwritten; a store's ETag
        #: changes on every put of new content): the value is returned without a GET.
        self._latest_read: tuple[int, str, S, str] | None = None

    async def read_boundary(self) -> tuple[int, str | None]:
        """This namespace's boundary and ETag. A boundary file seen earlier by this process and
        now missing raises :class:`BoundaryVanishedError` (GC never deletes it)."""
        value, etag = await read_boundary_versioned(self.store, self.runtime, self.boundary_key)
        if etag is None:
            if self.boundary_seen:
                self.runtime.event("boundary_vanished", ns=self.namespace)
                raise BoundaryVanishedError(f"{self.boundary_key} existed and is gone: GC never deletes boundary files")
        else:
            self.boundary_seen = True
        return value, etag

    async def advance_boundary(self, desired: int) -> int:
        """GC: make the durable boundary at least ``desired`` (RFC 004 "Advancing Boundaries"):
        monotonic, by create-if-absent or update-if-match on the ETag just read, retried until
        the boundary read back is ``>= desired``. Returns the boundary now in force."""
        assert 0 <= desired < 2**64, desired
        settle = _bug_put_trusted if switches.BOUNDARY_PUT_TRUSTED in self.runtime.bugs else _settle_by_reading
        while True:
            current, etag = await self.read_boundary()
            if desired <= current:
                return current
            mode = CREATE_IF_ABSENT if etag is None else PutMode.update_if_match(etag)
            data = str(desired).encode("ascii")
            try:
                await self.store.put(self.boundary_key, data, mode)
            except (ObjectAlreadyExistsError, PreconditionFailedError, ObjectNotFoundError):
                self.runtime.probe(probes.BOUNDARY_PUT_RACED)
                continue  # a concurrent GC moved it (or we lost an ambiguous race): read again
            except TransientObjectStoreError:
                self.runtime.probe(probes.BOUNDARY_PUT_AMBIGUOUS)
                if not await settle(self.runtime):
                    continue  # may or may not have applied: the next read tells
            self.boundary_seen = True
            self.runtime.event("boundary_advance", ns=self.namespace, boundary=desired, previous=current)
            return desired

    # -- bound by subclasses ----------------------------------------------------------------

    def encode(self, value: V) -> bytes:
        raise NotImplementedError

    def decode(self, data: bytes, key: str) -> V:
        raise NotImplementedError

    def stored(self, file_id: int, value: V) -> S:
        raise NotImplementedError

    def event_fields(self, value: V) -> dict:
        """Extra fields of the ``create`` event (e.g. the epoch the file carries)."""
        return {}

    # -- the protocol -----------------------------------------------------------------------

    def key(self, file_id: int) -> str:
        return sequenced_key(self.directory, file_id, self.suffix)

    async def list_ids(self) -> list[int]:
        return listed_ids(await self._list(), self.directory, self.suffix)

    def _list(self) -> Awaitable[list]:
        return retry_transient(self.runtime, lambda: self.store.list(self.directory), what=f"list {self.directory}")

    async def read(self, file_id: int) -> S:
        return (await self._read_tagged(file_id))[0]

    async def _read_tagged(self, file_id: int) -> tuple[S, str]:
        """:meth:`read` and the ETag the GET returned with the bytes."""
        key = self.key(file_id)
        got = await retry_transient(self.runtime, lambda: self.store.get(key), what=f"get {key}")
        return self.stored(file_id, self.decode(bytes(got.data), key)), got.meta.etag

    async def read_latest(self) -> S | None:
        """The file with the highest id, or None when there is none yet.

        A file listed but gone when read was deleted by GC after a newer one appeared: list again.
        """
        return (await self.read_latest_listed())[0]

    async def read_latest_listed(self) -> tuple[S | None, list[int]]:
        """:meth:`read_latest` and the ids of the listing it read the latest from (ascending).

        The latest file is read with a GET unless this store read it before and the listing
        shows it unchanged (the same id and ETag, :attr:`_latest_read`): a poll of an idle
        database is then one LIST, not a LIST and a GET of the same bytes (sequenced-metadata.md
        "Reading the latest file"). The value returned is the one stored when the listing was
        taken, as a GET right after it would have read."""
        while True:
            metas = await self._list()
            metas = metas if type(metas) is list else list(metas)
            ids = listed_ids(metas, self.directory, self.suffix)
            if not ids:
                return None, ids
            latest = ids[-1]
            known = self._latest_read
            if known is not None and known[0] == latest and _etag_listed(metas, known[3]) == known[1]:
                return known[2], ids
            try:
                stored, etag = await self._read_tagged(latest)
            except ObjectNotFoundError:
                continue
            if etag:
                self._latest_read = (latest, etag, stored, self.key(latest))
            return stored, ids

    async def read_latest_required(self) -> S:
        """:meth:`read_latest` of a namespace that must exist (a database is open on it). None
        means it was deleted under us: a missing bucket raises
        :class:`~slatedb.errors.BucketNotFoundError` (:meth:`ObjectStore.check_root`), anything
        else an :class:`~slatedb.errors.InvalidDbStateError` naming the directory: the database
        was destroyed (or deleted) while open -- no stored object is damaged, so not a
        ``CorruptionError`` (destroy seed 263: a writer fenced by a soft destroy, stalled, polled
        after GC had removed the database); never an assert."""
        latest = await self.read_latest()
        if latest is not None:
            return latest
        await retry_transient(self.runtime, self.store.check_root, what="check the store root")
        raise InvalidDbStateError(f"no {self.namespace} file left under {shown_url(self.store.url)}/{self.directory}: the "
                                  "database was destroyed or deleted while open")

    async def try_write(self, file_id: int, value: V, *, edit: str | None = None) -> S:
        """Create ``file_id`` and check the boundary; raise :attr:`conflict` when the id was
        taken, :class:`ObjectVersionBehindBoundaryError` when behind the boundary. ``edit`` (the
        edit's kind) is recorded in the ``create`` and ``commit`` events."""
        key = self.key(file_id)
        extra = self.event_fields(value)
        if edit is not None:
            extra["edit"] = edit
        created, etag = await create_if_absent_tagged(self.store, self.runtime, key, self.encode(value),
                                                      gone_is_taken=True)
        if created is None:  # taken, maybe by our own attempt, and gone since (sequenced-metadata.md step 3)
            self.runtime.event("create", path=key, outcome="gone", **extra)
            await self._gone_outcome(file_id, key)
        if not created:
            self.runtime.event("create", path=key, outcome="exists", **extra)
            raise self.conflict(key)
        self.runtime.event("create", path=key, outcome="ok", **extra)
        check = _bug_no_boundary_check if switches.NO_BOUNDARY_CHECK in self.runtime.bugs else self._check_boundary
        await check(file_id)
        self.runtime.event("commit", ns=self.namespace, id=file_id, **self._edit_field(edit))
        stored = self.stored(file_id, value)
        if etag:  # our own file, as a later poll listing it unchanged finds it (no GET of what we wrote)
            self._latest_read = (file_id, etag, stored, key)
        return stored

    async def _gone_outcome(self, file_id: int, key: str) -> None:
        """Our ambiguous create of ``file_id`` found it taken, then gone: behind the boundary (a
        GC freed it after others built on it), it may have been ours and landed, as a create
        the boundary check refuses (step 5: the caller re-applies its edit, which looks for its
        own change first); otherwise (a destroyer deleted it) a conflict (step 1)."""
        boundary, _etag = await self.read_boundary()
        self.runtime.event("boundary_read", ns=self.namespace, boundary=boundary)
        if file_id <= boundary:
            raise ObjectVersionBehindBoundaryError(self.namespace, file_id, boundary)
        raise self.conflict(key)

    async def _check_boundary(self, file_id: int) -> None:
        """RFC 004 "Checking Boundaries After Writes": a create that succeeded counts only if GC's
        boundary is still below it; else :class:`ObjectVersionBehindBoundaryError`."""
        boundary, _etag = await self.read_boundary()
        self.runtime.event("boundary_read", ns=self.namespace, boundary=boundary)
        if file_id <= boundary:
            self.runtime.probe(probes.SEQMETA_BEHIND_BOUNDARY)
            await self._check_boundary_below_latest(boundary, file_id)
            raise ObjectVersionBehindBoundaryError(self.namespace, file_id, boundary)

    @staticmethod
    def _edit_field(edit: str | None) -> dict:
        return {} if edit is None else {"edit": edit}


    async def _check_boundary_below_latest(self, boundary: int, created_id: int) -> None:
        """The corrupt boundary rule (spec/protocols/sequenced-metadata.md): GC sets the boundary below the latest file it listed and never deletes
        the latest, so some file above the boundary always exists. A create that landed behind
        the boundary lists again (after the boundary read): finding no id above it means the
        boundary file is corrupt. Raised at once instead of climbing one id per round up to it."""
        ids = await self.list_ids()
        latest = ids[-1] if ids else 0
        if latest <= boundary:
            self.runtime.event("boundary_corrupt", ns=self.namespace, boundary=boundary, latest=latest)
            raise CorruptionError(
                self.boundary_key, None,
                f"GC boundary {boundary} is at or above the latest {self.namespace} {latest} (just created "
                f"{self.namespace} {created_id}); GC only sets it below an existing file, so the file was "
                f"damaged or written by hand. Fix or delete it once no writer, compactor or GC is running")


class ManifestStore(SequencedStore[ManifestV2, StoredManifest]):
    """The manifest namespace of one database root, seen by one process (``runtime``)."""

    namespace = "manifest"
    directory = MANIFEST_DIR
    suffix = MANIFEST_SUFFIX
    boundary_key = MANIFEST_BOUNDARY_KEY
    conflict = ManifestConflict
    #: The id of the last manifest :meth:`commit` checked (:func:`check_manifest`).
    _checked_id: int | None = None

    async def _destroyed_under_commit(self, created_id: int) -> None:
        """A boundary file this process saw is gone after our create of ``created_id`` landed. A
        destroyer deletes it with everything else (destroy.md H4/S5), so on a database now
        destroyed or removed this is no tampered store: ``InvalidDbStateError`` (a reader's close
        releasing its checkpoint, destroy seed 435). Returns when the database is live (the
        ``BoundaryVanishedError`` stands).

        The latest manifest may be our own create, unmarked: it landed after the destroy removed
        the database, on the emptied root (destroy seed 1880: a GC's ``ExpireCheckpoints`` decided
        before a hard destroy). The boundary file gone, our base ``created_id - 1`` gone and no
        other manifest listed is the proof (DESTROY-7): the manifest is deleted again before the
        error, so that no lone manifest naming deleted objects outlives the database."""
        latest, listed = await self.read_latest_listed()
        if latest is not None and latest.id == created_id and listed == [created_id] and not latest.manifest.destroyed_at_s:
            self.runtime.probe(probes.MANIFEST_CREATE_OUTLIVED_DESTROY)
            self.runtime.event("manifest_create_outlived_destroy", manifest=created_id)
            if switches.MANIFEST_KEPT_AFTER_DESTROY not in self.runtime.bugs:  # catalogued bug
                key = self.key(created_id)
                await retry_transient(self.runtime, lambda: self.store.delete(key), what=f"delete {key}")
                self.runtime.event("delete", path=key, why="commit outlived destroy")
                latest = None
        if latest is None or latest.manifest.destroyed_at_s:
            what = "removed" if latest is None else f"destroyed (manifest {latest.id})"
            raise InvalidDbStateError(f"the database at {shown_url(self.store.url)} was {what} under this commit: "
                                      f"its GC boundary file went with it")

    def encode(self, value: ManifestV2) -> bytes:
        return encode_manifest(value)

    def decode(self, data: bytes, key: str) -> ManifestV2:
        return decode_manifest_v2(data, key)

    def stored(self, file_id: int, value: ManifestV2) -> StoredManifest:
        return StoredManifest(file_id, value)

    async def create_initial(self, manifest: ManifestV2, first_id: int = 1) -> StoredManifest | None:
        """Write manifest ``first_id`` (1 but for ``Db.open(create="force")``) of a new database;
        None when another process created it first.

        Also None when the create landed but GC's boundary had already passed the id when we read
        it (RFC 004's false negative: our boundary read stalled while other processes opened
        the database, wrote newer manifests and GC collected it): the database exists, and
        the caller goes on from the latest manifest (db seed 2077). A boundary above every
        manifest is corruption and raises (the corrupt boundary rule)."""
        try:
            return await self.try_write(first_id, manifest)
        except (ManifestConflict, ObjectVersionBehindBoundaryError):
            return None

    def commit_unchanged(self, edit: Edit[R], current: StoredManifest) -> Committed[R] | None:
        """What :meth:`commit` of ``edit`` on ``current`` returns when its first attempt writes
        nothing (``Committed(current, result, written=False)``), found without awaiting: the same
        check of ``current``, clock reading and :func:`apply_edit` (nothing runs in between).
        None when that attempt would write, list the WAL or refuse: then :meth:`commit` does it
        (GC's checkpoint expiry, whose commit runs shielded, writes nothing in most passes)."""
        if edit.lists_wal:
            return None
        try:
            if current.id != self._checked_id:
                check_manifest(current.manifest, current.id)
                self._checked_id = current.id
            change = apply_edit(current.manifest, edit, Attempt(base_id=current.id, now_ms=self.runtime.now_ms()))
        except SlateDBError:  # refused (malformed, fenced, destroyed): commit() meets it again
            return None
        if change.manifest is not None:
            return None
        return Committed(current, change.result, written=False)

    async def commit(
        self,
        edit: Edit[R],
        *,
        current: StoredManifest | None = None,
        list_wal: Callable[[], Awaitable[list[int]]] | None = None,
        prepared: Callable[[StoredManifest, ManifestV2], Awaitable[Any]] | None = None,
    ) -> Committed[R]:
        """The one way to change a manifest: apply ``edit`` to the latest manifest
        (:func:`~slatedb.manifest.edit.apply_edit`) and commit the result as the next id; on a
        lost race or a boundary check, re-apply the same edit to a fresh read (its
        already-applied detection recognises an attempt that landed although reported failed).

        ``current``: a guess of the latest (saves a read when right; a wrong guess costs a
        conflict). ``list_wal``: lists the WAL after each read, for edits with ``lists_wal``.
        ``prepared``: awaited between the apply and the create (a simulation or test stalls
        there: RFC 004's stalled writer). The edit's guards and preconditions raise (e.g.
        :class:`~slatedb.errors.FencedError`) and abort the commit.
        """
        retried = maybe_landed = False
        prior: object = None
        while True:
            if current is None:
                current = await self.read_latest()
                if current is None:  # never created, or destroyed and removed by GC (destroy seed 99)
                    raise InvalidDbStateError(f"no database at {shown_url(self.store.url)} (no manifest: never created, "
                                              "or destroyed and removed)")
            if current.id != self._checked_id:  # never build on a malformed manifest (sequenced-metadata.md)
                check_manifest(current.manifest, current.id)
                self._checked_id = current.id
            wal_ids = None
            if edit.lists_wal:
                assert list_wal is not None, f"{edit.kind} lists the WAL: pass list_wal"
                wal_ids = tuple(await list_wal())
            attempt = Attempt(base_id=current.id, now_ms=self.runtime.now_ms(), retried=retried,
                              maybe_landed=maybe_landed, prior=prior, wal_ids=wal_ids)
            try:
                change = apply_edit(current.manifest, edit, attempt)
            except (FencedError, InvalidDbStateError) as e:
                if isinstance(e, FencedError):
                    self.runtime.probe(probes.MANIFEST_EDIT_GUARD_FENCED)
                if maybe_landed and edit.unsure_refusals:  # our first create may be in the history
                    raise CommitOutcomeUnknownError(f"{edit.kind} on manifest {current.id}", e) from e
                raise
            if change.manifest is None:
                if change.landed and maybe_landed:
                    self.runtime.probe(probes.MANIFEST_LANDED_REPORTED_FAILED)
                return Committed(current, change.result, written=False)
            if prepared is not None:
                await prepared(current, change.manifest)
            try:
                stored = await self.try_write(current.id + 1, change.manifest, edit=edit.kind)
                return Committed(stored, change.result, written=True)
            except BoundaryVanishedError:
                await self._destroyed_under_commit(current.id + 1)
                raise
            except ManifestConflict:
                self.runtime.probe(probes.MANIFEST_CONFLICT)
                current, retried = None, True  # another process took the id: ours did not land
            except ObjectVersionBehindBoundaryError:
                current, retried, maybe_landed, prior = None, True, True, change.result
