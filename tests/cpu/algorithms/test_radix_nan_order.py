"""Radix sort's floating-point key order without a GPU: numpy's order (NaNs of either sign
after +inf ascending, first descending) from ``codegen_sort.nan_last_radix_traits``.

Three checks that together stand for a GPU run: the numpy model of the kernels' words
(``twins.ordered_bits``, which the fake device sorts by) gives numpy's order;
the generated C++ traits compute exactly those words (static_asserts compiled by NVRTC);
and sorters over float16/32/64 keys compile and link for sm_90 with the kernel parameters
the host packs. ``tests/gpu/algorithms/test_nan_order_gpu.py`` runs them.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuprims import SortOrder
from cuprims._codegen.common import preamble
from cuprims._compile.source import Source
from cuprims._value_types import value_type
from cuprims.algorithms.radix_sort.source import radix_sort_source
from cuprims.algorithms.sort_source import NAN_LAST_KEY, nan_last_radix_traits
from test_radix_sort import ELF, _radix, check_param_layout
from twins import ordered_bits, sorted_keys

FLOATS = ["float16", "float32", "float64"]


def special_keys(dt) -> np.ndarray:
    """Both NaN signs with several payloads, infinities, zeros, extremes, subnormals."""
    dt = np.dtype(dt)
    ut = np.dtype(f"u{dt.itemsize}")
    nbits = 8 * dt.itemsize
    high = 1 << (nbits - 1)
    inf = int(np.array(np.inf, dt).view(ut))
    fi = np.finfo(dt)
    nans = [inf + 1, int(np.array(np.nan, dt).view(ut)), high - 1]  # signalling, quiet, all-ones payload
    bits = nans + [b | high for b in nans]
    values = np.array([np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, fi.max, -fi.max, fi.tiny, -fi.tiny,
                       fi.smallest_subnormal, -fi.smallest_subnormal, 2.5, -2.5], dtype=dt)
    return np.concatenate([np.array(bits, dtype=ut).view(dt), values])


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_model_gives_numpys_order(dt, descending):
    rng = np.random.default_rng(5)
    keys = rng.permutation(np.concatenate([special_keys(dt), rng.standard_normal(200).astype(dt)]))
    got = sorted_keys(keys[np.argsort(ordered_bits(keys, descending), kind="stable")])
    want = np.sort(keys)[::-1] if descending else np.sort(keys)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    # every NaN comes out as the quiet NaN; every other key bit for bit
    ut = f"u{np.dtype(dt).itemsize}"
    assert (got[np.isnan(got)].view(ut) == np.array(np.nan, dt).view(ut)).all()
    assert sorted(got[~np.isnan(got)].view(ut).tolist()) == sorted(keys[~np.isnan(keys)].view(ut).tolist())


def _words(keys: np.ndarray) -> list[int]:
    """The kernels' words before CUB's -0.0 tie (which its digit extractor applies)."""
    w = ordered_bits(keys, False).tolist()
    high = 1 << (8 * keys.dtype.itemsize - 1)
    return [high - 1 if np.signbit(k) and k == 0 else x for k, x in zip(keys, w)]


@pytest.mark.parametrize("dt", FLOATS)
def test_generated_traits_compute_the_model(dt, shared_cache):
    """NVRTC evaluates the generated TwiddleIn/TwiddleOut on every special key: the words
    of the model, back to the same bits (NaNs to the quiet NaN), the padding keys at the
    words 0 and ~0, and the traits CUB looks for in place."""
    from cuprims._compile.nvrtc import compile_to_ltoir

    vt = value_type(np.dtype(dt))
    keys = special_keys(dt)
    ut = np.dtype(f"u{keys.dtype.itemsize}")
    bits = keys.view(ut).tolist()
    out = sorted_keys(keys).view(ut).tolist()
    t = f"CUB_NS_QUALIFIER::NumericTraits<{NAN_LAST_KEY}>"
    u = f"{t}::UnsignedBits"
    checks = [f"static_assert({t}::TwiddleIn({u}({b}ull)) == {u}({w}ull), \"TwiddleIn({b:#x})\");\n"
              f"static_assert({t}::TwiddleOut({u}({w}ull)) == {u}({o}ull), \"TwiddleOut({w:#x})\");\n"
              for b, w, o in zip(bits, _words(keys), out)]
    checks += [
        f"static_assert({t}::TwiddleIn({t}::LOWEST_KEY) == 0, \"descending padding\");\n",
        f"static_assert({t}::TwiddleIn({t}::MAX_KEY) == {t}::ALL_ONES, \"ascending padding\");\n",
        # CUB ties -0.0 with +0.0 only for keys it sees as floating point, by complement words
        f"static_assert(::cuda::is_floating_point_v<{NAN_LAST_KEY}>);\n",
        f"static_assert(CUB_NS_QUALIFIER::detail::radix::can_twiddle<{NAN_LAST_KEY}>);\n",
        f"static_assert(sizeof({NAN_LAST_KEY}) == sizeof({vt.cpp}) && alignof({NAN_LAST_KEY}) == alignof({vt.cpp}));\n",
        f"static_assert(({u})~{t}::TwiddleIn({t}::HIGH_BIT) == {t}::TwiddleIn(0), \"-0.0 and +0.0\");\n",
    ]
    text = (preamble((vt,), 90) + "#include <cub/device/dispatch/kernels/kernel_radix_sort.cuh>\n"
            + nan_last_radix_traits(vt) + "".join(checks))
    ltoir, _ = compile_to_ltoir(Source(text, (), (), ()), 90)
    assert ltoir


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("dt,order,value", [("float16", SortOrder.ASCENDING, None),
                                            ("float64", SortOrder.DESCENDING, np.int32)],
                         ids=["f2-asc-keys", "f8-desc-pairs"])
def test_float_key_builds_sm90(dt, order, value, shared_cache):
    obj = _radix(np.dtype(dt), value, order)
    assert obj.cubin()[:4] == ELF
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    assert result.meta["key_size"] == np.dtype(dt).itemsize and result.meta["key_bits"] == 8 * np.dtype(dt).itemsize
    check_param_layout(result, source, obj.desc.kernel_params())
    # the kernels sort the NaN-last twin; CUB's policy is still chosen for the real type
    assert all(NAN_LAST_KEY in n for i, n in enumerate(source.name_expressions) if i in (0, 1, 4))
    assert f"using cuprims_key_t = {value_type(np.dtype(dt)).cpp};" in source.text


def test_other_keys_keep_cubs_traits():
    for code in ("b1", "i4", "u8"):
        src = radix_sort_source(key=value_type(np.dtype(code)), value=None, descending=False, wide_offsets=False,
                                arch=90)
        assert NAN_LAST_KEY not in src.text
