"""adjacent_difference on the GPU against numpy's diff: every integer and float dtype, both
directions, sizes around a tile (2048 float32 items, 4096 int16, ...), in place and into
another array, a Python operator capturing a device array, iterator input, struct items,
the object API on a stream."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import CountingIterator, OpKind  # noqa: E402
from side_streams import side_stream  # noqa: E402

DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32,
          np.float64]


def reference(x: np.ndarray, left: bool) -> np.ndarray:
    """numpy's differences, the item without a neighbour copied (wrapping as C++ does)."""
    out = x.copy()
    if x.size > 1:
        if left:
            out[1:] = x[1:] - x[:-1]
        else:
            out[:-1] = x[:-1] - x[1:]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("direction", ["left", "right"])
@pytest.mark.parametrize("in_place", [False, True])
def test_against_numpy(dtype, direction, in_place):
    rng = np.random.default_rng(3)
    for n in (0, 1, 2047, 2048, 2049, 3 * 4096 + 5, (1 << 20) + 3):
        x = rng.integers(0, 100, n).astype(dtype)
        d_x = cp.asarray(x)
        d_y = d_x if in_place else cp.full(max(n, 1), 77, dtype)
        with np.errstate(over="ignore"):
            want = reference(x, direction == "left")
        cuprims.adjacent_difference(d_in=d_x, d_out=d_y, op=OpKind.MINUS, num_items=n, direction=direction)
        np.testing.assert_array_equal(d_y[:n].get(), want, err_msg=f"n={n}")


def test_object_api_on_a_stream_in_place_and_not():
    n = 5_000_003
    x = cp.arange(n, dtype=cp.float64) ** 2
    y = cp.empty_like(x)
    d = cuprims.make_adjacent_difference(d_in=x, d_out=y, op=OpKind.MINUS)
    stream = side_stream()
    tmp = cp.empty(d(temp_storage=None, d_in=x, d_out=y, num_items=n), np.uint8)
    d(temp_storage=tmp, d_in=x, d_out=y, num_items=n, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(y.get(), reference(x.get(), True))
    want = reference(x.get(), True)
    tmp = cp.empty(d(temp_storage=None, d_in=x, d_out=x, num_items=n), np.uint8)
    assert tmp.size == -(-n // 1024) * 8     # a neighbour per tile of 256 x 4 float64 items
    d(temp_storage=tmp, d_in=x, d_out=x, num_items=n, stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(x.get(), want)


def test_python_operator_capturing_an_array_and_iterator_input():
    scale = cp.asarray([3], np.int64)

    def weighted(a, b):
        return a * scale[0] - b

    n = 100_000
    y = cp.empty(n, np.int64)
    cuprims.adjacent_difference(d_in=CountingIterator(np.int64(10)), d_out=y, op=weighted, num_items=n)
    x = np.arange(10, 10 + n, dtype=np.int64)
    want = x.copy()
    want[1:] = x[1:] * 3 - x[:-1]
    np.testing.assert_array_equal(y.get(), want)


def test_struct_items_with_a_python_operator_in_the_right_direction():
    point = cuprims.gpu_struct({"x": np.float32, "y": np.float32})

    def step(a, b):
        return point(b.x - a.x, b.y - a.y)

    n = 10_000
    host = np.empty(n, point.dtype)
    host["x"], host["y"] = np.arange(n) * 0.5, np.arange(n) ** 2 % 97
    d_x = cp.asarray(host)
    d_y = cp.empty_like(d_x)
    cuprims.adjacent_difference(d_in=d_x, d_out=d_y, op=step, num_items=n, direction="right")
    got = d_y.get()
    np.testing.assert_array_equal(got["x"][:-1], host["x"][1:] - host["x"][:-1])
    np.testing.assert_array_equal(got["y"][:-1], host["y"][1:] - host["y"][:-1])
    assert got[-1] == host[-1]


def test_an_overlapping_output_is_refused_before_any_launch():
    x = cp.arange(100, dtype=cp.int32)
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        cuprims.adjacent_difference(d_in=x, d_out=x[1:], op=OpKind.MINUS, num_items=99)
    assert info.value.argument == "d_out"
    np.testing.assert_array_equal(x.get(), np.arange(100))
