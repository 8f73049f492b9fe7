"""Cache keys: one parametrised case per axis that must change the key, and the runtime
values that must not. No compiles here: keys are computed from generated source."""

from __future__ import annotations

import math
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from cuprims import OpKind
from cuprims._build import build as jit_build
from cuprims._build.build import OpInput, build_key, kernel_key
from cuprims._codegen import common as codegen
from cuprims._compile import source as compile_source
from cuprims._compile import toolchain
from cuprims._operators import recipe
from cuprims._operators.recipe import callable_recipe
from cuprims._value_types import value_type
from cuprims.algorithms.reduce.source import reduce_source
from cuprims.op import op_spec


def _src_and_ops(*, in_dt="f4", out_dt="f4", op=OpKind.PLUS, has_init=True, portable=False, arch=90):
    """(source, ops) exactly as reduce.py assembles them for a reduction."""
    in_vt, accum = value_type(np.dtype(in_dt)), value_type(np.dtype(out_dt))
    spec = op_spec(op)
    src = reduce_source(in_type=in_vt, accum=accum, op=spec, has_init=has_init,
                                deterministic_across_gpus=portable, arch=arch)
    ops = [] if spec.kind == "builtin" else [
        OpInput(codegen.op_symbol(spec, "cuprims_op_0"), spec, (accum, accum), accum)]
    return src, ops, arch


def keys(**kw) -> tuple[str, str]:
    src, ops, arch = _src_and_ops(**kw)
    return kernel_key(src, arch), build_key(src, arch, ops)


# -- operator factories (each call makes a new function object) -----------------------

def _plus():
    return lambda a, b: a + b


def _times():
    return lambda a, b: a * b


def _closure(k):
    return lambda a, b: a + b * k


def _with_global(value):
    ns = {"SCALE": value}
    exec("def op(a, b):\n    return a + b * SCALE\n", ns)
    return ns["op"]


def _with_helper(body):
    ns = {}
    exec(f"def helper(x):\n    return {body}\n\ndef op(a, b):\n    return helper(a) + b\n", ns)
    return ns["op"]


def _with_nested_helper(value):
    # op -> helper -> global: the recipe is recursive through called functions
    ns = {"OFFSET": value}
    exec("def inner(x):\n    return x + OFFSET\n\ndef helper(x):\n    return inner(x) * 2\n\n"
         "def op(a, b):\n    return helper(a) + b\n", ns)
    return ns["op"]


def _with_default(value):
    ns = {}
    exec(f"def op(a, b, k={value!r}):\n    return a + b * k\n", ns)
    return ns["op"]


def _closure_over_array(values):
    arr = np.asarray(values, dtype=np.float32)
    return lambda a, b: a + b * arr[0]


# axis -> (kwargs of the first spec, kwargs of the second)
AXES = {
    "arch": (dict(arch=80), dict(arch=90)),
    "input_dtype": (dict(in_dt="f4"), dict(in_dt="i4")),
    "input_dtype_same_size": (dict(in_dt="i4", out_dt="i8"), dict(in_dt="u4", out_dt="i8")),
    "output_dtype": (dict(out_dt="f4"), dict(out_dt="f8")),
    "op_kind_builtin_vs_python": (dict(op=OpKind.PLUS), dict(op=_plus())),
    "builtin_op": (dict(op=OpKind.PLUS), dict(op=OpKind.MAXIMUM)),
    "python_op_body": (dict(op=_plus()), dict(op=_times())),
    "closure_value": (dict(op=_closure(2.0)), dict(op=_closure(3.0))),
    "closure_value_type": (dict(op=_closure(2)), dict(op=_closure(2.0))),
    "global_value": (dict(op=_with_global(2.0)), dict(op=_with_global(3.0))),
    "helper_body": (dict(op=_with_helper("x * 2")), dict(op=_with_helper("x * 3"))),
    "helper_global": (dict(op=_with_nested_helper(1.0)), dict(op=_with_nested_helper(2.0))),
    "default_argument": (dict(op=_with_default(2.0)), dict(op=_with_default(4.0))),
    "captured_host_array_content": (dict(op=_closure_over_array([1, 2])), dict(op=_closure_over_array([5, 2]))),
    "has_init": (dict(has_init=True), dict(has_init=False)),
    "determinism": (dict(portable=False), dict(portable=True)),
}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_axis_changes_build_key(axis):
    first, second = AXES[axis]
    k1, b1 = keys(**first)
    k2, b2 = keys(**second)
    assert b1 != b2, f"build key ignores {axis}"
    # recomputing the first gives the same key: the difference is the axis, not noise
    assert keys(**first)[1] == b1


PYTHON_ONLY_AXES = {"python_op_body", "closure_value", "closure_value_type", "global_value", "helper_body",
                    "helper_global", "default_argument", "captured_host_array_content"}


@pytest.mark.parametrize("axis", sorted(AXES))
def test_kernel_key_tracks_only_what_the_kernel_sees(numba_ops, axis):
    first, second = AXES[axis]
    k1, _ = keys(**first)
    k2, _ = keys(**second)
    if axis in PYTHON_ONLY_AXES:
        # the operator is an external symbol: one kernel LTO-IR serves every Python op over these types
        assert k1 == k2
    else:
        assert k1 != k2, f"kernel key ignores {axis}"


# -- toolchain axes ------------------------------------------------------------------

@pytest.fixture
def fresh_fingerprint():
    toolchain.toolchain_fingerprint.cache_clear()
    yield
    toolchain.toolchain_fingerprint.cache_clear()


TOOLCHAIN_PARTS = ["nvrtc_version", "nvjitlink_version", "cccl_version", "own_sources_digest"]


@pytest.mark.parametrize("op", [OpKind.PLUS, _plus()], ids=["builtin", "python"])
@pytest.mark.parametrize("part", TOOLCHAIN_PARTS)
def test_toolchain_part_changes_keys(fresh_fingerprint, monkeypatch, part, op):
    before = keys(op=op)
    real = getattr(toolchain, part)()
    monkeypatch.setattr(toolchain, part, lambda: real + "-other")
    toolchain.toolchain_fingerprint.cache_clear()
    after = keys(op=op)
    assert after[0] != before[0] and after[1] != before[1]


def test_codegen_version_changes_keys(fresh_fingerprint, monkeypatch):
    before = keys()
    monkeypatch.setattr(compile_source, "CODEGEN_VERSION", compile_source.CODEGEN_VERSION + 1)
    toolchain.toolchain_fingerprint.cache_clear()
    assert keys() != before


def test_fingerprint_changes_keys(monkeypatch):
    before = keys(op=_plus())
    monkeypatch.setattr(jit_build, "toolchain_fingerprint", lambda: "something else entirely")
    after = keys(op=_plus())
    assert after[0] != before[0] and after[1] != before[1]


def test_cccl_version_is_real():
    assert toolchain.cccl_version().isdigit()
    assert toolchain.cccl_version() in toolchain.toolchain_fingerprint()


def test_numba_version_changes_python_keys_only(numba_ops, monkeypatch):
    from cuprims._operators import numba_ops

    py_before, builtin_before = keys(op=_plus()), keys(op=OpKind.PLUS)
    monkeypatch.setattr(numba_ops, "numba_version", lambda: "0.0.0-other")
    assert keys(op=_plus())[1] != py_before[1]
    assert keys(op=_plus())[0] == py_before[0]
    assert keys(op=OpKind.PLUS) == builtin_before


def test_python_version_changes_recipe(monkeypatch):
    op = _plus()
    before = callable_recipe(op)
    monkeypatch.setattr(recipe, "_PY", "py9.99")
    assert callable_recipe(op)[0] != before[0]


def test_compile_options_are_in_kernel_key(monkeypatch):
    before = keys()
    monkeypatch.setattr(jit_build, "BASE_OPTIONS", jit_build.BASE_OPTIONS + ("-use_fast_math",))
    assert keys() != before


# own_sources_digest: a change to the files that shape the compiled code must change every
# key. We point the digest at a copy of the package and edit one file of the copy.

@pytest.fixture
def package_copy(tmp_path, monkeypatch, fresh_fingerprint):
    pkg = Path(toolchain.__file__).resolve().parent.parent
    copy = tmp_path / "cuprims"
    shutil.copytree(pkg, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(toolchain, "__file__", str(copy / "_compile" / "toolchain.py"))
    monkeypatch.setattr(toolchain, "KERNEL_INCLUDE_DIRS", (copy / "algorithms", copy / "iterators"))
    toolchain.own_sources_digest.cache_clear()
    yield copy
    toolchain.own_sources_digest.cache_clear()


def _digest_after_editing(copy: Path, relpath: str) -> tuple[str, str]:
    toolchain.own_sources_digest.cache_clear()
    before = toolchain.own_sources_digest()
    path = copy / relpath
    path.write_text(path.read_text() + "\n# an edit\n" if path.suffix == ".py" else path.read_text() + "\n// edit\n")
    toolchain.own_sources_digest.cache_clear()
    return before, toolchain.own_sources_digest()


@pytest.mark.parametrize("relpath", ["_codegen/common.py", "algorithms/reduce/cuprims_reduce.cuh", "iterators/cuprims_iterator.cuh"])
def test_own_sources_digest_covers(package_copy, relpath):
    before, after = _digest_after_editing(package_copy, relpath)
    assert before != after


@pytest.mark.parametrize("relpath", ["_compile/nvrtc.py", "_compile/link.py", "_operators/numba_ops.py"])
def test_own_sources_digest_covers_other_stages(package_copy, relpath):
    before, after = _digest_after_editing(package_copy, relpath)
    assert before != after


# -- what must NOT change a key ------------------------------------------------------------

def test_same_spec_twice_same_keys():
    assert keys() == keys()
    assert keys(op=_closure(2.0)) == keys(op=_closure(2.0))
    assert keys(in_dt="i8", out_dt="i8", op=OpKind.MAXIMUM, has_init=False) == \
        keys(in_dt="i8", out_dt="i8", op=OpKind.MAXIMUM, has_init=False)


def test_same_lambda_source_twice_same_recipe():
    ns1, ns2 = {}, {}
    exec("op = lambda a, b: a + b\n", ns1)
    exec("\n\n\n# moved down a few lines\nop = lambda a, b: a + b\n", ns2)
    assert ns1["op"].__code__ is not ns2["op"].__code__
    r1, r2 = callable_recipe(ns1["op"]), callable_recipe(ns2["op"])
    assert r1 == r2
    assert r1[1] is True  # persistent: usable as an on-disk key
    assert keys(op=ns1["op"]) == keys(op=ns2["op"])


def test_closures_with_equal_values_same_recipe():
    assert callable_recipe(_closure(2.0)) == callable_recipe(_closure(2.0))
    assert callable_recipe(_with_helper("x * 2")) == callable_recipe(_with_helper("x * 2"))
    assert callable_recipe(_closure_over_array([1, 2])) == callable_recipe(_closure_over_array([1, 2]))


def test_recipe_distinguishes_bodies():
    assert callable_recipe(_plus())[0] != callable_recipe(_times())[0]
    assert callable_recipe(lambda a, b: a + b)[0] != callable_recipe(lambda a, b: b + a)[0]
    assert callable_recipe(lambda a, b: a + b + 1)[0] != callable_recipe(lambda a, b: a + b + 1.0)[0]


def test_recipe_follows_live_global_value():
    ns = {"SCALE": 2.0}
    exec("def op(a, b):\n    return a + b * SCALE\n", ns)
    before = callable_recipe(ns["op"])
    ns["SCALE"] = 5.0
    assert callable_recipe(ns["op"]) != before


def test_recipe_of_math_and_numpy_references_is_persistent():
    digest, persistent = callable_recipe(lambda a, b: math.sqrt(a) + np.float32(b))
    assert persistent


def test_recipe_of_unknown_object_is_not_persistent():
    class Thing:
        pass

    t1, t2 = Thing(), Thing()
    d1, p1 = callable_recipe(lambda a, b, t=t1: a + b)
    d2, p2 = callable_recipe(lambda a, b, t=t2: a + b)
    assert p1 is False and p2 is False
    assert d1 != d2  # identities differ: never shared, never on disk


class FakeDeviceArray:
    """Enough of a device array for the recipe: a CUDA Array Interface and nothing else."""

    def __init__(self, ptr, shape, typestr):
        self._iface = {"data": (ptr, False), "shape": shape, "typestr": typestr, "version": 3, "strides": None}

    @property
    def __cuda_array_interface__(self):
        return dict(self._iface)


def _closure_over(arr):
    return lambda a, b: a + b + arr[0]


def test_captured_device_array_is_runtime_state_not_key():
    # A device array the operator captures is bound at each call (its pointer and extents
    # are the operator's state): the recipe holds its dtype and rank only, and stays
    # persistent (usable as an on-disk key).
    base = callable_recipe(_closure_over(FakeDeviceArray(0x7F0000001000, (16,), "<f4")))
    assert base[1] is True
    assert callable_recipe(_closure_over(FakeDeviceArray(0x7F00DEAD0000, (16,), "<f4"))) == base
    assert callable_recipe(_closure_over(FakeDeviceArray(0x7F0000001000, (32,), "<f4"))) == base
    assert callable_recipe(_closure_over(FakeDeviceArray(0x7F0000001000, (16,), "<f8")))[0] != base[0]
    assert callable_recipe(_closure_over(FakeDeviceArray(0x7F0000001000, (4, 4), "<f4")))[0] != base[0]


def test_runtime_values_are_not_in_the_key(shared_cache):
    # Real make_reduce_into calls over "device arrays" at different addresses and sizes:
    # the same object, the same build key.
    import cuprims

    def make(ptr_in, ptr_out, n):
        return cuprims.make_reduce_into(d_in=FakeDeviceArray(ptr_in, (n,), "<f4"),
                                        d_out=FakeDeviceArray(ptr_out, (1,), "<f4"),
                                        op=OpKind.PLUS, h_init=np.float32(0), compute_capability=90)

    r1 = make(0x7F0000000000, 0x7F0000100000, 1000)
    r2 = make(0x7F1000000000, 0x7F1000200000, 5)
    assert r2 is r1
    key = build_key(r1._builds.source(90), 90, r1._builds._ops)
    cuprims.clear_all_caches()
    r3 = make(0x1000, 0x2000, 1 << 30)
    assert r3 is not r1
    assert build_key(r3._builds.source(90), 90, r3._builds._ops) == key
    assert r3.cubin() == r1.cubin()


# -- known gaps (stale code would be served) ---------------------------------------------

def test_recipe_covers_globals_of_nested_code():
    ns = {"K": 2.0}
    exec("def op(a, b):\n    def inner(x):\n        return x * K\n    return inner(a) + b\n", ns)
    before = callable_recipe(ns["op"])
    ns["K"] = 3.0
    assert callable_recipe(ns["op"]) != before


def test_recipe_covers_user_module_attributes():
    cfg = types.ModuleType("cuprims_test_user_cfg")
    cfg.SCALE = 2.0
    ns = {"cfg": cfg}
    exec("def op(a, b):\n    return a + b * cfg.SCALE\n", ns)
    before = callable_recipe(ns["op"])
    cfg.SCALE = 3.0
    assert callable_recipe(ns["op"]) != before


@pytest.mark.parametrize("name", ["nvidia-cuda-nvrtc", "nvidia-nvjitlink", "numba-cuda", "cuda-core", "numpy"])
def test_wheel_versions_match_importlib_metadata(name):
    """The toolchain's versions in every key are read from .dist-info names (no
    importlib.metadata on a warm build): they must be what importlib.metadata says."""
    from importlib.metadata import version

    assert toolchain._dist_info_version(name) == version(name)


def test_wheel_version_takes_the_first_path_entry_and_normalised_names(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, item in ((first, "Nvidia_Cuda.NVRTC-13.9.1.dist-info"), (second, "nvidia_cuda_nvrtc-13.0.88.dist-info"),
                         (first, "nvidia_nvjitlink-1.0.dist-info")):
        (folder / item).mkdir(parents=True)
    (first / "Nvidia_Cuda.NVRTC-13.9.1.dist-info" / "METADATA").write_text("Name: nvidia-cuda-nvrtc\n")
    (second / "nvidia_cuda_nvrtc-13.0.88.dist-info" / "METADATA").write_text("Name: nvidia-cuda-nvrtc\n")
    monkeypatch.setattr("sys.path", [str(tmp_path / "missing"), str(first), str(second)])
    assert toolchain._dist_info_version("nvidia-cuda-nvrtc") == "13.9.1"
    # a folder without METADATA is not an installed distribution
    assert toolchain._dist_info_version("nvidia-nvjitlink") is None
    assert toolchain._dist_info_version("nvidia-cuda-nvrtc-cu12") is None


# ----------------------------------------------------------------- compiler flags that change no code
# Each __future__ feature that sets a compiler flag, and the code-object bookkeeping flags
# (a nested function, one without free variables): none changes the code numba compiles
# for an operator, so none may change its recipe (an operator written in a module with
# `from __future__ import annotations` and in one without is one cache entry).
_FUTURE_FLAGS = {name: getattr(__import__("__future__"), name).compiler_flag
                 for name in __import__("__future__").all_feature_names
                 if getattr(__import__("__future__"), name).compiler_flag}
_OPERATOR_MODULE = "def op(a, b):\n    t = a * b\n    return t + a if t > b else b\n"


def _operator_compiled_with(flags: int):
    ns = {}
    exec(compile(_OPERATOR_MODULE, "<operator module>", "exec", flags=flags, dont_inherit=True), ns)
    return ns["op"]


@pytest.mark.parametrize("feature", sorted(_FUTURE_FLAGS))
def test_a_future_import_does_not_change_the_recipe(feature):
    plain, flagged = _operator_compiled_with(0), _operator_compiled_with(_FUTURE_FLAGS[feature])
    assert plain.__code__.co_code == flagged.__code__.co_code      # the same code...
    assert callable_recipe(plain) == callable_recipe(flagged)        # ...the same recipe


def test_the_annotations_future_sets_a_code_flag_the_recipe_ignores():
    """The case users meet: the flag really is in the code object."""
    flagged = _operator_compiled_with(_FUTURE_FLAGS["annotations"])
    assert flagged.__code__.co_flags != _operator_compiled_with(0).__code__.co_flags
    assert callable_recipe(flagged) == callable_recipe(_operator_compiled_with(0))


def _nested_op():
    def op(a, b):
        t = a * b
        return t + a if t > b else b
    return op


def test_a_nested_definition_has_the_recipe_of_a_top_level_one():
    nested, top = _nested_op(), _operator_compiled_with(0)
    assert nested.__code__.co_flags != top.__code__.co_flags       # CO_NESTED
    assert callable_recipe(nested) == callable_recipe(top)


def test_flags_that_change_the_code_still_change_the_recipe():
    ns = {}
    exec(compile("def op(a, *b):\n    return a\ndef plain(a, b):\n    return a\n", "<m>", "exec", dont_inherit=True), ns)
    assert callable_recipe(ns["op"])[0] != callable_recipe(ns["plain"])[0]


def test_one_operator_in_two_modules_is_one_build(numba_ops, tmp_path, monkeypatch):
    """The same operator in a module with `from __future__ import annotations` and in one
    without: the second build is served whole (no numba, NVRTC or link)."""
    import importlib

    from cpu_helpers import counters, delta, make_f4

    body = "def add(a, b):\n    return a + b\n"
    (tmp_path / "ops_plain.py").write_text(body)
    (tmp_path / "ops_future.py").write_text("from __future__ import annotations\n" + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    plain, future = importlib.import_module("ops_plain"), importlib.import_module("ops_future")
    before = counters()
    make_f4(plain.add)
    assert delta(before)["numba_compiles"] == 1
    before = counters()
    make_f4(future.add)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}
