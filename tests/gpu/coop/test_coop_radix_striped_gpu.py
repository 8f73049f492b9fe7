"""Block radix sorts leaving their tile striped (``blocked_to_striped=True``) run on the GPU
against numpy: keys and pairs, both orders, integer and float keys, 1- to 3-D blocks, 1
and 3 items per thread; written back striped, the tile is sorted (and each value is its
key's original index). Style 2 likewise, stored with a striped store."""

from __future__ import annotations

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

import coop_forms  # noqa: E402
import coop_striped  # noqa: E402

CASES = [pytest.param(*c, id=coop_striped.case_id(*c)) for c in coop_striped.all_cases()]


@pytest.mark.parametrize("kind,type_name,shape,items", CASES)
def test_striped_sorts_match_numpy(kind, type_name, shape, items):
    prim, kernel = coop_striped.build(kind, type_name, shape, items)
    tile = int(np.prod(shape)) * items
    keys = coop_striped.inputs(type_name, tile)
    want_keys, want_values = coop_striped.expected(kind, keys)
    d_keys, d_values = cuda.to_device(keys), cuda.device_array(tile, np.int32)
    kernel[1, shape](d_keys, d_values)
    np.testing.assert_array_equal(d_keys.copy_to_host(), want_keys)
    if kind.startswith("pairs"):
        np.testing.assert_array_equal(d_values.copy_to_host(), want_values)
    assert not coop_forms.local_memory_in_sass(kernel)


def test_style2_striped_sort_then_striped_store_sorts_the_tile():
    kernel = coop_striped.style2_kernel()
    x = np.random.default_rng(2).integers(0, 1 << 30, 512).astype(np.uint32)
    d = cuda.to_device(x)
    kernel[1, 128](d)
    np.testing.assert_array_equal(d.copy_to_host(), np.sort(x)[::-1])
