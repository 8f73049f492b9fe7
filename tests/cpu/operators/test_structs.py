"""gpu_struct value types: host behaviour, numba device support, and ahead-of-time builds.

No GPU needed: device code is compiled for an explicit compute capability.
"""

# String annotations on purpose: annotated-class structs must evaluate them.
from __future__ import annotations

import re

import numpy as np
import pytest

import cuprims
from cuprims._value_types import host_bytes, value_type
from cuprims.errors import ArgumentError, OperatorCompileError


@pytest.fixture(scope="module", autouse=True)
def _private_cache_dir(tmp_path_factory):
    # A cache directory of our own (the suite's conftest, when present, sets a fresh one per test).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPRIMS_CACHE_DIR", str(tmp_path_factory.mktemp("cuprims-cache-structs")))
        yield


@pytest.fixture
def warm_builds(request):
    """Share NVRTC output between the build tests (the conftest's session-wide disk cache)."""
    try:
        request.getfixturevalue("shared_cache")
    except pytest.FixtureLookupError:
        pass  # no conftest: the module-wide directory above is shared already


Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")
Padded = cuprims.gpu_struct({"c": np.int8, "d": np.float64, "e": np.int16}, name="Padded")


@cuprims.gpu_struct
class Outer:
    flag: np.bool_
    p: Pixel
    v: (np.float64, 2)
    m: (np.int16, (2, 2))


# ----------------------------------------------------------------------------- host side

def test_dict_struct_dtype_is_aligned():
    assert Pixel.__name__ == "Pixel"
    assert Pixel.dtype == np.dtype([("r", np.int32), ("g", np.float32)], align=True)
    assert Pixel._cuprims_dtype is Pixel.dtype
    assert Pixel.dtype.isalignedstruct
    expected = np.dtype([("c", np.int8), ("d", np.float64), ("e", np.int16)], align=True)
    assert Padded.dtype == expected
    assert Padded.dtype.itemsize == expected.itemsize == 24
    assert [Padded.dtype.fields[n][1] for n in "cde"] == [0, 8, 16]


def test_instances_positional_keyword_attributes_eq_repr():
    p = Pixel(1, 2.5)
    assert p.r == 1 and p.g == 2.5
    assert p.r.dtype == np.int32 and p.g.dtype == np.float32
    assert p == Pixel(r=1, g=2.5) == Pixel(1, g=2.5)
    assert p != Pixel(2, 2.5)
    assert p == (1, 2.5)
    assert repr(p) == "Pixel(r=1, g=2.5)"
    assert p.dtype == Pixel.dtype
    p.r = 7
    assert p.r == 7
    with pytest.raises(AttributeError):
        p.other = 1
    assert isinstance(p._cuprims_data, np.ndarray) and p._cuprims_data.shape == ()
    assert p._cuprims_data.dtype == Pixel.dtype


def test_copy_and_pickle():
    import copy
    import pickle

    p = Pixel(3, 4.0)
    q = copy.copy(p)
    q.r = 9
    assert p.r == 3 and q.r == 9
    assert copy.deepcopy(p) == p
    assert pickle.loads(pickle.dumps(p)) == p        # Pixel is importable from this module


def test_iteration_gives_field_values():
    assert list(Pixel(1, 2.5)) == [1, 2.5]
    r, g = Pixel(3, 4.0)
    assert (r, g) == (3, 4.0)
    o = Outer(True, (2, 3.0), [1.0, 2.0], [[1, 2], [3, 4]])
    assert list(o) == [True, Pixel(2, 3.0), [1.0, 2.0], [[1, 2], [3, 4]]]


def test_host_bytes_are_exact():
    p = Padded(-3, 1.5, 9)
    vt = value_type(Padded)
    raw = host_bytes(p, vt, argument="h_init")
    ref = np.zeros(1, Padded.dtype)
    ref[0] = (-3, 1.5, 9)
    assert raw == ref.tobytes()
    assert len(raw) == vt.size == 24
    assert bytes(p) == raw


def test_structured_dtype_input_is_realigned():
    packed = np.dtype([("a", np.int8), ("b", np.float32)])          # itemsize 5, not aligned
    S = cuprims.gpu_struct(packed)
    assert S.__name__ == "AnonymousStruct"
    assert S.dtype == np.dtype([("a", np.int8), ("b", np.float32)], align=True)
    assert S.dtype.itemsize == 8
    assert S(1, 2.0).b == 2.0


def test_annotated_class():
    class Point:
        x: np.float32
        y: "f8"
        n: np.int64

    P = cuprims.gpu_struct(Point)
    assert P.__name__ == "Point"
    assert P.dtype == np.dtype([("x", np.float32), ("y", np.float64), ("n", np.int64)], align=True)
    assert P(1, 2, 3) == P(x=1.0, y=2.0, n=3)
    # annotations that are objects rather than strings
    Q = cuprims.gpu_struct(type("Q", (), {"__annotations__": {"a": np.int8, "b": np.float16}}), name="Q2")
    assert Q.__name__ == "Q2"
    assert Q.dtype == np.dtype([("a", np.int8), ("b", np.float16)], align=True)


def test_nested_structs():
    assert Outer.__name__ == "Outer"
    expected = np.dtype([("flag", np.bool_), ("p", Pixel.dtype), ("v", np.float64, (2,)),
                         ("m", np.int16, (2, 2))], align=True)
    assert Outer.dtype == expected
    assert Outer.dtype.itemsize == expected.itemsize
    o = Outer(True, (2, 3.0), [1.0, 2.0], [[1, 2], [3, 4]])
    assert o.p == Pixel(2, 3.0) and isinstance(o.p, Pixel)
    assert o.v.tolist() == [1.0, 2.0] and o.m.tolist() == [[1, 2], [3, 4]]
    assert o == Outer(flag=True, p=Pixel(2, 3.0), v=(1, 2), m=((1, 2), (3, 4)))
    o.p.g = 5.0                    # nested field access is a view
    assert o.p.g == 5.0
    assert repr(o) == "Outer(flag=True, p=Pixel(r=2, g=5.0), v=[1.0, 2.0], m=[[1, 2], [3, 4]])"
    raw = host_bytes(o, value_type(Outer), argument="h_init")
    ref = np.zeros((), Outer.dtype)
    ref[()] = (True, (2, 5.0), (1.0, 2.0), ((1, 2), (3, 4)))
    assert raw == ref.tobytes()
    # a struct class given as field_dict copies its fields
    Again = cuprims.gpu_struct(Outer, name="Again")
    assert Again.dtype == Outer.dtype and Again.__name__ == "Again"


def test_nested_alignment_follows_inner_struct():
    Inner = cuprims.gpu_struct({"d": np.float64, "c": np.int8}, name="Inner")
    Wrap = cuprims.gpu_struct({"c": np.int8, "i": Inner}, name="Wrap")
    assert Inner.dtype.itemsize == 16
    assert Wrap.dtype.fields["i"][1] == 8 and Wrap.dtype.itemsize == 24
    vt = value_type(Wrap)
    assert vt.is_struct and vt.size == 24 and vt.alignment == 8


@pytest.mark.parametrize("struct, size, align", [(Pixel, 8, 4), (Padded, 24, 8), (Outer, 40, 8)])
def test_value_type_of_struct_classes(struct, size, align):
    vt = value_type(struct)
    assert vt.is_struct and vt.kind == "V"
    assert vt.dtype == struct.dtype
    assert (vt.size, vt.alignment) == (size, align) == (struct.dtype.itemsize, struct.dtype.alignment)
    assert f"__align__({align})" in vt.storage_decl() and f"sizeof({vt.cpp}) == {size}" in vt.storage_decl()
    assert value_type(struct.dtype).code == vt.code
    assert cuprims.ProxyArray(struct).dtype == struct.dtype


@pytest.mark.parametrize("bad", [
    {},
    {"x": "U4"},
    {"x": object},
    {"x": "not a dtype"},
    {"x": np.datetime64},
    {"dtype": np.int32},
    {"not valid": np.int32},
    {"__init__": np.int32},
    {"_from_data": np.int32},
    {"_cuprims_x": np.int32},
    np.dtype(np.float32),
    42,
    type("NoFields", (), {}),
])
def test_bad_field_dict(bad):
    with pytest.raises(ArgumentError) as info:
        cuprims.gpu_struct(bad)
    assert info.value.argument == "field_dict"
    assert "field_dict" in str(info.value)


def test_bad_name():
    with pytest.raises(ArgumentError) as info:
        cuprims.gpu_struct({"x": np.int32}, name="not an identifier")
    assert info.value.argument == "name"


@pytest.mark.parametrize("args, kwargs, argument", [
    ((1,), {}, "g"),
    ((1, 2.0, 3), {}, "args"),
    ((1,), {"r": 2}, "r"),
    ((1, 2.0), {"zz": 3}, "zz"),
    (("x", 2.0), {}, "r"),
    ((1, [1.0, 2.0]), {}, "g"),
])
def test_bad_constructor_arguments(args, kwargs, argument):
    with pytest.raises(ArgumentError) as info:
        Pixel(*args, **kwargs)
    assert info.value.argument == argument


def test_nested_value_of_wrong_type():
    with pytest.raises(ArgumentError) as info:
        Outer(True, 5, (1, 2), ((1, 2), (3, 4)))
    assert info.value.argument == "p"
    with pytest.raises(ArgumentError):
        Outer(True, Padded(1, 2.0, 3), (1, 2), ((1, 2), (3, 4)))


# ----------------------------------------------------------------------------- device side

def _op_record(a, b):
    return a if a.g > b.g else b


def _op_tuple(a, b):
    return (a.r + b.r, max(a.g, b.g))


def _op_ctor(a, b):
    return Pixel(a.r + b.r, max(a.g, b.g))


def _op_ctor_keywords(a, b):
    p = Pixel(g=a.g + b.g, r=a.r)
    return Pixel(p.r * 2, p[1])


def _op_mixed(a, b):
    # a constructed value and a record merged in one result
    return a if a.r < 0 else Pixel(a.r, b.g)


def _op_mutate(a, b):
    a.r = a.r + b.r
    return a


_PIXEL_OPS = [_op_record, _op_tuple, _op_ctor, _op_ctor_keywords, _op_mixed, _op_mutate,
              lambda a, b: Pixel(a.r + b.r, max(a.g, b.g))]


def _compile(op, args, result, cc=(9, 0)):
    """The operator's own code (the first of the codes compile_python_op returns)."""
    from cuprims._operators.numba_ops import compile_python_op

    codes = compile_python_op(op, [value_type(t) for t in args], value_type(result) if result is not None else None,
                              "cuprims_op_0", cc)
    if isinstance(codes, (bytes, bytearray)):
        return bytes(codes)
    assert all(isinstance(c, bytes) and c for c in codes)
    return codes[0]


@pytest.mark.parametrize("cc", [(8, 0), (9, 0)])
@pytest.mark.parametrize("op", _PIXEL_OPS, ids=lambda f: f.__name__)
def test_compile_struct_ops(op, cc):
    ltoir = _compile(op, (Pixel, Pixel), Pixel, cc)
    assert isinstance(ltoir, bytes) and len(ltoir) > 0


def _outer_record(a, b):
    return b


def _outer_ctor(a, b):
    return Outer(a.flag or b.flag, Pixel(a.p.r + b.p.r, b.p.g), (a.v[0] + b.v[0], a.v[1]), ((1, 2), (3, 4)))


def _outer_tuple(a, b):
    return (True, (a.p.r, 2.0), a.v, ((a.m[0, 0], 2), (3, 4)))


def _outer_mixed_fields(a, b):
    return Outer(flag=1, p=a.p, v=b.v, m=((0, 0), (0, 0)))


def _outer_record_fields(a, b):
    # record fields (nested struct, 1-d and 2-d arrays) passed to the constructor
    return Outer(a.flag, b.p, a.v, b.m)


def _outer_attributes(a, b):
    x = Outer(False, (1, 2.5), (1.0, 2.0), ((1, 2), (3, 4)))
    return (x.flag, x.p, x.v, x.m)


@pytest.mark.parametrize("op", [_outer_record, _outer_ctor, _outer_tuple, _outer_mixed_fields, _outer_record_fields,
                                _outer_attributes],
                         ids=lambda f: f.__name__)
def test_compile_nested_struct_ops(op):
    assert len(_compile(op, (Outer, Outer), Outer)) > 0


_LOWEST = Pixel(-1, -np.inf)
_OUTER_DEFAULT = Outer(True, Pixel(5, 1.5), (1.0, 2.0), ((1, 2), (3, 4)))


@pytest.mark.parametrize("op, struct", [
    (lambda a, b: Pixel(max(a.r, b.r, _LOWEST.r), max(a.g, _LOWEST.g)), Pixel),
    (lambda a, b: _LOWEST, Pixel),
    (lambda a, b: _LOWEST if a.r < 0 else b, Pixel),
    (lambda a, b: _OUTER_DEFAULT if a.flag else b, Outer),
], ids=["fields", "whole", "merged-with-record", "nested"])
def test_host_instances_as_device_constants(op, struct):
    assert len(_compile(op, (struct, struct), struct)) > 0


def test_compile_struct_to_scalar_and_back():
    assert len(_compile(lambda a: a.g * a.r, (Pixel,), np.float32)) > 0
    assert len(_compile(lambda x: Pixel(1, x), (np.float32,), Pixel)) > 0
    assert len(_compile(lambda a, b: a.r < b.r, (Pixel, Pixel), None)) > 0     # predicate over structs


def test_compile_plain_structured_dtype():
    dt = np.dtype([("h", np.float16), ("c", np.complex64), ("b", np.bool_), ("u", np.uint64)], align=True)

    def op(a, b):
        return (a.h, a.c * b.c, a.b and b.b, a.u + b.u)

    assert len(_compile(op, (dt, dt), dt)) > 0


def _ptx(monkeypatch, op, args, result):
    """The operator's PTX (compile_python_op with numba told to emit PTX instead of LTO-IR)."""
    from numba import cuda

    def force_ptx(original):
        def as_ptx(*a, **k):
            k["output"] = "ptx"
            code, restype = original(*a, **k)
            if isinstance(code, list):          # compile_all: the operator's PTX comes first
                return [c.encode() if isinstance(c, str) else c for c in code], restype
            return code.encode(), restype
        return as_ptx

    for name in ("compile", "compile_all"):
        if hasattr(cuda, name):
            monkeypatch.setattr(cuda, name, force_ptx(getattr(cuda, name)))
    ptx = _compile(op, args, result).decode()
    return ptx[ptx.index("cuprims_op_0("):]


@pytest.mark.parametrize("op", [_op_ctor, _op_record, _op_tuple], ids=lambda f: f.__name__)
def test_struct_stores_are_typed_and_inline(monkeypatch, op):
    body = _ptx(monkeypatch, op, (Pixel, Pixel), Pixel)
    assert "call" not in body
    stores = re.findall(r"st\.(\w+)\s+\[%rd\d+(\+\d+)?\]", body)
    assert sorted(stores) == [("f32", "+4"), ("u32", "")]


def test_nested_record_copy_skips_padding(monkeypatch):
    body = _ptx(monkeypatch, _outer_record, (Outer, Outer), Outer)
    offsets = sorted(int(off or 0) for off in re.findall(r"st\.\w+\s+\[%rd\d+\+?(\d*)\]", body))
    # flag, p.r, p.g, v[0], v[1], m (4 x int16): never the padding bytes 1..3 or 12..15
    assert offsets == [0, 4, 8, 16, 24, 32, 34, 36, 38]


def test_constructor_copies_record_fields_with_typed_loads(monkeypatch):
    body = _ptx(monkeypatch, _outer_record_fields, (Outer, Outer), Outer)
    assert "call" not in body
    assert not re.search(r"ld\.u8\s+%\w+, \[%rd\d+\+(1[6-9]|[23]\d)\]", body)   # no byte-wise array copies
    offsets = sorted(int(off or 0) for off in re.findall(r"st\.\w+\s+\[%rd\d+\+?(\d*)\]", body))
    assert offsets == [0, 4, 8, 16, 24, 32, 34, 36, 38]


def test_record_inside_returned_tuple_is_explained():
    with pytest.raises(OperatorCompileError) as info:
        _compile(lambda a, b: (a.flag, b.p, a.v, a.m), (Outer, Outer), Outer)
    assert "record inside a tuple" in str(info.value)


@pytest.mark.parametrize("op, message", [
    (lambda a, b: (a.r,), "cannot be stored"),
    (lambda a, b: a.r, "cannot be stored"),
    (lambda a, b: (a.r, (1, 2)), "cannot be stored"),
    (lambda a, b: Pixel(a.r), "missing a required argument"),
    (lambda a, b: Pixel(a.r, b.g, 3), "too many"),
    (lambda a, b: Pixel(a, b.g), "Pixel"),
])
def test_bad_struct_ops_raise_operator_compile_error(op, message):
    with pytest.raises(OperatorCompileError) as info:
        _compile(op, (Pixel, Pixel), Pixel)
    assert message in str(info.value)


# ----------------------------------------------------------------------------- ahead-of-time builds

def _make(op, cc, h_init=None):
    return cuprims.make_reduce_into(d_in=cuprims.ProxyArray(Pixel.dtype), d_out=cuprims.ProxyArray(Pixel.dtype),
                                    op=op, h_init=h_init if h_init is not None else cuprims.ProxyValue(Pixel.dtype),
                                    compute_capability=cc)


@pytest.mark.parametrize("cc", [90, 80])
def test_ahead_of_time_struct_reduce(cc, warm_builds):
    obj = _make(_op_ctor, cc)
    assert obj.compute_capabilities == [cc]
    cubin = obj.cubin()
    assert cubin.startswith(b"\x7fELF") and len(cubin) > 1000
    assert b"cuprims_op_0" not in cubin        # the operator was inlined and dropped


@pytest.mark.parametrize("op", [_op_record, _op_tuple, _op_mixed], ids=lambda f: f.__name__)
def test_ahead_of_time_other_result_styles(op, warm_builds):
    # same kernel source as the cc=90 build above: NVRTC output comes from the cache
    cubin = _make(op, 90, h_init=Pixel(0, -np.inf)).cubin()
    assert cubin.startswith(b"\x7fELF")
    assert b"cuprims_op_0" not in cubin


def test_linked_code_inlines_struct_operator(warm_builds):
    from cuda.core import Linker, LinkerOptions, ObjectCode

    from cuprims._build import build

    obj = _make(_op_ctor, 90)
    kernel_ltoir, _ = build._kernel_ltoir(obj._builds.source(90), 90, build.disk_cache())
    op_ltoir = _compile(_op_ctor, (Pixel, Pixel), Pixel)
    linker = Linker(ObjectCode.from_ltoir(kernel_ltoir, name="kernels"), ObjectCode.from_ltoir(op_ltoir, name="op"),
                    options=LinkerOptions(arch="sm_90", link_time_optimization=True, ptx=True))
    ptx = linker.link("ptx").code
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    assert ".entry" in ptx
    assert "cuprims_op_0" not in ptx
    assert not re.search(r"\bcall(\.uni)?\b", ptx)


def test_storage_structs_have_typed_fields_at_numpy_offsets():
    """Typed fields (a byte array would make NVVM copy values byte by byte through local
    memory), padding where numpy pads, nested structs declared first, and each layout
    checked by a static_assert that NVRTC evaluates."""
    from cuprims._compile import nvrtc
    from cuprims._compile.source import Source
    from cuprims._codegen.common import preamble
    from cuprims._value_types import struct_decls

    inner = cuprims.gpu_struct({"a": np.uint8, "b": np.float64})
    outer = cuprims.gpu_struct({"flag": np.bool_, "inner": inner, "xs": (np.int16, 3), "z": np.complex64,
                                "h": np.float16})
    vt = value_type(outer)
    decls = struct_decls(vt)
    assert [cpp for cpp, _ in decls] == [value_type(inner).cpp, vt.cpp]
    inner_decl = decls[0][1]
    assert "unsigned char f0; unsigned char pad0[7]; double f1;" in inner_decl
    outer_decl = decls[1][1]
    assert f"{value_type(inner).cpp} f1;" in outer_decl and "short f2[3];" in outer_decl
    assert "float f3[2];" in outer_decl and "unsigned short f4;" in outer_decl
    # misaligned fields have no C++ spelling: the storage falls back to bytes
    packed = np.dtype({"names": ["a", "b"], "formats": [np.uint8, np.int32], "offsets": [0, 1], "itemsize": 8})
    assert "unsigned char bytes[8];" in struct_decls(value_type(packed))[0][1]
    # NVRTC checks sizes and alignments (static_asserts) and field offsets (below)
    checks = "".join(f"static_assert(__builtin_offsetof({vt.cpp}, f{k}) == {outer.dtype.fields[n][1]});\n"
                     for k, n in enumerate(outer.dtype.names))
    nvrtc.compile_to_ltoir(Source(preamble((vt, value_type(packed)), 90) + checks, (), (), ()), 90)


@pytest.mark.parametrize("fields, form", [
    ({"r": np.int32, "g": np.float32}, "struct"),                       # small
    ({f"f{i}": np.int8 for i in range(32)}, "struct"),                  # 32 bytes: still small
    ({f"f{i}": np.int8 for i in range(33)}, "words"),                   # 33 single bytes
    ({f"f{i}": np.int32 for i in range(75)}, "struct"),                 # as many fields as words
    ({"k": np.int32, "x": (np.int8, 296)}, "words"),                    # a byte array field
    ({"d": np.float64, "x": (np.int16, 30)}, "words"),                  # halfwords, aligned to 8
])
def test_large_struct_accumulators_are_words_with_the_operator_called(fields, form):
    """CUB's collectives hold a struct of more than 32 bytes whose operator copies more
    pieces than it has words in 32-bit words, padded to 16 bytes, and call the operator
    (cuprims._codegen.accumulators); the storage struct itself is unchanged."""
    from cuprims._codegen.accumulators import accumulator

    S = cuprims.gpu_struct(fields)
    vt = value_type(S)
    acc = accumulator(vt)
    assert vt.size == S.dtype.itemsize and vt.alignment == S.dtype.alignment
    if form == "struct":
        assert (acc.cpp, acc.decl, acc.called) == (vt.cpp, "", False)
        return
    assert acc.called and acc.cpp == f"{vt.cpp}_words"
    words = -(-vt.size // 16) * 4
    assert f"struct __align__(16) {acc.cpp}" in acc.decl and f"unsigned int words[{words}];" in acc.decl
    assert f"memcpy(words, &value, {vt.size});" in acc.decl and f"memcpy(&value, words, {vt.size});" in acc.decl


_LARGE_STRUCT_BUILDS = r"""
import numpy as np
import cuprims
from cuprims._value_types import value_type

S = cuprims.gpu_struct({f"f{i}": np.int8 for i in range(40)}, name="Bytes40")


def pick(a, b):
    return a if a.f0 > b.f0 else b


red = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(S), d_out=cuprims.ProxyArray(S), op=pick,
                               h_init=cuprims.ProxyValue(S), compute_capability=90)
source = red._builds.source(90)
assert len(set(source.name_expressions)) == 1        # one kernel serves both passes
assert source.name_expressions[0].endswith(f"{value_type(S).cpp}*, {value_type(S).cpp}>")
meta = red._builds.result(90).meta
assert (meta["accum_size"], meta["accum_align"]) == (40, 1), meta
assert red.cubin().startswith(b"\x7fELF")
scan = cuprims.make_exclusive_scan(d_in=cuprims.ProxyArray(S), d_out=cuprims.ProxyArray(S), op=pick,
                                   init_value=S(*range(40)), compute_capability=90)
assert scan.cubin().startswith(b"\x7fELF")
print("built")
"""


def test_large_struct_reduce_and_scan_build(warm_builds):
    """A 40-byte int8 struct (word form, operator called): the reduction's partials and
    init value, and the scan's outputs, keep the struct's own type and layout.

    Built in a process of its own: in two-worker runs of the whole CPU suite, nvJitLink
    has crashed the worker (SIGSEGV) in this reduction's link now and then, never when the
    test runs alone or after its own file; the crash is a reliability item of its own, and
    here a crash fails this test (with its output) instead of taking the worker's other
    tests with it."""
    from cpu_helpers import run_python

    proc = run_python(_LARGE_STRUCT_BUILDS)
    assert proc.stdout.strip().endswith("built")
