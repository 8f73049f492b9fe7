"""Built-in operators (``_codegen/builtin_ops.py``): every OpKind documented once, one comparator
text for every algorithm that sorts or searches, NaN order in the comparator role against
IEEE comparisons in the element-wise role."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest

from cuprims import OpKind
from cuprims._codegen import builtin_ops
from cuprims._value_types import value_type
from cuprims.algorithms.binary_search.source import binary_search_source
from cuprims.algorithms.merge_sort.source import merge_sort_source
from cuprims.algorithms.transform.source import transform_source
from cuprims.op import op_spec

OPERATORS = [k for k in OpKind if k not in (OpKind.STATELESS, OpKind.STATEFUL)]


def vt(code):
    return value_type(np.dtype(code))


def test_every_operator_has_its_meaning_documented():
    table = builtin_ops.__doc__.split("Meaning of each OpKind")[1]
    for kind in OPERATORS:
        assert re.search(rf"\b{kind.name}\b", table), kind


def _comparator_body(text: str) -> str:
    return re.search(r"bool operator\(\)\(.*?\{\s*(return .*?;)", text, re.S).group(1)


@pytest.mark.parametrize("code", ["b1", "i1", "u8", "f2", "f4", "f8"])
@pytest.mark.parametrize("kind", [OpKind.LESS, OpKind.GREATER])
def test_merge_sort_and_binary_search_share_one_comparator(kind, code):
    spec = op_spec(kind)
    merge = merge_sort_source(key=vt(code), value=None, op=spec, wide_offsets=False, arch=90).text
    search = binary_search_source(data=vt(code), out=vt("i8"), op=spec, arch=90).text
    body = _comparator_body(merge)
    assert body == _comparator_body(search) == f"return {builtin_ops.comparator_expr(kind, vt(code))};"
    if code[0] == "f":
        assert ("__hisnan" if code == "f2" else "!=") in body
    else:
        assert "||" not in body


def test_element_wise_comparisons_stay_ieee():
    src = transform_source(inputs=(vt("f4"), vt("f4")), out=vt("b1"), op=op_spec(OpKind.LESS), arch=90).text
    assert "return static_cast<bool>((x < y));" in src
    assert "!=" not in src.split("struct cuprims_op_t")[1].split("};")[0]


def _as_python(expr: str):
    """The comparator expression as a Python function of two floats."""
    py = (expr.replace("||", " or ").replace("&&", " and ").replace("!__hisnan", "not isnan")
          .replace("__hisnan", "isnan").replace("!", "not ").replace("not =", "!="))
    return eval(f"lambda a, b: {py}", {"isnan": math.isnan})  # noqa: S307 (our own text)


@pytest.mark.parametrize("code", ["f2", "f4", "f8"])
def test_less_comparator_is_numpys_sort_order(code):
    """Sorting with the C++ expression (read as Python) gives np.sort's order, NaNs last;
    GREATER gives its reverse, NaNs first; both are strict weak orders."""
    keys = np.array([np.nan, 1.0, -np.inf, -0.0, np.inf, -np.nan, 0.0, -2.5, np.nan, 3.0], dtype=code)
    values = [float(x) for x in keys]
    less = _as_python(builtin_ops.comparator_expr(OpKind.LESS, vt(code)))
    greater = _as_python(builtin_ops.comparator_expr(OpKind.GREATER, vt(code)))

    def ordered(before):
        return np.array(sorted(values, key=functools.cmp_to_key(
            lambda a, b: -1 if before(a, b) else (1 if before(b, a) else 0))), dtype=code)

    want = np.sort(keys)
    for got, ref in ((ordered(less), want), (ordered(greater), want[::-1])):
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        assert np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])
    # irreflexive and asymmetric over every pair, transitive incomparability (all NaNs tie)
    for a in values:
        assert not less(a, a)
        for b in values:
            assert not (less(a, b) and less(b, a))
            assert less(a, b) == greater(b, a)


def test_combiner_rejects_comparators_and_comparator_rejects_combiners():
    with pytest.raises(Exception, match="comparator"):
        builtin_ops.check_binary_builtin(op_spec(OpKind.LESS), vt("f4"))
    with pytest.raises(Exception, match="strict weak order") as info:
        builtin_ops.check_comparator_builtin(op_spec(OpKind.PLUS), vt("f4"), "comp")
    assert info.value.argument == "comp"
