"""FastBuilder writes the stock ``flatbuffers.Builder``'s bytes: every encoder that uses it is run
with both builders on random values and the outputs compared byte for byte."""

from __future__ import annotations

import contextlib
from typing import Iterator

import attrs
import flatbuffers
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slatedb.format import compactions as cf
from slatedb.format import fbcodec
from slatedb.format import manifest as mf
from slatedb.format import types as t
from slatedb.format.fbbuild import FastBuilder

from .test_compactions_codec import compactions_values
from .test_fbcodec import sst_infos
from .test_manifest_codec import manifests_v1, manifests_v2, u64

_MODULES = (mf, cf, fbcodec)
_FEW = settings(max_examples=20, deadline=None)


@contextlib.contextmanager
def _stock_builder() -> Iterator[None]:
    saved = [(m, m._Builder) for m in _MODULES]
    for m in _MODULES:
        m._Builder = flatbuffers.Builder
    try:
        yield
    finally:
        for m, builder in saved:
            m._Builder = builder


def _both(encode, *args) -> tuple[bytes, bytes]:  # noqa: ANN001
    assert all(m._Builder is FastBuilder for m in _MODULES)
    fast = encode(*args)
    with _stock_builder():
        stock = encode(*args)
    return fast, stock


@_FEW
@given(manifests_v2, u64 | st.just(0))
def test_manifests_v2_are_the_stock_builders_bytes(m: t.ManifestV2, destroyed_at_s: int) -> None:
    fast, stock = _both(mf.encode_manifest, attrs.evolve(m, destroyed_at_s=destroyed_at_s))
    assert fast == stock


@_FEW
@given(manifests_v1)
def test_manifests_v1_are_the_stock_builders_bytes(m: t.ManifestV1) -> None:
    fast, stock = _both(mf.encode_manifest_v1, m)
    assert fast == stock


@_FEW
@given(compactions_values, st.sampled_from([cf.COMPACTIONS_VERSION_V1, cf.COMPACTIONS_VERSION_V2]))
def test_compactions_are_the_stock_builders_bytes(c: t.CompactionsV1, version: int) -> None:
    try:
        fast, stock = _both(cf.encode_compactions, c, version)
    except Exception as e:  # noqa: BLE001 - a value version 1 cannot carry: both refuse it alike
        with _stock_builder(), pytest.raises(type(e)):
            cf.encode_compactions(c, version)
        return
    assert fast == stock


@_FEW
@given(sst_infos)
def test_sst_infos_are_the_stock_builders_bytes(info: t.SsTableInfo) -> None:
    fast, stock = _both(fbcodec.encode_sst_info, info)
    assert fast == stock


def test_a_value_out_of_range_raises_the_stock_builders_error() -> None:
    m = t.ManifestV2(writer_epoch=2**64)
    with pytest.raises(TypeError) as fast:
        mf.encode_manifest(m)
    with _stock_builder(), pytest.raises(TypeError) as stock:
        mf.encode_manifest(m)
    assert str(fast.value) == str(stock.value)


def test_a_buffer_that_grows_and_shared_vtables() -> None:
    """A tiny initial buffer (many doublings) and many tables of one shape (vtable sharing)."""
    for builder in (FastBuilder, flatbuffers.Builder):
        b = builder(1)
        offs = []
        for i in range(40):
            s = b.CreateString("k" * i)
            b.StartObject(3)
            b.PrependUint64Slot(0, i * 7919, 0)
            b.PrependUOffsetTRelativeSlot(1, s, 0)
            b.PrependBoolSlot(2, bool(i % 2), False)
            offs.append(b.EndObject())
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        vec = b.EndVector()
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, vec, 0)
        b.Finish(b.EndObject())
        if builder is FastBuilder:
            fast = bytes(b.Output())
        else:
            assert bytes(b.Output()) == fast
