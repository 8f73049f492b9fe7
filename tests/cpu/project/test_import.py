"""The public surface: importing is fast and does not pull in numba; public names exist."""

from __future__ import annotations

import enum

import pytest

import cuprims
from cpu_helpers import last_json, run_python


def test_import_is_fast_and_does_not_import_numba():
    proc = run_python("""
        import json, sys, time
        t0 = time.perf_counter()
        import cuprims
        elapsed = time.perf_counter() - t0
        heavy = sorted(m for m in ("numba", "numba.cuda", "cuda.core", "llvmlite") if m in sys.modules)
        print(json.dumps({"seconds": elapsed, "heavy": heavy}))
    """)
    out = last_json(proc.stdout)
    assert out["heavy"] == [], f"import cuprims imported {out['heavy']}"
    assert out["seconds"] <= 0.5, f"import cuprims took {out['seconds']:.3f} s"


def test_codegen_needs_neither_cuda_nor_numba():
    proc = run_python("""
        import json, sys
        import numpy as np
        from cuprims.op import OpKind, op_spec
        from cuprims._value_types import value_type
        from cuprims.algorithms.reduce.source import reduce_source
        for op, linked in ((lambda a, b: a + b, False), (lambda a, b: a ** b, True)):   # C++, numba's
            src = reduce_source(in_type=value_type(np.float32), accum=value_type(np.float32),
                                op=op_spec(op), has_init=True, deterministic_across_gpus=False, arch=90)
            assert ("cuprims_op_0" in src.text) == linked and ("(a + b)" in src.text) != linked
        heavy = sorted(m for m in ("numba", "cuda.core", "cuda.bindings", "llvmlite") if m in sys.modules)
        print(json.dumps({"heavy": heavy}))
    """)
    assert last_json(proc.stdout)["heavy"] == []


def test_builtin_op_build_does_not_import_numba(warm_cache_dir):
    # Only Python operators need numba; a built-in one must not load it, cold or warm.
    code = """
        import json, sys
        import numpy as np, cuprims
        r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                     op=cuprims.OpKind.PLUS, h_init=cuprims.ProxyValue(np.float32),
                                     compute_capability=90)
        assert r.cubin()[:4] == b"\\x7fELF"
        print(json.dumps({"numba": "numba" in sys.modules}))
    """
    proc = run_python(code, env={"CUPRIMS_CACHE_DIR": str(warm_cache_dir)})
    assert last_json(proc.stdout) == {"numba": False}


PUBLIC = ["make_reduce_into", "reduce_into", "OpKind", "RawOp", "ProxyArray", "ProxyValue", "gpu_struct",
          "Determinism", "SortOrder", "clear_all_caches", "cache_info", "errors", "make_histogram_even",
          "histogram_even"]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_exists(name):
    assert hasattr(cuprims, name), name
    assert name in cuprims.__all__


def test_callables_are_callable():
    for name in ("make_reduce_into", "reduce_into", "gpu_struct", "clear_all_caches", "cache_info"):
        assert callable(getattr(cuprims, name)), name


def test_opkind_has_the_24_members():
    expected = {"STATELESS", "STATEFUL", "PLUS", "MINUS", "MULTIPLIES", "DIVIDES", "MODULUS", "EQUAL_TO",
                "NOT_EQUAL_TO", "GREATER", "LESS", "GREATER_EQUAL", "LESS_EQUAL", "LOGICAL_AND", "LOGICAL_OR",
                "LOGICAL_NOT", "BIT_AND", "BIT_OR", "BIT_XOR", "BIT_NOT", "IDENTITY", "NEGATE", "MINIMUM",
                "MAXIMUM"}
    assert issubclass(cuprims.OpKind, enum.Enum)
    assert len(cuprims.OpKind) == 24
    assert {m.name for m in cuprims.OpKind} == expected


def test_enums():
    assert {m.name for m in cuprims.Determinism} == {"NOT_GUARANTEED", "RUN_TO_RUN", "GPU_TO_GPU"}
    assert {m.name for m in cuprims.SortOrder} == {"ASCENDING", "DESCENDING"}


def test_errors_module_has_one_root():
    errors = cuprims.errors
    for name in ("ArgumentError", "ArgumentTypeError", "CompileError", "LinkError", "OperatorCompileError",
                 "NoDeviceError", "CudaError", "CacheError"):
        cls = getattr(errors, name)
        assert issubclass(cls, errors.CuprimsError), name
    assert issubclass(errors.ArgumentError, ValueError)
    assert issubclass(errors.ArgumentTypeError, TypeError)


def test_cache_info_keys(fresh_caches):
    info = cuprims.cache_info()
    assert info["cache_dir"] == str(fresh_caches)
    for key in ("numba_compiles", "nvrtc_compiles", "links", "memory_hits", "memory_misses", "disk_hits",
                "disk_misses", "disk_writes", "disk_corrupt_discarded", "memory_entries", "cache_dir",
                "disk_enabled", "disk_status"):
        assert key in info, key
    assert info["disk_enabled"] is True
    assert info["disk_status"] == "ok"
