"""What a user finds by looking: reprs that say what an object is, dir() of every public
module listing its public names only, and ``python -m cuprims`` printing its help."""

from __future__ import annotations

import importlib
import subprocess
import sys

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P, ProxyValue as V

PUBLIC_MODULES = ["cuprims", "cuprims.coop", "cuprims.coop.block", "cuprims.coop.warp", "cuprims.errors",
                  "cuprims.types", "cuprims.typing"]


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_dir_of_a_public_module_is_its_public_names(name):
    module = importlib.import_module(name)
    listed = dir(module)
    assert listed == sorted(set(module.__all__) | ({"__version__"} if name == "cuprims" else set()))
    assert "annotations" not in listed and not any(n.startswith("_") and n != "__version__" for n in listed)
    for public in listed:
        assert getattr(module, public) is not None     # each listed name resolves


def test_dir_of_cuprims_names_the_subpackages_users_reach():
    assert {"coop", "errors", "make_reduce_into", "CountingIterator", "settings"} <= set(dir(cuprims))
    assert {"block", "warp", "this_block", "ThreadData"} <= set(dir(cuprims.coop))


def _reduce(op=OpKind.PLUS, dtype=np.float32, **kw):
    return cuprims.make_reduce_into(d_in=P(dtype), d_out=P(dtype), op=op, h_init=V(dtype), compute_capability=90,
                                    **kw)


def _keep_small(v):
    return v < 3


@pytest.mark.parametrize("make,shown", [
    (lambda: _reduce(), ["<cuprims Reduce:", "d_in=float32 array", "d_out=float32 array", "op=OpKind.PLUS",
                         "sm_90>"]),
    (lambda: _reduce(op=lambda a, b: a if a > b else b, dtype=np.int32), ["op=<lambda>", "int32 array"]),
    (lambda: cuprims.make_lower_bound(d_data=P(np.int32), d_values=CountingIterator(np.int32(0)), d_out=P(np.int64),
                                      compute_capability=90),
     ["<cuprims LowerBound:", "d_values=counting iterator of int32", "comp=OpKind.LESS", "d_out=int64 array"]),
    (lambda: cuprims.make_select(d_in=P(np.int32), d_out=DiscardIterator(P(np.int32)), d_num_selected_out=P(np.int64),
                                 cond=_keep_small, compute_capability=90),
     ["<cuprims Select:", "cond=_keep_small", "d_out=discard iterator of int32"]),
])
def test_an_algorithm_object_shows_what_it_computes(make, shown):
    text = repr(make())
    for part in shown:
        assert part in text, (part, text)
    assert " object at 0x" not in text


def test_a_deserialized_object_shows_the_same():
    obj = _reduce()
    assert repr(cuprims.deserialize(cuprims.serialize(obj))) == repr(obj)


def test_a_struct_class_shows_its_fields():
    inner = cuprims.gpu_struct({"a": np.int32, "b": np.float32})
    outer = cuprims.gpu_struct({"x": inner, "v": (np.int8, 3)})
    assert repr(inner) == "<gpu_struct AnonymousStruct(a: int32, b: float32), 8 bytes>"
    assert repr(outer) == "<gpu_struct AnonymousStruct(x: struct(a: int32, b: float32), v: int8[3]), 12 bytes>"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cuprims", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,first_line", [((), "usage: python -m cuprims"),
                                             (("cache",), "usage: python -m cuprims cache")])
def test_the_command_line_alone_prints_its_help(args, first_line):
    out = _cli(*args)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(first_line) and "cache" in out.stdout
    assert out.stderr == ""


def test_the_command_line_says_its_version():
    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"cuprims {cuprims.__version__}"


_PAIR = cuprims.gpu_struct({"a": np.int32, "b": np.float32})


@pytest.mark.parametrize("make,shown", [
    (lambda: CountingIterator(np.int32(5)), "CountingIterator(start=5, dtype=int32)"),
    (lambda: cuprims.ConstantIterator(np.float32(1.5)), "ConstantIterator(value=1.5, dtype=float32)"),
    (lambda: cuprims.ConstantIterator(_PAIR(1, 2.0)),
     "ConstantIterator(value=(1, 2.0), dtype=struct(a: int32, b: float32))"),
    (lambda: cuprims.TransformIterator(CountingIterator(np.int32(0)), _keep_small, np.bool_),
     "TransformIterator(CountingIterator(start=0, dtype=int32), transform_op=_keep_small, value_type=bool)"),
    (lambda: cuprims.TransformOutputIterator(P(np.float32), OpKind.NEGATE),
     "TransformOutputIterator(float32 array, transform_op=OpKind.NEGATE, value_type=float32)"),
    (lambda: DiscardIterator(P(np.int32)), "DiscardIterator(items of int32)"),
    (lambda: cuprims.CacheModifiedInputIterator(P(np.float64)),
     "CacheModifiedInputIterator(float64 array, modifier='stream')"),
    (lambda: cuprims.PermutationIterator(P(np.float32), CountingIterator(np.int64(0))),
     "PermutationIterator(values=float32 array, indices=CountingIterator(start=0, dtype=int64))"),
    (lambda: cuprims.ReverseIterator(P(np.int64)), "ReverseIterator(int64 array)"),
    (lambda: cuprims.ShuffleIterator(100, 7), "ShuffleIterator(num_items=100, seed=7)"),
    (lambda: cuprims.ZipIterator(P(np.float32), CountingIterator(np.int64(0))),
     "ZipIterator(float32 array, CountingIterator(start=0, dtype=int64))"),
])
def test_an_iterator_shows_what_it_was_made_of(make, shown):
    assert repr(make()) == shown


def _larger(a, b):
    return a if a > b else b


def test_a_cooperative_primitive_shows_what_it_is():
    import numba

    from cuprims import coop

    with coop.target((9, 0)):
        block_sum = coop.block.make_sum(numba.float32, 128)
        warp_max = coop.warp.make_reduce(numba.int32, _larger)
        load = coop.block.make_load(numba.int32, 128, 4)
    assert repr(block_sum) == ("<cuprims.coop block.sum: float32, block (128, 1, 1), 1 item per thread, "
                               "algorithm=warp_reductions, op=OpKind.PLUS>")
    assert repr(warp_max) == "<cuprims.coop warp.reduce: int32, warp of 32, 1 item per thread, op=_larger>"
    assert repr(load) == "<cuprims.coop block.load: int32, block (128, 1, 1), 4 items per thread, algorithm=direct>"
