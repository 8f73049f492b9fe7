"""The block run-length decode (``coop.block.make_run_length_decode``; Style 2
``coop.run_length_decode``), compiled for sm_90 and linked with no GPU: each kernel of
``coop_run_length`` (own storage, storage first with relative offsets, keywords) links
and keeps its items in registers; bad arguments are refused naming them. CI links a few
cases; the whole matrix runs with the slow tests and, for real, on the GPU."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")
from numba import cuda, types  # noqa: E402

from cuprims import coop  # noqa: E402
from cuprims._compile.elfmeta import local_memory_bytes, register_count  # noqa: E402
from cuprims.errors import ArgumentError  # noqa: E402

import coop_forms  # noqa: E402
import coop_run_length as crl  # noqa: E402
from coop_helpers import link_kernel  # noqa: E402

pytestmark = pytest.mark.usefixtures("sm90")

CI_CASES = {("struct", (2, 4, 8), 2, 3)}
CASES = [pytest.param(*c, id=crl.case_id(*c), marks=() if c in CI_CASES else pytest.mark.slow)
         for c in crl.all_cases()]


@pytest.mark.parametrize("type_name,shape,runs,items", CASES)
def test_every_form_links_and_keeps_items_in_registers(type_name, shape, runs, items):
    case = crl.build(type_name, shape, runs, items)
    vt = types.Array(numba.from_dtype(coop_forms.np_dtype(type_name)), 1, "C")
    u4, i8 = types.Array(types.uint32, 1, "C"), types.Array(types.int64, 1, "C")
    cubin = link_kernel(case.kernel, (vt, u4, vt, u4, i8), [case.prim])
    assert register_count(cubin) * case.threads <= 65536, "the block could not launch"
    assert local_memory_bytes(cubin) == 0


@pytest.mark.parametrize("kwargs,argument", [
    (dict(run_length_dtype=numba.float32), "run_length_dtype"),
    (dict(decoded_offset_dtype=numba.uint64), "decoded_offset_dtype"),
    (dict(runs_per_thread=0), "runs_per_thread"),
    (dict(decoded_items_per_thread=0), "decoded_items_per_thread"),
])
def test_bad_arguments_are_named(kwargs, argument):
    full = dict(dtype=numba.int32, threads_per_block=128, runs_per_thread=2, decoded_items_per_thread=4)
    full.update(kwargs)
    with pytest.raises(ArgumentError, match=argument):
        coop.block.make_run_length_decode(**full)


def test_repr_names_runs_and_lengths():
    rld = coop.block.make_run_length_decode(numba.int16, 64, 2, 4, run_length_dtype=numba.uint16)
    assert "2 runs per thread" in repr(rld) and "lengths uint16" in repr(rld) and "4 items per thread" in repr(rld)


def _style2(call: str):
    source = ("def kernel(x, lengths, out, totals):\n"
              "    block = coop.this_block()\n"
              "    values = coop.ThreadData(2, dtype=numba.float32)\n"
              "    runs = coop.ThreadData(2, dtype=numba.uint32)\n"
              "    decoded = coop.ThreadData(4, dtype=numba.float32)\n"
              "    offsets = coop.ThreadData(4, dtype=numba.uint32)\n"
              "    coop.load(block, x, values)\n"
              "    coop.load(block, lengths, runs)\n"
              f"    totals[cuda.threadIdx.x] = {call}\n"
              "    coop.store(block, out, decoded)\n")
    namespace = {"coop": coop, "cuda": cuda, "numba": numba}
    exec(compile(source, "<style2 run-length decode>", "exec"), namespace)
    return cuda.jit(namespace["kernel"])


def _link2(kernel):
    f4, u4 = types.Array(types.float32, 1, "C"), types.Array(types.uint32, 1, "C")
    with coop.target(block=(128, 1, 1)):
        return link_kernel(kernel, (f4, u4, f4, types.Array(types.int64, 1, "C")), [])


@pytest.mark.parametrize("call", [pytest.param("coop.run_length_decode(block, values, runs, decoded)",
                                               marks=pytest.mark.slow),
                                  "coop.run_length_decode(block, values, runs, decoded, offsets, window_offset=512)"])
def test_style2_decode_links_in_registers(call):
    assert local_memory_bytes(_link2(_style2(call))) == 0


@pytest.mark.parametrize("call,match", [
    ("coop.run_length_decode(block, values, decoded, decoded)", "argument 'run_lengths'"),
    ("coop.run_length_decode(block, values, runs, offsets)", "argument 'decoded_items'"),
    ("coop.run_length_decode(block, values, runs, decoded, decoded)", "argument 'relative_offsets'"),
    ("coop.run_length_decode(block, values, runs, decoded, window_offset=1.0)", "argument 'window_offset'"),
])
def test_style2_decode_refuses_bad_calls_naming_them(call, match):
    with pytest.raises(ArgumentError, match=match):
        _link2(_style2(call))
