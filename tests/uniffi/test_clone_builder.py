"""slatedb.uniffi CloneBuilder's bad input, refused at the call (the results of good input are
compared with the official wheel's by tests/interop/uniffi_programs/clone.py)."""

from __future__ import annotations

import asyncio

import pytest

import slatedb.uniffi as u


def _kr(a, b):
    return u.KeyRange(start=a, start_inclusive=True, end=b, end_inclusive=False)


def test_bad_sources_and_ranges_are_refused_at_the_call(tmp_path) -> None:
    store = u.ObjectStoreBuilder.from_url("file://" + str(tmp_path)).build()
    admin = u.AdminBuilder("clone", store).build()
    with pytest.raises(TypeError, match="CloneSourceSpec"):
        admin.create_clone_builder_from_source("src")
    with pytest.raises(u.Error.Invalid, match="invalid key range"):
        admin.create_clone_builder_from_source(u.CloneSourceSpec(path="src", checkpoint=None,
                                                                 projection_range=_kr(b"m", b"a")))
    b = admin.create_clone_builder_from_source(u.CloneSourceSpec(path="src", checkpoint=None,
                                                                 projection_range=_kr(b"a", b"c")))
    with pytest.raises(u.Error.Invalid, match="with_seed"):
        b.with_seed(1)
    b.with_projection_range(_kr(b"x", None))  # disjoint from the source's range: nothing to clone
    with pytest.raises(u.Error.Invalid, match="empty"):
        asyncio.run(b.build())
    assert not (tmp_path / "clone").exists()
