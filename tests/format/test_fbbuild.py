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
from slatedb.format import fbbuild, fbcodec, memo
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


# -- parts spliced in again (fbbuild.build_cached, on within a simulated run) -------------------


def _mixed(data, values: list, fields: tuple[str, ...]) -> list:  # noqa: ANN001
    """Values like ``values`` whose ``fields`` are drawn from every value's parts (the same
    objects, in other orders and positions: what successive manifests share)."""
    out = []
    for _ in range(4):
        base = data.draw(st.sampled_from(values))
        changes = {}
        for name in fields:
            pool = [p for v in values for p in getattr(v, name)]
            picked = data.draw(st.lists(st.sampled_from(pool), max_size=5) if pool else st.just([]))
            changes[name] = tuple(picked)
        out.append(attrs.evolve(base, **changes))
    return out


def _spliced_equals_stock(encode, values: list, fields: tuple[str, ...]) -> None:  # noqa: ANN001

    spliced = 0
    real_splice = fbbuild._splice

    def counting(*args):  # noqa: ANN002, ANN202
        nonlocal spliced
        spliced += 1
        return real_splice(*args)

    fbbuild._splice = counting
    try:
        with memo.remembering():
            fast = [encode(v) for v in values + values]  # the second pass splices every part in
    finally:
        fbbuild._splice = real_splice
    with _stock_builder():
        stock = [encode(v) for v in values + values]
    assert fast == stock
    if any(getattr(v, name) for v in values for name in fields):
        assert spliced, "no part was spliced in: the test tests nothing"


@settings(max_examples=10, deadline=None)
@given(st.lists(manifests_v2, min_size=1, max_size=3), st.data())
def test_manifests_with_spliced_parts_are_the_stock_builders_bytes(ms: list[t.ManifestV2], data) -> None:
    fields = ("ssts", "l0", "compacted", "checkpoints", "external_dbs")
    _spliced_equals_stock(mf.encode_manifest, _mixed(data, ms, fields), fields)


@settings(max_examples=10, deadline=None)
@given(st.lists(compactions_values, min_size=1, max_size=3), st.data())
def test_compactions_with_spliced_parts_are_the_stock_builders_bytes(cs: list[t.CompactionsV1], data) -> None:
    _spliced_equals_stock(cf.encode_compactions, _mixed(data, cs, ("recent_compactions",)), ("recent_compactions",))
