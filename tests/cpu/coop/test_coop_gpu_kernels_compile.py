"""The GPU tests' kernels, compiled and linked for sm_90 here with no GPU.

Each GPU test runs with its launch replaced by numba-cuda's compile of the kernel for
the launch's argument types and an nvJitLink link with the kernel's ``link=`` files;
the test stops there (:class:`_Launched`). A typing error, a wrong call convention or an
unresolved provider symbol in tests/gpu fails in CI instead of on the GPU host.

Style 2 kernels (plain ``@cuda.jit``, no ``link=``) compile under
``coop.target(block=<the launch's block>)``: with no real launch that is where their
block shape comes from; their providers arrive through numba's own link inputs.
A test that runs its kernels in a subprocess is covered through the function the
subprocess calls (``SUBPROCESS``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from cuprims import OpKind, coop  # noqa: E402

from coop_helpers import link_kernel  # noqa: E402
from twins import PAIR, VALUE, WIDE  # noqa: E402  (the GPU tests' struct types: equal dtypes, the same element type)

GPU_TESTS = Path(__file__).resolve().parents[2] / "gpu" / "coop"


class _Launched(Exception):
    """Raised at the first launch, once its kernel has compiled and linked."""


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_coop_gpu_{name}", GPU_TESTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Kernel:
    def __init__(self, py_func, link):
        self.py_func, self.files = py_func, list(link)

    def __getitem__(self, config):
        def launch(*args):
            with coop.target(block=config[1]):
                cubin = link_kernel(self, [numba.typeof(a) for a in args], [self])
            assert cubin[:4] == b"\x7fELF"
            raise _Launched
        return launch


@pytest.fixture
def no_launch(shared_cache, monkeypatch):
    real_jit = cuda.jit

    def jit(*args, link=(), **kwargs):
        if kwargs.get("device"):          # the primitives' own device functions stay real
            return real_jit(*args, **kwargs)
        if args and callable(args[0]):    # a bare @cuda.jit
            return _Kernel(args[0], link)
        return lambda fn: _Kernel(fn, link)

    monkeypatch.setattr(cuda, "jit", jit)
    monkeypatch.setattr(cuda, "to_device", np.asarray)
    monkeypatch.setattr(cuda, "device_array", lambda shape, dtype: np.empty(shape, dtype))
    with coop.target((9, 0)):
        yield


def _beyond_ci(case):
    """A case of a GPU test another case in CI already compiles, with the same primitives on a
    dtype family that CI compiles elsewhere: run with --run-slow (and on the GPU, for real)."""
    return pytest.param(*case, marks=pytest.mark.slow)


def _fields(case) -> tuple:
    return tuple(case.values) if hasattr(case, "values") else case


# Every GPU test, and every variant that selects other primitives (a group, a scan mode, an
# exchange direction, a load/store algorithm, a bounds case), is listed; variants in dtype
# alone are _beyond_ci where the dtype family meets the same primitives in another case.
# CI compiles the first case of every ninth test of each GPU module (_ci_share), the rest
# with --run-slow.
CASES = [
    ("test_coop_block_gpu", "test_load_and_sum_partial_tiles", dict(shape=(64, 2, 2), items=3)),
    ("test_coop_block_gpu", "test_sum_every_int_and_float", dict(dtype=np.uint16)),
    ("test_coop_block_gpu", "test_inclusive_sum", dict(shape=(32, 4), items=1)),
    ("test_coop_block_gpu", "test_exclusive_sum", dict(shape=(128,), items=16)),
    ("test_coop_block_gpu", "test_exclusive_max_scan_with_initial_value", dict(items=4)),
    ("test_coop_block_gpu", "test_inclusive_scan_python_operator", dict(items=3)),
    ("test_coop_block_gpu", "test_reduce_python_operator_num_valid_and_own_storage", dict(shape=(32, 4))),
    ("test_coop_block_gpu", "test_load_store_round_trip", dict(algorithm="warp_transpose", items=7)),
    ("test_coop_block_gpu", "test_same_primitive_twice_in_one_kernel", {}),
    ("test_coop_block_gpu", "test_struct_argmax_reduce_and_scan", {}),
    ("test_coop_sort_gpu", "test_radix_sort_keys_every_type", dict(shape=(32, 4), dtype=np.float16)),
    ("test_coop_sort_gpu", "test_radix_sort_1024_key_tiles_256_threads_and_items", dict(items=4)),
    ("test_coop_sort_gpu", "test_radix_sort_keys_descending", dict(shape=(128,), dtype=np.int64)),
    ("test_coop_sort_gpu", "test_radix_sort_nan_infinities_and_zeros", {}),
    ("test_coop_sort_gpu", "test_radix_sort_bit_range_is_stable", {}),
    ("test_coop_sort_gpu", "test_radix_sort_callers_storage", {}),
    ("test_coop_sort_gpu", "test_exchange", dict(shape=(32, 4), kind="BlockedToWarpStriped", sliced=True)),
    ("test_coop_sort_gpu", "test_exchange_types_round_trip", dict(dtype=np.complex128)),
    ("test_coop_warp_gpu", "test_warp_sum", dict(lanes=8, shape=(64, 2, 2))),
    ("test_coop_warp_gpu", "test_warp_sum_every_int_and_float", dict(dtype=np.float64)),
    ("test_coop_warp_gpu", "test_warp_reduce_python_operator", dict(lanes=2)),
    ("test_coop_warp_gpu", "test_warp_reduce_builtin_min", {}),
    ("test_coop_warp_gpu", "test_warp_exclusive_sum", dict(lanes=4, shape=(32, 4))),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_shapes_and_items", dict(shape=(64, 2, 2), items=16)),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_every_type_full_and_partial", dict(dtype=np.complex64)),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_descending", dict(shape=(32, 4), dtype=np.float64)),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_builtin_nan_infinities_and_zeros",
     dict(dtype=np.float16, op=OpKind.GREATER)),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_partial_tiles_and_callers_storage", dict(shape=(128,))),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_struct_keys_are_stable", {}),
    ("test_coop_merge_sort_gpu", "test_block_merge_sort_twice_in_one_kernel", {}),
    ("test_coop_merge_sort_gpu", "test_warp_merge_sort_full_and_partial", dict(lanes=1, shape=(64, 2, 2))),
    ("test_coop_merge_sort_gpu", "test_warp_merge_sort_struct_keys_stable_callers_storage", dict(lanes=8)),
    ("test_coop_merge_sort_gpu", "test_warp_merge_sort_types_descending", dict(dtype=np.bool_)),
    ("test_coop_style2_gpu", "test_load_sum_scan_store_partial_tiles", dict(shape=(64, 2, 2), items=7)),
    ("test_coop_style2_gpu", "test_sum_every_type", dict(dtype=np.complex64)),
    ("test_coop_style2_gpu", "test_scans", dict(which="exclusive_python_min_init", items=3)),
    ("test_coop_style2_gpu", "test_struct_argmax_python_operator", {}),
    ("test_coop_style2_gpu", "test_exchange_and_reduce_operator", dict(shape=(32, 4))),
    ("test_coop_style2_gpu", "test_radix_sort_keys", dict(dtype=np.float32, descending=True)),
    ("test_coop_style2_launch_gpu", "test_warp_group", dict(shape=(64, 2, 2), dtype=np.float64)),
    ("test_coop_style2_launch_gpu", "test_relaunch_with_another_block_shape_recompiles", {}),
    ("test_coop_style2_launch_gpu", "test_group_and_items_passed_to_a_device_function", {}),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="sum_over_threads")),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="load_short_full_tile")),
    ("test_coop_style2_gpu", "test_merge_sort_keys", dict(group="block")),
    ("test_coop_style2_gpu", "test_merge_sort_keys", dict(group="warp")),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="temp_storage_too_small")),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="in_range_storage")),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="temp_storage_misaligned")),
    ("test_coop_style2_launch_gpu", "run_count_case", dict(case="in_range_misaligned_storage")),
    ("test_coop_pairs_gpu", "test_block_radix_sort_pairs_shapes_and_items",
     dict(shape=(64, 2, 2), items=3, descending=True)),
    ("test_coop_pairs_gpu", "test_block_radix_sort_pairs_types", dict(key=np.float32, value=VALUE, descending=False)),
    _beyond_ci(("test_coop_pairs_gpu", "test_block_radix_sort_pairs_types",
                dict(key=np.float16, value=np.int64, descending=True))),
    ("test_coop_pairs_gpu", "test_block_radix_sort_pairs_bit_range_and_callers_storage", dict(shape=(32, 4))),
    ("test_coop_pairs_gpu", "test_block_merge_sort_pairs_shapes_and_items", dict(shape=(128,), items=16)),
    ("test_coop_pairs_gpu", "test_block_merge_sort_pairs_partial_tiles_and_callers_storage", dict(shape=(64, 2, 2))),
    ("test_coop_pairs_gpu", "test_block_merge_sort_pairs_types_and_comparators",
     dict(key=np.bool_, value=np.int32, op=OpKind.GREATER)),
    ("test_coop_pairs_gpu", "test_warp_merge_sort_pairs_full_and_partial", dict(lanes=4, shape=(32, 4))),
    ("test_coop_pairs_gpu", "test_warp_merge_sort_pairs_structs_descending_callers_storage", dict(lanes=8)),
    ("test_coop_pairs_gpu", "test_style2_radix_sort_pairs_partial_tiles",
     dict(shape=(32, 4), descending=True, caller_storage=True)),
    ("test_coop_pairs_gpu", "test_style2_merge_sort_pairs_struct_values_partial_tiles",
     dict(shape=(64, 2, 2), group="block")),
    ("test_coop_pairs_gpu", "test_style2_merge_sort_pairs_struct_values_partial_tiles",
     dict(shape=(128,), group="warp")),
    ("test_coop_warp_load_store_gpu", "test_warp_transpose_in_a_block_whose_last_warp_is_partial", dict(shape=(24, 2))),
    ("test_coop_warp_load_store_gpu", "test_warp_load_store_algorithms_full_and_partial",
     dict(algorithm="transpose", lanes=8, items=7)),
    ("test_coop_warp_load_store_gpu", "test_warp_load_store_algorithms_full_and_partial",
     dict(algorithm="vectorize", lanes=32, items=4)),
    ("test_coop_warp_load_store_gpu", "test_warp_load_store_types_and_callers_storage",
     dict(dtype=np.float16, algorithm="transpose")),
    ("test_coop_warp_load_store_gpu", "test_style2_warp_load_store", dict(algorithm="striped", shape=(64, 2, 2))),
    ("test_coop_warp_load_store_gpu", "test_style2_warp_transpose_types", dict(dtype=PAIR)),
    ("test_coop_warp_load_store_gpu", "test_style2_calls_with_the_callers_storage", dict(shape=(32, 4))),
    ("test_coop_prefix_gpu", "test_running_sum_over_many_tiles", dict(mode="exclusive", shape=(32, 4), items=7)),
    ("test_coop_prefix_gpu", "test_running_sum_over_many_tiles", dict(mode="inclusive", shape=(128,), items=1)),
    ("test_coop_prefix_gpu", "test_make_scan_block_prefix_callback_op", dict(shape=(128,))),
    ("test_coop_prefix_gpu", "test_running_max_float64_python_operator", dict(mode="exclusive")),
    ("test_coop_prefix_gpu", "test_running_struct_argmax", dict(shape=(32, 4))),
    ("test_coop_prefix_gpu", "test_int64_state_for_int32_prefixes", {}),
    ("test_coop_prefix_gpu", "test_callback_runs_in_the_first_warp_only", dict(shape=(128,))),
    ("test_coop_prefix_gpu", "test_one_item_per_thread_and_callers_storage", {}),
    ("test_coop_prefix_gpu", "test_style2_running_scans", dict(shape=(32, 4))),
    ("test_coop_types_gpu", "test_block_sum_and_reduce", dict(dtype=np.complex64, shape=(32, 4), items=4)),
    _beyond_ci(("test_coop_types_gpu", "test_block_sum_and_reduce", dict(dtype=np.float16, shape=(128,), items=1))),
    ("test_coop_types_gpu", "test_block_sum_and_reduce", dict(dtype=np.bool_, shape=(32, 4), items=4)),
    _beyond_ci(("test_coop_types_gpu", "test_block_sum_and_reduce", dict(dtype=np.complex128, shape=(128,), items=1))),
    ("test_coop_types_gpu", "test_bool_reduce_by_or_and_and", {}),
    _beyond_ci(("test_coop_types_gpu", "test_block_scans", dict(dtype=np.complex64, items=3))),
    ("test_coop_types_gpu", "test_block_scans", dict(dtype=np.float16, items=3)),
    _beyond_ci(("test_coop_types_gpu", "test_block_scans", dict(dtype=np.bool_, items=1))),
    ("test_coop_types_gpu", "test_block_load_store_round_trip", dict(dtype=WIDE, algorithm="warp_transpose")),
    ("test_coop_types_gpu", "test_block_load_store_round_trip", dict(dtype=PAIR, algorithm="striped")),
    ("test_coop_types_gpu", "test_block_load_store_round_trip", dict(dtype=np.complex64, algorithm="vectorize")),
    ("test_coop_types_gpu", "test_block_load_store_round_trip", dict(dtype=np.float16, algorithm="transpose")),
    ("test_coop_types_gpu", "test_block_load_store_round_trip", dict(dtype=np.bool_, algorithm="direct")),
    ("test_coop_types_gpu", "test_struct_load_without_oob_default_pads_with_zero_bytes", {}),
    ("test_coop_types_gpu", "test_block_exchange_round_trips", dict(dtype=WIDE, sliced=True)),
    _beyond_ci(("test_coop_types_gpu", "test_block_exchange_round_trips", dict(dtype=np.complex64, sliced=False))),
    ("test_coop_types_gpu", "test_warp_sum_and_reduce", dict(dtype=np.complex128, lanes=8)),
    _beyond_ci(("test_coop_types_gpu", "test_warp_sum_and_reduce", dict(dtype=np.float16, lanes=32))),
    ("test_coop_types_gpu", "test_warp_sum_and_reduce", dict(dtype=np.bool_, lanes=32)),
    ("test_coop_types_gpu", "test_warp_reduce_structs", dict(lanes=16)),
    ("test_coop_types_gpu", "test_style2_struct_results_of_two_calls_stay_apart", {}),
    ("test_coop_style1_bounds_gpu", "test_in_range_calls_run_and_a_contiguous_view_of_layout_a_is_accepted", {}),
    ("test_coop_style1_bounds_gpu", "test_warp_load_store_in_range_runs", {}),
    ("test_coop_style1_bounds_gpu", "test_sort_and_scan_in_range_run", {}),
    ("test_coop_style1_bounds_gpu", "run_case", dict(case="block_load_strided")),
    ("test_coop_style1_bounds_gpu", "run_case", dict(case="warp_store_strided")),
    ("test_coop_style1_bounds_gpu", "run_case", dict(case="scan_short_output")),
    ("test_coop_style1_bounds_gpu", "test_callers_storage_that_holds_the_temp_storage_runs", {}),
    ("test_coop_style1_bounds_gpu", "run_case", dict(case="temp_storage_misaligned")),
    ("test_coop_style1_bounds_gpu", "run_case", dict(case="temp_storage_in_global_memory")),
    ("test_coop_warp_exchange_gpu", "test_warp_exchange_round_trips",
     dict(mode="StripedToBlocked", lanes=8, items=7, shape=(64, 2, 2))),
    ("test_coop_warp_exchange_gpu", "test_warp_exchange_round_trips",
     dict(mode="BlockedToStriped", lanes=2, items=4, shape=(32, 4))),
    ("test_coop_warp_exchange_gpu", "test_warp_exchange_types_and_callers_storage",
     dict(dtype=PAIR, mode="BlockedToStriped")),
    _beyond_ci(("test_coop_warp_exchange_gpu", "test_warp_exchange_types_and_callers_storage",
                dict(dtype=np.complex64, mode="StripedToBlocked"))),
    ("test_coop_warp_exchange_gpu", "test_style2_warp_exchange", dict(mode="StripedToBlocked", shape=(64, 2, 2))),
    ("test_coop_warp_exchange_gpu", "test_style2_warp_exchange", dict(mode="BlockedToStriped", shape=(128,))),
]


def _ci_share(cases: list) -> list:
    """CI compiles the first case of every ninth test of each GPU module (the module's
    first test included); the other tests and variants (other groups, modes, algorithms,
    dtypes) run with the slow tests, and all of them on the GPU."""
    tests_seen: dict[str, list[str]] = {}
    out = []
    for case in cases:
        if hasattr(case, "marks"):        # already beyond CI
            out.append(case)
            continue
        module, test = _fields(case)[:2]
        seen = tests_seen.setdefault(module, [])
        first = test not in seen
        if first:
            seen.append(test)
        out.append(case if first and (len(seen) - 1) % 9 == 0 else _beyond_ci(case))
    return out


CASES = _ci_share(CASES)
SUBPROCESS = {"test_coop_style2_launch_gpu": {"test_in_range_counts_run", "test_out_of_range_counts_trap"},
              "test_coop_style1_bounds_gpu": {"test_a_call_past_its_arrays_traps"}}


@pytest.mark.parametrize("module,test,params", CASES, ids=[f"{_fields(c)[1]}-{i}" for i, c in enumerate(CASES)])
def test_gpu_kernel_compiles_and_links(no_launch, module, test, params):
    with pytest.raises(_Launched):
        getattr(_module(module), test)(**params)


def test_every_gpu_test_is_covered():
    for name in ("test_coop_block_gpu", "test_coop_warp_gpu", "test_coop_sort_gpu", "test_coop_merge_sort_gpu",
                 "test_coop_style2_gpu", "test_coop_style2_launch_gpu", "test_coop_pairs_gpu",
                 "test_coop_warp_load_store_gpu", "test_coop_prefix_gpu", "test_coop_types_gpu",
                 "test_coop_style1_bounds_gpu", "test_coop_warp_exchange_gpu"):
        tests = {n for n in dir(_module(name)) if n.startswith("test_")} - SUBPROCESS.get(name, set())
        assert tests == {t for m, t, _ in map(_fields, CASES) if m == name and t.startswith("test_")}
        in_ci = {t for c in CASES if not hasattr(c, "marks") for m, t, _ in [c] if m == name}
        assert in_ci, name                     # CI compiles kernels of every GPU module
