"""for_each on the CPU: ahead-of-time sm_90 builds for several item types, iterators and
operators that capture arrays or return a value (dropped); a golden, kernel parameters
against the cubin, the launch the host makes, and bad arguments named before anything is
compiled."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack, check_golden, check_kernel_params, render_source
from cuprims import CountingIterator, OpKind, ProxyArray as P, ZipIterator
from cuprims._runtime import driver
from cuprims.algorithms.for_each import api as fe
from cuprims.errors import ArgumentError

i4, i8, f4 = np.int32, np.int64, np.float32


def _scatter_op():
    out, perm, x = P(f4), P(i4), P(f4)

    def scatter(i):
        out[perm[i]] = x[i] * 2

    return scatter


def _make(**over):
    kw = dict(d_in=CountingIterator(i4(0)), op=_scatter_op(), compute_capability=90)
    kw.update(over)
    return cuprims.make_for_each(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("for_each_counting_i4_scatter_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] == 256 and meta["items"] == 8     # 32 bytes of int32 a thread
    assert obj.desc.op.state_size > 0 and obj._builds.source(90).extern_symbols


@pytest.mark.parametrize("dtype", [np.int8, np.uint64, np.float16, np.float64, np.complex128, np.bool_])
def test_builds_for_item_types(shared_cache, dtype):
    flags = P(np.uint8)

    def touch(v):
        flags[0] = 1

    obj = _make(d_in=P(dtype), op=touch)
    check_kernel_params(obj, 90)
    assert obj._builds.result(90).meta["items"] == max(1, min(8, 32 // np.dtype(dtype).itemsize))


def test_an_operator_returning_a_value_has_it_dropped(shared_cache):
    seen = P(i8)

    def add_and_return(v):
        cuda.atomic.add(seen, 0, v)
        return v * 2

    obj = _make(d_in=P(i8), op=add_and_return)
    assert obj.cubin(90)[:4] == b"\x7fELF"


def test_zip_input(shared_cache):
    out = P(f4)

    def put(pair):
        out[pair[0]] = pair[1]

    obj = _make(d_in=ZipIterator(CountingIterator(i4(0)), P(f4)), op=put)
    check_kernel_params(obj, 90)


@pytest.mark.parametrize("kw, argument", [
    (dict(op=None), "op"),
    (dict(op=OpKind.PLUS), "op"),
    (dict(op=OpKind.IDENTITY), "op"),
    (dict(d_in=np.zeros(3, f4)), "d_in"),
])
def test_bad_build_arguments_are_named(shared_cache, kw, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**kw)
    assert info.value.argument == argument


@pytest.mark.parametrize("n", [0, 1, 2047, 2048, 2049, 5 * 2048 + 3])
def test_one_launch_covering_every_item(monkeypatch, shared_cache, n):
    mem = FakeMemory()
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    launches = []
    monkeypatch.setattr(driver, "launch", lambda kernel, grid, block, stream, params, shared=0:
                        launches.append((kernel, grid, block, params)))
    flags = FakeArray(mem, np.zeros(1, np.uint8))

    def touch(v):
        flags[0] = 1

    obj = _make(d_in=P(i4), op=touch)
    meta = obj._builds.result(90).meta
    plan = fe._Plan(SimpleNamespace(meta=meta, handles=("kernel",)))
    plan.device = 0
    obj._plans[0] = plan
    x = FakeArray(mem, np.zeros(max(n, 1), i4))
    assert obj(temp_storage=None, d_in=x, num_items=n, op=touch) == 1
    obj(temp_storage=FakeArray(mem, np.zeros(1, np.uint8)), d_in=x, num_items=n, op=touch)
    tile = meta["threads"] * meta["items"]
    if n == 0:
        assert launches == []
    else:
        ((kernel, grid, block, params),) = launches
        assert (kernel, block) == ("kernel", meta["threads"]) and grid == params[-1] == -(-n // tile)
        assert params[0] == x.ptr and params[2] == n
