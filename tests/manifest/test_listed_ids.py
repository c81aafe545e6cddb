"""``listed_ids``: the ids of a directory listing are those ``parse_id`` gives, ascending, whether
the names were listed before (looked up) or not (parsed), and names that are no ids are left out."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.format.layout import COMPACTIONS_DIR, COMPACTIONS_SUFFIX, MANIFEST_DIR, MANIFEST_SUFFIX, parse_id
from slatedb.manifest import store as ms
from slatedb.objstore.base import ObjectMeta

_NAMES = st.one_of(
    st.integers(0, 2**64 + 5).map(lambda i: f"manifest/{i:020d}.manifest"),
    st.integers(0, 99).map(lambda i: f"compactions/{i:020d}.compactions"),
    st.sampled_from(["manifest/tmp", "manifest/00000000000000000001.manifest.tmp", "manifest/1.manifest",
                     "manifest/０0000000000000000001.manifest", "wal/00000000000000000001.sst"]),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(_NAMES, max_size=12), min_size=1, max_size=4))
def test_listed_ids_are_the_parsed_ids_ascending(listings: list[list[str]]) -> None:
    for names in listings + listings:  # the second time every name is known
        metas = [ObjectMeta(n, 1, 0, '"e"') for n in names]
        for directory, suffix in ((MANIFEST_DIR, MANIFEST_SUFFIX), (COMPACTIONS_DIR, COMPACTIONS_SUFFIX)):
            expected = sorted(i for n in names if (i := parse_id(n, directory, suffix)) is not None)
            assert ms.listed_ids(metas, directory, suffix) == expected


def test_a_full_table_of_known_names_starts_again() -> None:
    known = ms._LISTED.setdefault((MANIFEST_DIR, MANIFEST_SUFFIX), {})
    known.clear()
    saved, ms._MAX_LISTED = ms._MAX_LISTED, 3
    try:
        for i in range(10):
            metas = [ObjectMeta(f"manifest/{j:020d}.manifest", 1, 0, '"e"') for j in range(i, i + 3)]
            assert ms.listed_ids(metas, MANIFEST_DIR, MANIFEST_SUFFIX) == [i, i + 1, i + 2]
            assert len(known) <= 7
    finally:
        ms._MAX_LISTED = saved


def test_a_listing_of_the_same_objects_again_gets_the_same_ids() -> None:
    """The last listing's ids are reused only for the same (or equal) objects, and neither the
    caller's list nor the ids it got back are the memo's own."""
    first = ObjectMeta(f"manifest/{1:020d}.manifest", 1, 0, '"e"')
    metas = [first, ObjectMeta(f"manifest/{2:020d}.manifest", 1, 0, '"e"')]
    got = ms.listed_ids(metas, MANIFEST_DIR, MANIFEST_SUFFIX)
    assert got == [1, 2]
    got.append(99)  # the caller's to change
    assert ms.listed_ids(metas, MANIFEST_DIR, MANIFEST_SUFFIX) == [1, 2]
    metas[1] = ObjectMeta(f"manifest/{7:020d}.manifest", 1, 0, '"e"')  # same length, same first object
    assert ms.listed_ids(metas, MANIFEST_DIR, MANIFEST_SUFFIX) == [1, 7]
    assert ms.listed_ids(tuple(metas), MANIFEST_DIR, MANIFEST_SUFFIX) == [1, 7]


def test_a_growing_listing_keeps_one_entry() -> None:
    """Each poll of a directory that gained a file replaces the last listing's entry (the memo holds
    a copy of every listing it keeps: one per directory and first object, not one per length)."""
    ms._LAST.clear()
    metas = [ObjectMeta(f"compactions/{1:020d}.compactions", 1, 0, '"e"')]
    for i in range(2, 200):
        metas.append(ObjectMeta(f"compactions/{i:020d}.compactions", 1, 0, '"e"'))
        assert ms.listed_ids(metas, COMPACTIONS_DIR, COMPACTIONS_SUFFIX) == list(range(1, i + 1))
    assert len(ms._LAST) == 1
