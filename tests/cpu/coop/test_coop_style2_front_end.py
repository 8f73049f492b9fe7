"""coop Style 2's front end with no GPU: where the block shape comes from (a launch
configuration, faked here, or coop.target), ThreadData's element type inference, and
the errors bad calls give (cuprims errors naming the call's file and line)."""

from __future__ import annotations

import types as pytypes

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims.coop._style2 import kernel_unit as _kernel_unit  # noqa: E402
from cuprims.errors import ArgumentError, CoopError  # noqa: E402

from coop_helpers import link_kernel  # noqa: E402

I32 = types.int32[::1]


pytestmark = pytest.mark.usefixtures("sm90")     # coop primitives built for sm_90 (tests/cpu/conftest.py)


def _compile(fn, argtypes=(I32, I32), block=128):
    kernel = cuda.jit(fn)
    with coop.target(block=block):
        return link_kernel(kernel, argtypes, [])


def _element_kinds():
    return {(sp.kind, sp.vt.code) for sp in _kernel_unit._units}


# ---------------------------------------------------------------- the block shape

class _FakeLaunch:
    """What numba-cuda's current_launch_config() returns while a launch compiles a kernel."""

    def __init__(self, kernel, blockdim):
        self.blockdim, self.griddim, self.sharedmem = blockdim, (1, 1, 1), 0
        self.marked = 0
        self.dispatcher = pytypes.SimpleNamespace(py_func=kernel.py_func, __name__="kernel",
                                                  mark_launch_config_sensitive=self._mark)

    def _mark(self):
        self.marked += 1

    def _is_kernel_launch_config_sensitive(self):   # read by numba-cuda's backend pass
        return self.marked > 0


def test_block_shape_comes_from_the_launch_and_marks_the_kernel(monkeypatch):
    from numba.cuda import launchconfig

    @cuda.jit
    def kernel(x, out):
        out[0] = coop.sum(coop.this_block(), x[cuda.threadIdx.x])

    launch = _FakeLaunch(kernel, (48, 2, 1))
    monkeypatch.setattr(launchconfig, "current_launch_config", lambda: launch)
    link_kernel(kernel, (I32, I32), [])      # no coop.target(block=...)
    assert launch.marked == 1
    assert any(sp.kind == "reduce" and sp.dims == (48, 2, 1) for sp in _kernel_unit._units)


def test_this_block_in_a_device_function_under_a_launch_is_refused(monkeypatch):
    from numba.cuda import launchconfig

    @cuda.jit(device=True)
    def helper(v):
        return coop.sum(coop.this_block(), v)

    @cuda.jit
    def kernel(x, out):
        out[0] = helper(x[cuda.threadIdx.x])

    monkeypatch.setattr(launchconfig, "current_launch_config", lambda: _FakeLaunch(kernel, (64, 1, 1)))
    with pytest.raises(CoopError, match="pass the group to the device function"):
        link_kernel(kernel, (I32, I32), [])


def test_no_block_shape_is_a_clear_error():
    @cuda.jit
    def kernel(x, out):
        out[0] = coop.sum(coop.this_block(), x[0])

    with pytest.raises(CoopError, match=r"no block shape.*coop\.target\(block="):
        link_kernel(kernel, (I32, I32), [])


def test_target_block_shape_is_checked():
    with pytest.raises(ArgumentError, match="block"):
        with coop.target(block=(1024, 2)):
            pass


# ---------------------------------------------------------------- ThreadData's element type

def test_dtype_from_a_slice_made_after_the_thread_data():
    def kernel(x, y):
        items = coop.ThreadData(4)
        block = coop.this_block()
        base = cuda.blockIdx.x * 512
        src = x[base:]                      # defined after items: its array argument is the witness
        coop.load(block, src, items)
        coop.store(block, y[base:], items)

    _compile(kernel, (types.float64[::1], types.float64[::1]))
    assert ("load", "f8") in _element_kinds()


def test_dtype_from_a_store_or_a_scan_partner_and_explicit():
    def kernel(x, y):
        block = coop.this_block()
        a = coop.ThreadData(2)              # from the store's destination
        b = coop.ThreadData(2)              # from a, the scan's input
        c = coop.ThreadData(2, dtype=numba.uint16)
        for i in range(2):
            a[i] = x[i]
            c[i] = i
        coop.inclusive_sum(block, a, b)
        coop.store(block, y, a)
        coop.store(block, y, b)
        coop.exclusive_sum(block, c)

    _compile(kernel, (types.int64[::1], types.int64[::1]))
    assert {("scan", "i8"), ("store", "i8"), ("scan", "u2")} <= _element_kinds()


def test_dtype_that_cannot_be_inferred():
    def kernel(x, y):
        items = coop.ThreadData(4)
        coop.sum(coop.this_block(), items)

    with pytest.raises(CoopError, match=r"ThreadData\(4\) at .*test_coop_style2_front_end.py:\d+.*pass dtype="):
        _compile(kernel)


def test_items_per_thread_must_be_a_constant():
    def kernel(x, y):
        items = coop.ThreadData(x[0], dtype=numba.int32)
        coop.sum(coop.this_block(), items)

    with pytest.raises(CoopError, match="items_per_thread= must be known when the kernel compiles"):
        _compile(kernel)


# ---------------------------------------------------------------- bad calls

def _bad_option(x, y):
    alg = "direct" if x[0] > 0 else "striped"
    items = coop.ThreadData(4)
    coop.load(coop.this_block(), x, items, algorithm=alg)


def _positional_option(x, y):
    items = coop.ThreadData(4)
    coop.load(coop.this_block(), x, items, "direct")


def _keyword_operand(x, y):
    coop.sum(coop.this_block(), value=x[0])


def _missing_operator(x, y):
    coop.reduce(coop.this_block(), x[0])


def _oob_without_count(x, y):
    items = coop.ThreadData(4)
    coop.load(coop.this_block(), x, items, oob_default=1)


def _warp_exchange_time_sliced(x, y):
    items = coop.ThreadData(4)
    coop.load(coop.this_block(), x, items)
    coop.exchange(coop.this_warp(), items, block_exchange_type="StripedToBlocked", warp_time_slicing=True)


def _count_with_many_items(x, y):
    items = coop.ThreadData(4)
    block = coop.this_block()
    coop.load(block, x, items)
    coop.sum(block, items, valid_items=3)


def _partial_sort_without_oob(x, y):
    keys = coop.ThreadData(4)
    block = coop.this_block()
    coop.load(block, x, keys)
    coop.merge_sort_keys(block, keys, compare_op="<", valid_items=3)


@pytest.mark.parametrize("fn,error,pattern", [
    (_bad_option, CoopError, "algorithm= must be known when the kernel compiles"),
    (_positional_option, CoopError, "coop.load.*too many positional arguments"),
    (_keyword_operand, CoopError, "'value' parameter is positional only"),
    (_missing_operator, CoopError, "missing a required argument: 'binary_op'"),
    (_oob_without_count, CoopError, "oob_default= .*valid_items=.*missing"),
    (_warp_exchange_time_sliced, CoopError, "coop.exchange.*warp_time_slicing= is a block option"),
    (_count_with_many_items, CoopError, "valid_items= counts threads holding one value each"),
], ids=lambda v: getattr(v, "__name__", "")[:24])
def test_bad_calls(fn, error, pattern):
    with pytest.raises(error, match=pattern):
        _compile(fn)


def test_block_merge_sort_needs_a_power_of_two_threads():
    def kernel(x, y):
        keys = coop.ThreadData(4)
        block = coop.this_block()
        coop.load(block, x, keys)
        coop.merge_sort_keys(block, keys, compare_op="<")

    with pytest.raises(CoopError, match="96 threads must be a power of two"):
        _compile(kernel, block=96)


def _wrong_source_type(x, y):
    items = coop.ThreadData(4, dtype=numba.float64)
    coop.load(coop.this_block(), x, items)


def _plain_local_array(x, y):
    items = cuda.local.array(4, numba.int32)
    coop.sum(coop.this_block(), items)


def _unknown_algorithm(x, y):
    items = coop.ThreadData(4)
    coop.load(coop.this_block(), x, items, algorithm="fast")


def _float_xor(x, y):
    coop.reduce(coop.this_block(), numba.float32(x[0]), binary_op="^")


def _radix_sort_structless(x, y):
    keys = coop.ThreadData(2, dtype=numba.complex64)
    coop.radix_sort_keys(coop.this_block(), keys)


def _not_a_group(x, y):
    coop.sum(x[0], x[1])


@pytest.mark.parametrize("fn,argument", [(_wrong_source_type, "src"), (_plain_local_array, "value"),
                                         (_not_a_group, "group"),
                                         (_unknown_algorithm, "algorithm"), (_float_xor, "binary_op"),
                                         (_radix_sort_structless, "keys")],
                         ids=lambda v: getattr(v, "__name__", "")[:24])
def test_bad_types_name_the_argument_and_the_call(fn, argument):
    with pytest.raises(ArgumentError, match=rf"argument '{argument}'.*coop\.\w+\(\) at .*front_end.py:\d+"):
        _compile(fn)


def test_kernel_compiles_when_cuprims_coop_was_imported_before_numba_cuda(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\n"
        "from cuprims import coop\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "from numba import cuda, types\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from coop_helpers import link_kernel\n"
        "@cuda.jit\n"
        "def kernel(x, out):\n"
        "    out[0] = coop.sum(coop.this_block(), x[cuda.threadIdx.x])\n"
        "with coop.target((9, 0), block=64):\n"
        "    link_kernel(kernel, (types.int32[::1],) * 2, [])\n"
        "print('linked')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "linked" in result.stdout, result.stderr[-3000:]


def test_host_call_is_refused():
    with pytest.raises(CoopError, match="inside a @cuda.jit kernel"):
        coop.load(None, None, None)
    assert "positional" in repr(coop.load.signature) or "/" in str(coop.load.signature)
    assert "valid_items" in coop.load.__doc__
