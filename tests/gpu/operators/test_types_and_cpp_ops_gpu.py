"""Programs as a cuda.compute user writes them: CuPy arrays, element types from
``cuprims.types``, operators written in C++ and compiled by ``RawOp.from_cpp`` for the
current device; results against numpy. tests/cpu/operators/test_cpp_ops.py and
test_type_objects.py build the same kinds of programs for sm_90 with no GPU."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cuprims
from cuprims import types
from cuprims.op import RawOp

cp = pytest.importorskip("cupy")

MAX_SOURCE = """
extern "C" __device__ void max_op(void* a, void* b, void* out) {
    const int x = *static_cast<int*>(a), y = *static_cast<int*>(b);
    *static_cast<int*>(out) = x > y ? x : y;
}
"""
SQUARE_SOURCE = """
#include <cuda/std/cstdint>
extern "C" __device__ void square_op(void* in, void* out) {
    const int32_t v = *static_cast<int32_t*>(in);
    *static_cast<int32_t*>(out) = v * v;
}
"""
CLAMP_SOURCE = """
extern "C" __device__ void clamp_op(void* in, void* out) {
    *static_cast<float*>(out) = fminf(fmaxf(*static_cast<float*>(in), 0.0f), 1.0f);
}
"""
ADD_SOURCE = """
extern "C" __device__ void add_op(void* a, void* b, void* out) {
    *static_cast<long long*>(out) = *static_cast<long long*>(a) + *static_cast<long long*>(b);
}
"""
HEAVIER_SOURCE = """
struct Pair { int key; float weight; };
extern "C" __device__ void heavier_op(void* a, void* b, void* out) {
    const Pair& x = *static_cast<Pair*>(a);
    const Pair& y = *static_cast<Pair*>(b);
    *static_cast<Pair*>(out) = x.weight >= y.weight ? x : y;
}
"""
EVEN_COUNTED_SOURCE = """
extern "C" __device__ void even_counted(void* state, void* in, void* result) {
    int* counter = *static_cast<int**>(state);
    const bool even = *static_cast<int*>(in) % 2 == 0;
    if (even) atomicAdd(counter, 1);
    *static_cast<unsigned char*>(result) = even;
}
"""


def test_reduce_by_a_cpp_operator():
    h = np.random.default_rng(1).integers(-10**6, 10**6, 100_003).astype(np.int32)
    d_in, d_out = cp.asarray(h), cp.empty(1, dtype=np.int32)
    h_init = np.array([np.iinfo(np.int32).min], dtype=np.int32)
    cuprims.reduce_into(d_in=d_in, d_out=d_out, op=RawOp.from_cpp(MAX_SOURCE, "max_op"), num_items=h.size,
                        h_init=h_init)
    assert int(d_out.get()[0]) == h.max()


def test_transform_iterator_by_a_raw_op_with_a_type_object():
    h = np.random.default_rng(2).integers(-1000, 1000, 50_000).astype(np.int32)
    square = RawOp.from_cpp(SQUARE_SOURCE, "square_op")
    it = cuprims.TransformIterator(cp.asarray(h), square, value_type=types.int32)
    d_out = cp.empty(1, dtype=types.int64.dtype)
    cuprims.reduce_into(d_in=it, d_out=d_out, op=cuprims.OpKind.PLUS, num_items=h.size, h_init=np.int64(0))
    assert int(d_out.get()[0]) == int((h.astype(np.int64) ** 2).sum())


def test_unary_transform_by_a_cpp_operator():
    h = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    d_in, d_out = cp.asarray(h), cp.empty(h.size, dtype=types.float32.dtype)
    cuprims.unary_transform(d_in=d_in, d_out=d_out, op=RawOp.from_cpp(CLAMP_SOURCE, "clamp_op"), num_items=h.size)
    np.testing.assert_array_equal(d_out.get(), np.clip(h, 0, 1))


def test_inclusive_scan_by_a_cpp_operator():
    h = np.random.default_rng(4).integers(-100, 100, 30_000).astype(np.int64)
    d_in, d_out = cp.asarray(h), cp.empty(h.size, dtype=types.int64.dtype)
    cuprims.inclusive_scan(d_in=d_in, d_out=d_out, op=RawOp.from_cpp(ADD_SOURCE, "add_op"), num_items=h.size)
    np.testing.assert_array_equal(d_out.get(), np.cumsum(h))


def test_struct_type_reduce_by_a_cpp_operator():
    Pair = types.struct({"key": types.int32, "weight": types.float32}, name="Pair")
    n = 20_000
    h = np.zeros(n, dtype=Pair.dtype)
    h["key"] = np.arange(n)
    h["weight"] = np.random.default_rng(5).permutation(n).astype(np.float32)   # one heaviest
    d_out = cp.empty(1, dtype=Pair.dtype)
    cuprims.reduce_into(d_in=cp.asarray(h), d_out=d_out, op=RawOp.from_cpp(HEAVIER_SOURCE, "heavier_op"),
                        num_items=n, h_init=np.void((-1, -np.inf), dtype=Pair.dtype))
    got = d_out.get()[0]
    assert got["key"] == h["key"][h["weight"].argmax()] and got["weight"] == n - 1


def test_select_by_a_stateful_cpp_predicate():
    d_counter = cp.zeros(1, dtype=types.int32.dtype)
    state = struct.pack("P", d_counter.data.ptr)
    cond = RawOp.from_cpp(EVEN_COUNTED_SOURCE, "even_counted", state=state,
                          state_alignment=np.dtype(np.intp).alignment)
    h = np.arange(1000, dtype=np.int32)
    d_out, d_count = cp.empty_like(cp.asarray(h)), cp.empty(1, dtype=types.int32.dtype)
    cuprims.select(d_in=cp.asarray(h), d_out=d_out, d_num_selected_out=d_count, cond=cond, num_items=h.size)
    count = int(d_count.get()[0])
    assert count == 500 and int(d_counter.get()[0]) == 500
    np.testing.assert_array_equal(d_out.get()[:count], h[h % 2 == 0])


def test_block_reduce_by_a_cpp_operator():
    pytest.importorskip("numba")
    from numba import cuda

    from cuprims import coop

    block_max = coop.block.make_reduce(types.int32, 128, RawOp.from_cpp(MAX_SOURCE, "max_op"))

    @cuda.jit(link=block_max.files)
    def kernel(x, out):
        m = block_max(x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = m

    h = np.random.default_rng(6).integers(-10**6, 10**6, 128).astype(np.int32)
    out = cuda.device_array(1, np.int32)
    kernel[1, 128](cuda.to_device(h), out)
    assert out.copy_to_host()[0] == h.max()
