"""Small Python operators written as C++ into the generated unit (cuprims._operators.py_expr).

* the typing rules against numba-cuda's own typing (its typing context for each operator
  and every pair of types, and numba's inferred result type of whole operators);
* what is translated, what is left to numba (and that numba then compiles it);
* the expression found from bytecode and from source, and checked against the code;
* builds with translated operators in a fresh process: every algorithm links, numba is
  never imported; the keys differ from the numba path's; serialization keeps the spec;
* the C++ of every translated operator compiles (NVRTC), and the linked PTX of both paths
  computes with the same instructions (the GPU suite checks the results bit for bit).
"""

from __future__ import annotations

import ast
import collections
import inspect
import itertools
import linecache
import math
import operator
import re
import types

import numpy as np
import pytest

import cuprims
from cuprims import ProxyArray as P, ProxyValue as V
from cuprims._operators import py_expr
from cuprims._operators.py_expr import emit, parse_op, result_code
from cuprims._value_types import value_type
from cuprims.errors import ArgumentTypeError
from cuprims.op import op_spec
from cpu_helpers import ARCH, check_golden, counters, delta, last_json, render_source, run_python
from twins import NUMERIC

pytestmark = pytest.mark.runs_long   # long tests: sent to the workers first

K = 3


def _mk(k):
    return lambda v: v * k


def _doc_def(a, b):
    """A docstring is allowed."""
    return a if a > b else b


# ---------------------------------------------------------------- typing against numba

@pytest.fixture(scope="module")
def ctx():
    from cuprims._operators.numba_ops import import_numba

    import_numba()
    from numba.cuda.descriptor import cuda_target

    typing = cuda_target.typing_context
    typing.refresh()
    return typing


def _nb(code):
    from numba.cuda import types as nt

    if code == "lit":   # an integer literal, as numba types a constant
        return nt.literal(7)
    return getattr(nt, {"b1": "boolean"}.get(code, str(np.dtype(code))))


def _code(nbtype) -> str:
    from numba.np.numpy_support import as_dtype

    dt = as_dtype(nbtype)
    return f"{dt.kind}{dt.itemsize}"


OPERANDS = NUMERIC + ("lit",)


def _ours(code):
    return "i8" if code == "lit" else code


@pytest.mark.parametrize("op,rule", [
    (operator.add, py_expr._arith), (operator.sub, py_expr._arith), (operator.mul, py_expr._arith),
    (operator.floordiv, py_expr._arith), (operator.mod, py_expr._arith),
    (operator.truediv, lambda x, y: "f8" if x[0] in "iu" and y[0] in "iu" else py_expr._arith(x, y)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_arithmetic_result_types_are_numbas(ctx, op, rule):
    for x, y in itertools.product(OPERANDS, repeat=2):
        sig = ctx.resolve_function_type(op, (_nb(x), _nb(y)), {})
        assert _code(sig.return_type) == rule(_ours(x), _ours(y)), (op, x, y, sig)


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge, operator.eq, operator.ne],
                         ids=lambda v: v.__name__)
def test_comparisons_convert_both_sides_to_numbas_type(ctx, op):
    for x, y in itertools.product(OPERANDS + ("b1",), repeat=2):
        if "b1" in (x, y) and x != y:
            continue   # bool against a number: refused (numba compares in the number's type)
        if x == y == "lit":
            continue   # two constants: refused
        sig = ctx.resolve_function_type(op, (_nb(x), _nb(y)), {})
        assert sig.args[0] == sig.args[1] and _code(sig.args[0]) == py_expr._compare(_ours(x), _ours(y)), (x, y, sig)


def test_branches_and_min_max_unify_as_numba(ctx):
    for x, y in itertools.product(OPERANDS, repeat=2):
        assert _code(ctx.unify_pairs(_nb(x), _nb(y))) == py_expr._unify(_ours(x), _ours(y)), (x, y)


UNARY = [
    lambda v: v * 2 + 1, lambda v: -v, lambda v: abs(v), lambda v: v // 3, lambda v: v % -4, lambda v: v / 2,
    lambda v: v > 5, lambda v: v if v > 0 else 0, lambda v: max(v, 0), lambda v: min(v, 0.5),
    lambda v: v % 2 == 0, lambda v: v * 0.5 - 1, lambda v: 1 < v < 10, lambda v: v if v != 3 else 2.5,
    lambda v: (v + 1) * (v - 1), lambda v: v // -1, lambda v: -v + 0.0, lambda v: 1 if v else 0,
]
BINARY = [
    lambda a, b: a + b, lambda a, b: a / b, lambda a, b: a < b, lambda a, b: max(a, b),
    lambda a, b: a if a < b else b, lambda a, b: a * b + 1.5, lambda a, b: a - b * 2, lambda a, b: min(a, b),
    lambda a, b: (a == b) or (a > 0 and b < 0), lambda a, b: a if a != b else a - b,
]
# where numba compiles the operator but we leave it to numba
_UNTRANSLATED = {"neg": ("u1", "u2", "u4", "u8")}


def _check_against_numba(fn, codes):
    from cuprims._operators.numba_ops import infer_result_dtype

    expr = parse_op(fn)
    ours = result_code(expr, codes) if expr else None
    try:
        theirs = infer_result_dtype(fn, tuple(value_type(np.dtype(c)) for c in codes))
    except Exception:   # noqa: BLE001 - numba refuses it: so must we
        assert ours is None, (codes, expr)
        return None
    if ours is not None:
        assert np.dtype(ours) == theirs, (expr, codes, ours, theirs)
    return ours


@pytest.mark.parametrize("index", range(len(UNARY)))
def test_unary_operators_type_as_numba(index):
    fn = UNARY[index]
    assert parse_op(fn) is not None
    translated = [c for c in NUMERIC + ("b1",) if _check_against_numba(fn, (c,)) is not None]
    assert translated, "translated for no type at all"
    if parse_op(fn) == "('fn', 1, ('neg', ('arg', 0)))":
        assert set(NUMERIC) - set(translated) == set(_UNTRANSLATED["neg"])


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("index", range(len(BINARY)))
def test_binary_operators_type_as_numba(index):
    fn = BINARY[index]
    assert parse_op(fn) is not None
    done = sum(_check_against_numba(fn, codes) is not None for codes in itertools.product(NUMERIC, repeat=2))
    assert done >= 90


def test_result_types_of_literals_closures_and_bools():
    assert result_code(parse_op(lambda a: 1), ("i4",)) == "i8"
    assert result_code(parse_op(lambda a: 1.5), ("i4",)) == "f8"
    assert result_code(parse_op(lambda a: True), ("f4",)) == "b1"
    assert result_code(parse_op(_mk(3)), ("i1",)) == "i8" and result_code(parse_op(_mk(2.5)), ("f4",)) == "f8"
    assert result_code(parse_op(lambda a, b: not (a or b)), ("b1", "b1")) == "b1"
    assert result_code(parse_op(lambda a, b: a == b), ("b1", "b1")) == "b1"


# ---------------------------------------------------------------- what is translated

def test_trees_of_the_common_operators():
    assert parse_op(lambda a, b: a + b) == "('fn', 2, ('add', ('arg', 0), ('arg', 1)))"
    assert parse_op(lambda v: v % 2 == 0) == "('fn', 1, ('eq', ('mod', ('arg', 0), ('int', 2)), ('int', 0)))"
    assert parse_op(lambda v: v // -(2 + 1)) == "('fn', 1, ('floordiv', ('arg', 0), ('int', -3)))"  # folded
    assert parse_op(lambda a, b: a < b < 2) == ("('fn', 2, ('and', ('lt', ('arg', 0), ('arg', 1)), "
                                                "('lt', ('arg', 1), ('int', 2))))")
    assert parse_op(_mk(0.25)) == "('fn', 1, ('mul', ('arg', 0), ('float', 0.25)))"
    assert parse_op(_doc_def) == "('fn', 2, ('if', ('gt', ('arg', 0), ('arg', 1)), ('arg', 0), ('arg', 1)))"


def _other_max(a, b):
    return a


def _two_statements(a):
    b = a + 1
    return b


def _gen(a):
    yield a


def _kwonly(a, *, k=1):
    return a + k


def _cond(k):
    return lambda a, b: a if k else b


class _Method:
    def op(self, a, b):
        return a + b


ARRAY = P(np.float32)
REFUSED = {
    "global constant": lambda v: v * K,
    "captured array": lambda v: v + ARRAY[0],
    "call of a helper": lambda v: _other_max(v, v),
    "math function": lambda v: math.sqrt(v),
    "power": lambda v: v ** 2,
    "bitwise and": lambda a, b: a & b,
    "shift": lambda v: v << 1,
    "bitwise not": lambda v: ~v,
    "unary plus": lambda v: +v,
    "default argument": lambda v, k=2: v * k,
    "keyword-only argument": _kwonly,
    "varargs": lambda *a: a[0],
    "two statements": _two_statements,
    "generator": _gen,
    "None": lambda v: v is None,
    "attribute": lambda v: v.real,
    "subscript": lambda v: v[0],
    "literal out of int64": lambda v: v + 2 ** 64,
    "non-finite literal": lambda v: v * 1e400,
    "string": lambda v: "x",
    "constant condition": _cond(True),
    "constant comparison": lambda a: 1 < 2,
    "constant operand of and": lambda a: a and True,
    "closure over a numpy scalar": _mk(np.float32(2)),
    "closure over a tuple": _mk((1, 2)),
    "nested lambda": lambda v: (lambda w: w)(v),
    "min of three": lambda a, b: min(a, b, 0),
    "max with a key": lambda a, b: max(a, b, key=abs),
    "bound method": _Method().op,
    "builtin function": operator.add,
    "max shadowed by a global": types.FunctionType((lambda a, b: max(a, b)).__code__, {"max": _other_max}),
    "in": lambda v: v in (1, 2),
}


@pytest.mark.parametrize("name", REFUSED)
def test_outside_the_subset_is_left_to_numba(name):
    assert parse_op(REFUSED[name]) is None
    if inspect.isgeneratorfunction(REFUSED[name]):   # no operator at all: refused, naming the argument
        with pytest.raises(ArgumentTypeError) as info:
            op_spec(REFUSED[name])
        assert info.value.argument == "op"
        return
    spec = op_spec(REFUSED[name])
    assert spec.expr is None


REFUSED_TYPES = [
    (lambda a, b: a // b, ("i4", "i4"), "i4"),        # floor division by a variable
    (lambda v: v % 0, ("i4",), "i4"),                 # modulo by zero
    (lambda a, b: a + b, ("f2", "f2"), "f2"),         # float16
    (lambda a, b: a + b, ("c8", "c8"), "c8"),         # complex
    (lambda a, b: a + b, ("b1", "b1"), "b1"),         # bool arithmetic
    (lambda a, b: a < b, ("b1", "i4"), None),         # bool against a number
    (lambda v: -v, ("u4",), "u4"),                    # negated unsigned
    (lambda v: v * 1.5, ("i4",), "i4"),               # a float stored into an integer
    (lambda v: v // 2, ("f4",), "f4"),                # floor division of a float
    (lambda v: abs(v), ("b1",), "b1"),
    (lambda a, b: max(a, b), ("b1", "b1"), "b1"),
    (lambda v: not v, ("i4",), None),                 # not of a number
    (lambda a, b: a and b, ("i4", "i4"), "i4"),
    (lambda a, b: a + b, ("i4", "i4"), "f2"),         # a float16 result
]


@pytest.mark.parametrize("fn,codes,out", REFUSED_TYPES)
def test_types_outside_the_subset_are_left_to_numba(fn, codes, out):
    expr = parse_op(fn)
    assert expr is not None
    assert emit(expr, codes, ("a", "b")[:len(codes)], out) is None


def test_struct_values_are_left_to_numba():
    from cuprims._codegen.functors import direct_expr

    pair = cuprims.gpu_struct({"x": np.float32, "y": np.float32})
    vt = value_type(pair)
    assert direct_expr(op_spec(lambda a, b: a), (vt, vt), vt) is None


def test_a_refused_operator_builds_through_numba():
    # its own empty cache (not shared_cache): the same operator built by another test must
    # not serve this build
    before = counters()
    obj = cuprims.make_reduce_into(d_in=P(np.int32), d_out=P(np.int32), op=lambda a, b: a // b, h_init=V(np.int32),
                                   compute_capability=ARCH)
    assert obj.cubin()[:4] == b"\x7fELF"
    assert delta(before)["numba_compiles"] == 1


# ---------------------------------------------------------------- finding the expression

SAME_LINE = (lambda a: a if a > 1 else 2), (lambda a: a if a > 3 else 4)   # same bytecode, other constants
SPLIT = dict(
    op=lambda a, b:
        a if a < b
        else b)


def test_the_lambda_on_its_line_whose_code_and_constants_match():
    assert parse_op(SAME_LINE[0]) == "('fn', 1, ('if', ('gt', ('arg', 0), ('int', 1)), ('arg', 0), ('int', 2)))"
    assert parse_op(SAME_LINE[1]) == "('fn', 1, ('if', ('gt', ('arg', 0), ('int', 3)), ('arg', 0), ('int', 4)))"
    assert parse_op(SPLIT["op"]) == "('fn', 2, ('if', ('lt', ('arg', 0), ('arg', 1)), ('arg', 0), ('arg', 1)))"


def test_without_source_straight_line_code_is_read_from_bytecode():
    namespace: dict = {}
    exec(compile("f = lambda a, b: max(a, b) * 2 - a % 3\ng = lambda a, b: a if a < b else b\n",
                 "<no source here>", "exec"), namespace)
    assert parse_op(namespace["f"]) == ("('fn', 2, ('sub', ('mul', ('max', ('arg', 0), ('arg', 1)), ('int', 2)), "
                                        "('mod', ('arg', 0), ('int', 3))))")
    assert parse_op(namespace["g"]) is None   # control flow needs the source


def test_a_source_that_is_not_the_codes_is_not_used(tmp_path):
    path = str(tmp_path / "edited.py")
    namespace: dict = {}
    exec(compile("f = lambda a, b: a if a < b else b\n", path, "exec"), namespace)
    linecache.cache[path] = (40, None, ["f = lambda a, b: a if a > b else b\n"], path)   # the file was edited
    try:
        assert parse_op(namespace["f"]) is None
    finally:
        linecache.cache.pop(path, None)


def test_setting_turns_translation_off(monkeypatch):
    fn = lambda a, b: a + b  # noqa: E731
    assert op_spec(fn).expr is not None
    with cuprims.settings.override(direct_ops=False):
        assert op_spec(fn).expr is None
    monkeypatch.setenv("CUPRIMS_DIRECT_OPS", "0")
    assert op_spec(fn).expr is None
    monkeypatch.delenv("CUPRIMS_DIRECT_OPS")
    assert op_spec(fn).expr is not None


# ---------------------------------------------------------------- builds without numba

_NO_NUMBA = """
    import json, sys, numpy as np, cuprims
    from cuprims import ProxyArray as P, ProxyValue as V, TransformIterator, CountingIterator, DiscardIterator
    f4, i4, i8 = np.float32, np.int32, np.int64
    sys.path.insert(0, {tmp!r})
    import ternary_ops
    cc = dict(compute_capability=90)
    makers = [
        lambda: cuprims.make_reduce_into(d_in=P(f4), d_out=P(f4), op=lambda a, b: a + b, h_init=np.float32(0),
                                         **cc),
        lambda: cuprims.make_reduce_into(d_in=TransformIterator(CountingIterator(i8(0)), lambda i: i * 2 + 1),
                                 d_out=P(i8), op=lambda a, b: max(a, b), h_init=V(i8), **cc),
        lambda: cuprims.make_inclusive_scan(d_in=P(i4), d_out=P(i4), op=lambda a, b: a * b, **cc),
        lambda: cuprims.make_unary_transform(d_in=P(f4), d_out=P(f4), op=lambda v: v * 2 + 1, **cc),
        lambda: cuprims.make_binary_transform(d_in1=P(f4), d_in2=P(i4), d_out=P(np.bool_), op=lambda a, b: a < b,
                                              **cc),
        lambda: cuprims.make_binary_transform(d_in1=P(f4), d_in2=P(f4), d_out=P(f4), op=ternary_ops.smaller, **cc),
        lambda: cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=lambda v: v % 2 == 0,
                                    **cc),
        lambda: cuprims.make_three_way_partition(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
            d_unselected_out=DiscardIterator(P(i4)), d_num_selected_out=P(i8),
            select_first_part_op=lambda v: v < 0, select_second_part_op=lambda v: v > 5, **cc),
        lambda: cuprims.make_merge_sort(d_in_keys=P(i4), d_out_keys=P(i4), op=lambda a, b: a > b, **cc),
        lambda: cuprims.make_unique_by_key(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4),
                                   d_out_num_selected=P(i8), op=lambda a, b: a // 10 == b // 10, **cc),
        lambda: cuprims.make_lower_bound(d_data=P(f4), d_values=P(f4), d_out=P(np.uintp), comp=lambda a, b: a > b,
                                         **cc),
        lambda: cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                      op=lambda a, b: min(a, b), h_init=V(f4), **cc),
        lambda: cuprims.make_reduce_into(d_in=P(f4),
                                         d_out=cuprims.TransformOutputIterator(P(f4), lambda s: s / 1000),
                                 op=lambda a, b: a + b, h_init=V(f4), **cc),
    ]
    built = [make() for make in makers[{part}::2]]
    assert all(obj.cubin()[:4] == b"\\x7fELF" for obj in built)
    info = cuprims.cache_info()
    print(json.dumps({{"numba": "numba" in sys.modules, "numba_compiles": info["numba_compiles"],
                      "nvrtc": info["nvrtc_compiles"], "links": info["links"]}}))
"""


# the thirteen builds in two halves: CI builds every other one, the slow tests the rest
@pytest.mark.parametrize("part", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_every_algorithm_builds_translated_operators_without_numba(tmp_path, part):
    (tmp_path / "ternary_ops.py").write_text("def smaller(a, b):\n    return a if a < b else b\n")
    out = last_json(run_python(_NO_NUMBA.format(tmp=str(tmp_path), part=part),
                               env={"CUPRIMS_CACHE_DIR": str(tmp_path / "cache")}).stdout)
    # nothing to link either: each unit goes straight to its cubin in NVRTC
    assert out == {"numba": False, "numba_compiles": 0, "nvrtc": 7 - part, "links": 0}


def test_the_cold_reduce_of_the_issue_leaves_numba_out(tmp_path):
    out = last_json(run_python("""
        import json, sys, numpy as np, cuprims
        r = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                     op=lambda a, b: a + b, h_init=np.float32(0), compute_capability=90)
        print(json.dumps({"numba": "numba" in sys.modules, "compiles": cuprims.cache_info()["numba_compiles"]}))
    """, env={"CUPRIMS_CACHE_DIR": str(tmp_path)}).stdout)
    assert out == {"numba": False, "compiles": 0}


def test_a_second_process_loads_a_translated_build_from_disk(tmp_path):
    code = """
        import json, sys, numpy as np, cuprims
        r = cuprims.make_unary_transform(d_in=cuprims.ProxyArray(np.int16), d_out=cuprims.ProxyArray(np.int16),
                                         op=lambda v: v // 3 - abs(v), compute_capability=90)
        info = cuprims.cache_info()
        print(json.dumps({"numba": "numba" in sys.modules, "nvrtc": info["nvrtc_compiles"], "links": info["links"]}))
    """
    env = {"CUPRIMS_CACHE_DIR": str(tmp_path)}
    assert last_json(run_python(code, env=env).stdout) == {"numba": False, "nvrtc": 1, "links": 0}
    assert last_json(run_python(code, env=env).stdout) == {"numba": False, "nvrtc": 0, "links": 0}


def test_numba_version_is_not_in_a_translated_operators_key(monkeypatch):
    from cuprims._operators import numba_ops
    from cuprims._build.build import build_key

    obj_desc = cuprims.make_select(d_in=P(np.int32), d_out=P(np.int32), d_num_selected_out=P(np.int64),
                                   cond=lambda v: v > 3, compute_capability=ARCH).desc
    source, ops = obj_desc.source(ARCH), obj_desc.linked_ops()
    before = build_key(source, ARCH, ops)
    monkeypatch.setattr(numba_ops, "numba_version", lambda: "0.0.0-other")
    assert build_key(source, ARCH, ops) == before


def test_keys_differ_from_the_numba_paths(shared_cache):
    from cuprims._build.build import build_key

    op = lambda a, b: a * b + 1.0  # noqa: E731
    direct = cuprims.make_reduce_into(d_in=P(np.float64), d_out=P(np.float64), op=op, h_init=V(np.float64),
                                      compute_capability=ARCH)
    with cuprims.settings.override(direct_ops=False):
        before = counters()
        linked = cuprims.make_reduce_into(d_in=P(np.float64), d_out=P(np.float64), op=op, h_init=V(np.float64),
                                          compute_capability=ARCH)
        assert delta(before)["numba_compiles"] == 1   # not the direct build from the caches
    assert linked is not direct and linked.desc != direct.desc
    s1, s2 = direct._builds.source(ARCH), linked._builds.source(ARCH)
    assert "cuprims_op_0" not in s1.text and "cuprims_op_0" in s2.text
    assert build_key(s1, ARCH, direct.desc.linked_ops()) != build_key(s2, ARCH, linked.desc.linked_ops())


def test_transform_iterator_infers_numbas_type_without_numba(tmp_path):
    out = last_json(run_python("""
        import json, sys, numpy as np, cuprims
        it = cuprims.TransformIterator(cuprims.CountingIterator(np.int32(0)), lambda v: v + 1)
        u = cuprims.TransformIterator(cuprims.CountingIterator(np.uint64(0)), lambda v: v > 5)
        w = cuprims.TransformIterator(cuprims.CountingIterator(np.float32(0)), lambda v: v / 2)
        print(json.dumps({"types": [str(x.value_type.dtype) for x in (it, u, w)], "numba": "numba" in sys.modules}))
    """, env={"CUPRIMS_CACHE_DIR": str(tmp_path)}).stdout)
    assert out == {"types": ["int64", "bool", "float64"], "numba": False}   # float32 / int literal: float64


def test_serialized_object_keeps_the_translated_spec(shared_cache):
    obj = cuprims.make_select(d_in=P(np.int32), d_out=P(np.int32), d_num_selected_out=P(np.int64),
                              cond=lambda v: v % 3 == 0, compute_capability=ARCH)
    assert obj.desc.op.expr is not None
    again = cuprims.deserialize(cuprims.serialize(obj))
    assert again.desc == obj.desc and again.desc.op.expr == obj.desc.op.expr


def test_goldens_of_translated_operators(shared_cache):
    red = cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=lambda a, b: a + b,
                                   h_init=V(np.float32), compute_capability=ARCH)
    check_golden("reduce_f4_direct_plus_init_sm90", render_source(red._builds.source(ARCH)))
    sel = cuprims.make_select(d_in=P(np.int32), d_out=P(np.int32), d_num_selected_out=P(np.int64),
                              cond=lambda v: v % 2 == 0, compute_capability=ARCH)
    check_golden("select_i4_direct_even_sm90", render_source(sel._builds.source(ARCH)))


# ---------------------------------------------------------------- the C++ and the PTX

def test_every_translation_compiles():
    """The C++ of each operator above on each type pair, in one NVRTC unit."""
    from cuda.core import Program, ProgramOptions

    cpp = {c: value_type(np.dtype(c)).cpp for c in NUMERIC + ("b1",)}
    assert cpp == py_expr._CPP
    lines, n = [], 0
    for fn in UNARY + BINARY:
        expr = parse_op(fn)
        arity = ast.literal_eval(expr)[1]
        for codes in itertools.product(NUMERIC + ("b1",), repeat=arity):
            for out in (codes[0], "b1", None):
                text = emit(expr, codes, ("a", "b")[:arity], out)
                if text is None:
                    continue
                params = ", ".join(f"const {cpp[c]}& {p}" for c, p in zip(codes, "ab"))
                lines.append(f"__device__ {cpp[out] if out else 'bool'} f{n}({params}) {{ return {text}; }}")
                n += 1
    assert n > 1500
    Program("\n".join(lines), "c++", ProgramOptions(arch=f"sm_{ARCH}", std="c++17", relocatable_device_code=True,
                                                    link_time_optimization=True)).compile("ltoir")


def _linked_ptx(monkeypatch, build, direct):
    """The PTX of the build's one unit, LTO-linked with what numba made for its operator
    (``direct=False``), or the unit with the operator translated to C++: a unit with
    nothing to link is compiled straight to a cubin, so its PTX is made here through the
    LTO path (the same machine code: tests/cpu/compile/test_direct_cubin.py)."""
    from cuprims._build import build as jit_build
    from cuprims._base import lazy
    from cuprims._compile import link
    from cuprims._compile.nvrtc import compile_to_ltoir

    texts, real, real_direct = [], link.link_cubin, jit_build.compile_to_cubin

    def ptx_of(kernel, extra, arch):
        core = lazy.cuda_core()
        objs = [core.ObjectCode.from_ltoir(kernel, name="k")]
        objs += [core.ObjectCode.from_ltoir(c, name=f"op{i}") for i, c in enumerate(extra)]
        linker = core.Linker(*objs, options=core.LinkerOptions(arch=f"sm_{arch}", link_time_optimization=True,
                                                               ptx=True))
        texts.append(bytes(linker.link("ptx").code).decode())

    def link_cubin(kernel, extra, arch, *, source_path=None):
        ptx_of(kernel, extra, arch)
        return real(kernel, extra, arch, source_path=source_path)

    def compile_to_cubin(source, arch):
        ptx_of(compile_to_ltoir(source, arch)[0], [], arch)
        return real_direct(source, arch)

    monkeypatch.setattr(link, "link_cubin", link_cubin)
    monkeypatch.setattr(jit_build, "compile_to_cubin", compile_to_cubin)
    cuprims.clear_all_caches()
    with cuprims.settings.override(direct_ops=direct, disk_cache=False):
        build()
    monkeypatch.setattr(link, "link_cubin", real)
    monkeypatch.setattr(jit_build, "compile_to_cubin", real_direct)
    return texts


def _instructions(ptx: str) -> dict:
    """Per defined function, how many of each instruction (registers and order aside)."""
    out, name, depth = {}, None, 0
    for raw in ptx.splitlines():
        line = raw.split("//")[0].strip()
        if not line:
            continue
        if name is None:
            m = re.match(r"^(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", line)
            if m and not line.endswith(";"):
                name, depth, out[m.group(1)] = m.group(1), 0, collections.Counter()
            continue
        depth += line.count("{") - line.count("}")
        if line == "}" and depth == 0:
            name = None
        elif not line.startswith((".", "{", "}", "$")) and not line.endswith(":"):
            words = line.split()
            out[name][words[1] if words[0].startswith("@") else words[0]] += 1
    return out


def _unary(op, a, out):
    return lambda: cuprims.make_unary_transform(d_in=P(np.dtype(a)), d_out=P(np.dtype(out)), op=op,
                                                compute_capability=ARCH)


def _binary(op, a, b, out):
    return lambda: cuprims.make_binary_transform(d_in1=P(np.dtype(a)), d_in2=P(np.dtype(b)), d_out=P(np.dtype(out)),
                                                 op=op, compute_capability=ARCH)


PTX_CASES = {
    "fma f4": _binary(lambda a, b: a * b + b, "f4", "f4", "f4"),
    "fma of products": _binary(lambda a, b: a * b - a * a, "f4", "f4", "f4"),
    "mixed fma to f8": _binary(lambda a, b: a * b + b * 0.5, "f4", "f4", "f8"),
    "division": _binary(lambda a, b: a / b, "f4", "f4", "f4"),
    "int true division": _binary(lambda a, b: a / b + 1, "u8", "i8", "f4"),
    "float and int": _binary(lambda a, b: a + b, "f4", "i4", "f4"),
    "max f4": _binary(lambda a, b: max(a, b), "f4", "f4", "f4"),
    "min f8 f4": _binary(lambda a, b: min(a, b), "f8", "f4", "f8"),
    "max float int": _binary(lambda a, b: max(a, b), "i4", "f4", "f8"),
    "max literal": _unary(lambda v: max(v, 0), "f4", "f4"),
    "ternary": _binary(lambda a, b: a if a > b else b + 0.5, "f4", "f4", "f4"),
    "chained compare": _binary(lambda a, b: a < b < 2.5, "f8", "f8", "b1"),
    "u8 against literal": _unary(lambda v: v > 5, "u8", "b1"),
    "neg f4": _unary(lambda v: -v, "f4", "f4"),
    "neg i1": _unary(lambda v: -v, "i1", "i8"),
    "abs f8": _unary(lambda v: abs(v), "f8", "f8"),
    "abs i2": _unary(lambda v: abs(v), "i2", "i2"),
    "floor div and mod": _unary(lambda v: v // 7 + v % -7, "i4", "i4"),
    "overflow assumed away (nsw)": _unary(lambda v: v + 1 > v, "i8", "b1"),
    "poly f8": _unary(lambda v: v * v - 2.0 * v + 1.0, "f8", "f8"),
    "reduce max": lambda: cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32),
                                                   op=lambda a, b: max(a, b), h_init=V(np.float32),
                                                   compute_capability=ARCH),
    "select": lambda: cuprims.make_select(d_in=P(np.float32), d_out=P(np.float32), d_num_selected_out=P(np.int64),
                                          cond=lambda v: v > 0.5, compute_capability=ARCH),
    "merge sort": lambda: cuprims.make_merge_sort(d_in_keys=P(np.float64), d_out_keys=P(np.float64),
                                                  op=lambda a, b: abs(a) < abs(b), compute_capability=ARCH),
}


# CI compares one case of each operator class on each type family (contraction in float32 and
# into float64, float and integer division, min/max across families, comparisons, the
# ternary, negation of a float and abs of an integer, Python's floor division, integer
# overflow, each algorithm that is not a transform); the rest runs with --run-slow.
PTX_BEYOND_CI = {"fma of products", "poly f8", "float and int", "max f4", "min f8 f4", "max literal", "neg i1",
                 "abs f8"}


@pytest.mark.ci_sample(every=5)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in PTX_BEYOND_CI else n
                                  for n in PTX_CASES])
def test_linked_ptx_computes_as_numbas(monkeypatch, name):
    direct = _linked_ptx(monkeypatch, PTX_CASES[name], True)
    linked = _linked_ptx(monkeypatch, PTX_CASES[name], False)
    assert len(direct) == len(linked) == 1
    assert _instructions(direct[0]) == _instructions(linked[0])
