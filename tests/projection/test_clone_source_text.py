"""``str(CloneSource)`` reads back through ``parse_clone_source`` as the same source, or the
source is refused at construction. Before: a key holding ``:`` (``KeyRange(b"user:1", None)``)
was written raw, so the range was read from after that ``:`` (``url:user`` and ``1..``); a URL
whose path holds ``:`` before ``..`` (``file:///d/v:1..2``) read back as a URL and a range, one
whose last segment holds ``@`` (``file:///d/a@b``) did not parse at all, and one ending in
``@`` and a UUID read back with a checkpoint it did not have."""

from __future__ import annotations

import uuid

import pytest

from slatedb.errors import InvalidArgumentError
from slatedb.objstore.url import resolve_store
from slatedb.projection.create import CloneSource, parse_clone_source
from slatedb.projection.ranges import KeyRange

CP = uuid.UUID("01740ee5-6459-44af-9a45-85deb6e468e3")


@pytest.mark.parametrize("source", [
    CloneSource("file:///d/db", None, KeyRange(b"user:1", None)),
    CloneSource("file:///d/db", CP, KeyRange(b"a:b", b"a:c")),
    CloneSource("memory://m/x", None, KeyRange(None, b":")),
    CloneSource("file:///d/a:b", None, KeyRange(b"a", b"m")),  # a ':' with no '..' after it
    CloneSource("file:///d/a:b"),
    CloneSource("file:///d/a@b", CP),  # the checkpoint's '@' is the last one
    CloneSource("s3://b/p?endpoint_url=http://h:9000", CP, KeyRange(None, b"m")),
    CloneSource("file:///d/v%3A1..2", CP),
    CloneSource("file:///d/a%40b"),
    CloneSource("file:///d/db", f"urn:uuid:{CP}"),  # a checkpoint given with ':' is a UUID
])
def test_the_text_of_a_source_reads_back_as_the_same_source(source) -> None:
    assert parse_clone_source(str(source)) == source


@pytest.mark.parametrize("args", [
    ("file:///d/v:1..2",),
    ("file:///d/v:1..2", CP),
    ("file:///d/a@b",),
    (f"file:///d/a@{CP}",),
    ("db", None, KeyRange(b"a", None)),  # no '/': the range's ':' is not read as one
    ("",),
    (None,),
])
def test_a_source_whose_text_would_read_back_otherwise_is_refused_at_construction(args) -> None:
    with pytest.raises(InvalidArgumentError, match="source URL .* cannot be written|non-empty string"):
        CloneSource(*args)


def test_the_percent_encoded_url_the_refusal_asks_for_names_the_same_directory(tmp_path) -> None:
    with pytest.raises(InvalidArgumentError, match="%3A or %40"):
        CloneSource(f"file://{tmp_path}/a@b")
    encoded = CloneSource(f"file://{tmp_path}/a%40b")
    assert resolve_store(encoded.url).root == str(tmp_path / "a@b")
    assert resolve_store(CloneSource(f"file://{tmp_path}/v%3A1..2").url).root == str(tmp_path / "v:1..2")
