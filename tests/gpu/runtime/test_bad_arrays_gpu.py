"""Every algorithm refuses a misaligned, strided, host-memory or too-short array with an
ArgumentError naming the argument, before anything is launched, and the process keeps
working afterwards (issue 7): a fault would poison the CUDA context for good.

Each algorithm is declared once in ``ALGORITHMS``: its one-shot function, how to make
good arguments for n items, which arguments are arrays, and how to check a good result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import OpKind, SortOrder  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

N = 1000
f4, i4 = np.float32, np.int32


def _data(dtype=f4, n=N, seed=0):
    return cp.asarray(np.random.default_rng(seed).integers(0, 100, n).astype(dtype))


@dataclass(frozen=True)
class Algo:
    call: Callable[..., Any]
    make: Callable[[], dict[str, Any]]           # good keyword arguments
    arrays: tuple[str, ...]                      # array arguments (each is faulted in turn)
    check: Callable[[dict[str, Any]], None]      # asserts a good call's result


def _sorted_data():
    return cp.sort(_data(i4, seed=1))


ALGORITHMS: dict[str, Algo] = {
    "reduce_into": Algo(
        cuprims.reduce_into,
        lambda: dict(d_in=_data(), d_out=cp.empty(1, f4), num_items=N, op=OpKind.PLUS, h_init=f4(0)),
        ("d_in", "d_out"),
        lambda a: np.testing.assert_allclose(float(a["d_out"][0]), float(a["d_in"].sum()))),
    "inclusive_scan": Algo(
        cuprims.inclusive_scan,
        lambda: dict(d_in=_data(i4), d_out=cp.empty(N, i4), num_items=N, op=OpKind.PLUS),
        ("d_in", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get(), np.cumsum(a["d_in"].get()))),
    "exclusive_scan": Algo(
        cuprims.exclusive_scan,
        lambda: dict(d_in=_data(i4), d_out=cp.empty(N, i4), num_items=N, op=OpKind.PLUS, init_value=i4(0)),
        ("d_in", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get()[1:], np.cumsum(a["d_in"].get())[:-1])),
    "unary_transform": Algo(
        cuprims.unary_transform,
        lambda: dict(d_in=_data(), d_out=cp.empty(N, f4), num_items=N, op=OpKind.NEGATE),
        ("d_in", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get(), -a["d_in"].get())),
    "binary_transform": Algo(
        cuprims.binary_transform,
        lambda: dict(d_in1=_data(), d_in2=_data(seed=2), d_out=cp.empty(N, f4), num_items=N, op=OpKind.PLUS),
        ("d_in1", "d_in2", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get(), a["d_in1"].get() + a["d_in2"].get())),
    "lower_bound": Algo(
        cuprims.lower_bound,
        lambda: dict(d_data=_sorted_data(), num_items=N, d_values=_data(i4, seed=3), num_values=N,
                     d_out=cp.empty(N, np.uint64)),
        ("d_data", "d_values", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get(), np.searchsorted(a["d_data"].get(),
                                                                                  a["d_values"].get(), "left"))),
    "upper_bound": Algo(
        cuprims.upper_bound,
        lambda: dict(d_data=_sorted_data(), num_items=N, d_values=_data(i4, seed=3), num_values=N,
                     d_out=cp.empty(N, np.int64)),
        ("d_data", "d_values", "d_out"),
        lambda a: np.testing.assert_array_equal(a["d_out"].get(), np.searchsorted(a["d_data"].get(),
                                                                                  a["d_values"].get(), "right"))),
    "radix_sort": Algo(
        cuprims.radix_sort,
        lambda: dict(d_in_keys=_data(np.uint32), d_out_keys=cp.empty(N, np.uint32), d_in_values=_data(i4, seed=4),
                     d_out_values=cp.empty(N, i4), num_items=N, order=SortOrder.ASCENDING),
        ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
        lambda a: np.testing.assert_array_equal(a["d_out_keys"].get(), np.sort(a["d_in_keys"].get()))),
    "merge_sort": Algo(
        cuprims.merge_sort,
        lambda: dict(d_in_keys=_data(i4), d_out_keys=cp.empty(N, i4), d_in_values=_data(f4, seed=5),
                     d_out_values=cp.empty(N, f4), num_items=N, op=OpKind.LESS),
        ("d_in_keys", "d_out_keys", "d_in_values", "d_out_values"),
        lambda a: np.testing.assert_array_equal(a["d_out_keys"].get(), np.sort(a["d_in_keys"].get(), kind="stable"))),
}


def _misaligned(x):
    """The same items at an address one byte past an aligned one."""
    raw = cp.empty(x.nbytes + x.itemsize, cp.uint8)
    raw[1:1 + x.nbytes] = x.view(cp.uint8)   # copied as bytes: a typed copy would itself fault
    return raw[1:1 + x.nbytes].view(x.dtype)


def _strided(x):
    wide = cp.empty(2 * x.size, x.dtype)
    wide[::2] = x
    return wide[::2]


FAULTS: dict[str, Callable[[Any], Any]] = {
    "misaligned": _misaligned,
    "strided": _strided,
    "host memory": lambda x: x.get(),
    "too short": lambda x: x[: x.size - 1] if x.size > 1 else x[:0],
}

CASES = [(a, arg, fault) for a, algo in ALGORITHMS.items() for arg in algo.arrays for fault in FAULTS]


@pytest.mark.parametrize("algo,arg,fault", CASES, ids=[f"{a}-{arg}-{f}" for a, arg, f in CASES])
def test_bad_array_is_refused_and_the_process_keeps_working(algo, arg, fault):
    spec = ALGORITHMS[algo]
    good = spec.make()
    spec.call(**good)                 # built and run once: the refusal below is the call's own check
    cp.cuda.Device().synchronize()
    bad = dict(good)
    bad[arg] = FAULTS[fault](good[arg])
    if fault == "misaligned" and bad[arg].data.ptr % bad[arg].dtype.alignment == 0:
        pytest.skip("CuPy aligned the view")
    if fault == "strided" and bad[arg].flags.c_contiguous:
        pytest.skip("a one-item array is contiguous at any stride")
    with pytest.raises(ArgumentError) as info:
        spec.call(**bad)
    assert info.value.argument == arg, (info.value.argument, str(info.value))
    cp.cuda.Device().synchronize()    # nothing was launched that could have faulted
    again = spec.make()
    spec.call(**again)
    spec.check(again)
