"""A database path that is not UTF-8 text (Python's lone surrogates: what a non-UTF-8 file name
or command-line argument becomes) where the format needs UTF-8 is refused at the call with
``InvalidUrlError`` naming it, nothing written.

Found by trying such names: a clone (or projection) of a parent in a directory named ``par\\xff``
raised a bare ``UnicodeEncodeError`` from the manifest encoder, after it had started; opening
``s3://bucket/\\udcff`` raised one from botocore. (A local directory or memory store of such a
name is fine: its own database names no path; the file system takes the bytes.)
"""

from __future__ import annotations

import pytest
import trio

import slatedb
from slatedb import admin
from slatedb.errors import InvalidUrlError
from slatedb.objstore import resolve_store


def test_a_clone_of_a_parent_whose_path_is_not_utf8_is_refused(tmp_path) -> None:
    parent = f"file://{tmp_path}/par\udcff"
    with slatedb.Db.open(parent, {"compactor_options": None}) as db:  # a directory named b"par\xff"
        db.put(b"a", b"1")
    for make in (lambda: admin.create_clone(f"file://{tmp_path}/clone", parent),
                 lambda: admin.project(f"file://{tmp_path}/clone", parent, "a..b")):
        with pytest.raises(InvalidUrlError, match="UTF-8") as info:
            trio.run(make)
        assert "par" in str(info.value)
        assert not (tmp_path / "clone").exists()
    assert trio.run(admin.list_checkpoints, resolve_store(parent)) == []  # no checkpoint left on it


def test_an_s3_path_that_is_not_utf8_is_refused_at_the_open() -> None:
    with pytest.raises(InvalidUrlError, match="UTF-8"):
        resolve_store("s3://bucket/db\udcff", env={})
