"""Merge sort without a GPU: AOT builds (Python comparator on sm_90, struct keys with
values on sm_80, iterator keys and values, a comparator capturing a device array), kernel
parameter sizes checked against the cubin, golden sources, argument errors (bad iterators
among them, named before any compile), and the host dispatch run against a fake device
that emulates CUB's merge-sort kernels (tile sort, merge rounds, ping-pong, in place,
64-bit offsets, iterator states and comparator state packed per call).

Regenerate the golden sources after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_merge_sort.py -k golden
"""

from __future__ import annotations

import functools
import struct
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cuprims import (CountingIterator, DiscardIterator, OpKind, PermutationIterator, ProxyArray, RawOp,
                     ReverseIterator, TransformIterator, TransformOutputIterator, ZipIterator)
from cuprims._runtime import driver
from cuprims._value_types import value_type
from cuprims.algorithms.merge_sort import api as ms
from cuprims.algorithms.merge_sort.api import make_merge_sort, merge_sort
from cuprims.algorithms.merge_sort.source import merge_sort_source
from cuprims.algorithms.skeleton import functor_size
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec, op_spec
from cpu_helpers import check_golden, counters, delta, render_source, stub_ltoir
from test_radix_sort import ELF, FakeArray, FakeMemory, FakePack, check_param_layout
from twins import KEY_STRUCT, struct_less

TAGGED = np.dtype([("tag", np.int16), ("index", np.int32)], align=True)  # the layout of Zip(int16, int32)
P = ProxyArray
i2, i4, i8, f4 = np.int16, np.int32, np.int64, np.float32

SCALE = ProxyArray(np.float32)  # a device array the comparator below captures (rebound by tests)


def less(a, b):
    return a < b


def scaled_less(a, b):
    return a * SCALE[0] < b * SCALE[0]


def negate(v):
    return -v


# ------------------------------------------------------------------- AOT builds

def test_python_comparator_build_sm90(shared_cache, numba_ops):
    obj = make_merge_sort(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), op=less,
                          compute_capability=90)
    assert obj.compute_capabilities == [90] and obj.cubin()[:4] == ELF
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    meta = result.meta
    assert meta["key_size"] == 4 and meta["value_size"] == 0 and meta["offset_size"] == 4
    assert meta["threads"] > 0 and meta["threads"] % 32 == 0 and meta["items"] > 0
    assert meta["block_sort_vsmem"] == 0 and meta["merge_vsmem"] == 0
    assert source.extern_symbols == ("cuprims_op_0",)
    check_param_layout(result, source, obj.desc.kernel_params())
    # same comparator code again: the same object
    assert make_merge_sort(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), op=less,
                           compute_capability=90) is obj


def test_struct_keys_with_values_sm80(shared_cache):
    obj = make_merge_sort(d_in_keys=ProxyArray(KEY_STRUCT), d_in_values=ProxyArray(np.int16),
                          d_out_keys=ProxyArray(KEY_STRUCT), d_out_values=ProxyArray(np.int16), op=struct_less,
                          compute_capability=80)
    assert obj.compute_capabilities == [80] and obj.cubin(80)[:4] == ELF
    builds = obj._builds_of(0)
    result, source = builds.result(80), builds.source(80)
    assert result.meta["key_size"] == 8 and result.meta["value_size"] == 2
    check_param_layout(result, source, obj.desc.kernel_params())


def test_iterator_keys_and_values_build_sm90(shared_cache, numba_ops):
    keys_it = TransformIterator(P(f4), negate)
    obj = make_merge_sort(d_in_keys=keys_it, d_out_keys=P(f4), d_in_values=CountingIterator(np.int64(0)),
                          d_out_values=P(i8), op=OpKind.LESS, compute_capability=90)
    assert obj.cubin()[:4] == ELF
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    assert result.meta["key_size"] == 4 and result.meta["value_size"] == 8
    assert source.extern_symbols == ("cuprims_in_keys_it_op_0",)  # the transform's op (LESS is built in)
    params = obj.desc.kernel_params()
    assert params[0][1:3] == (obj.desc.d_in_keys.state_size, 16)  # iterator states by value
    check_param_layout(result, source, params)
    # other states of the same kinds (another start, another array under the transform): the same object
    again = make_merge_sort(d_in_keys=TransformIterator(P(f4), negate), d_out_keys=P(f4),
                            d_in_values=CountingIterator(np.int64(5)), d_out_values=P(i8), op=OpKind.LESS,
                            compute_capability=90)
    assert again is obj


def test_zip_keys_as_structs_and_permuted_values_build_sm90(shared_cache):
    """Zip(int32, float32) keys read as KEY_STRUCT (same layout) by a Python comparator;
    values gathered by a PermutationIterator; the 64-bit offset variant too."""
    obj = make_merge_sort(d_in_keys=ZipIterator(P(i4), P(f4)), d_out_keys=P(KEY_STRUCT),
                          d_in_values=PermutationIterator(P(i2), P(i4)), d_out_values=P(i2), op=struct_less,
                          compute_capability=90)
    desc = obj.desc
    assert desc.key == value_type(KEY_STRUCT) and desc.d_in_keys.value == value_type(KEY_STRUCT)
    assert desc.value.size == 2 and desc.d_in_values.value.dtype == np.int16
    obj._builds_of(1).build_for([90], obj._objects(struct_less))  # as a problem of 2^31 items would
    for variant in (0, 1):
        builds = obj._builds_of(variant)
        result, source = builds.result(90), builds.source(90)
        assert result.meta["key_size"] == 8 and result.meta["offset_size"] == 4 << variant
        check_param_layout(result, source, desc.variant(variant).kernel_params())


def _reverse_keys_zip_values(op):
    """The sort of the second iterator golden (reversed keys, Zip values into structs)."""
    return make_merge_sort(d_in_keys=ReverseIterator(P(f4)), d_out_keys=P(f4),
                           d_in_values=ZipIterator(P(i2), CountingIterator(np.int32(0))), d_out_values=P(TAGGED),
                           op=op, compute_capability=90)


def test_comparator_capturing_an_array_builds_with_state_sm90(shared_cache, monkeypatch):
    obj = _reverse_keys_zip_values(scaled_less)
    assert obj.desc.source(90) == _described("merge_sort_reverse_keys_zip_values_captured_sm90").source(90)
    spec = obj.desc.op
    assert [c.name for c in spec.captures] == ["SCALE"] and spec.state_size == 16 and spec.persistent
    assert functor_size(spec) == 16 and {kinds[8 if k == 0 else 6] for k, kinds in
                                         enumerate(obj.desc.kernel_params())} == {16}
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    assert "unsigned char bytes[16]; } state;" in source.text  # the arrays travel as functor state
    check_param_layout(result, source, obj.desc.kernel_params())
    before = counters()
    monkeypatch.setattr(sys.modules[__name__], "SCALE", ProxyArray(np.float32))  # another array of the same kind
    again = _reverse_keys_zip_values(scaled_less)
    assert again is obj and delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


# ------------------------------------------------------------------- goldens

RAW = OpSpec("raw", "2" * 64, state_size=12, state_alignment=4, name="my_raw_cmp")
PY = OpSpec("python", "0" * 64, name="less")

GOLDEN_SPECS = {
    "merge_sort_i4_python_sm90": dict(key="i4", value=None, op=PY, wide_offsets=False, arch=90),
    "merge_sort_struct_pairs_python_sm80": dict(key=KEY_STRUCT, value="i2", op=PY, wide_offsets=False, arch=80),
    "merge_sort_f2_less_pairs_c16_sm90": dict(key="f2", value="c16", op=op_spec(OpKind.LESS), wide_offsets=False,
                                              arch=90),
    "merge_sort_u8_raw_state_wide_sm90": dict(key="u8", value=None, op=RAW, wide_offsets=True, arch=90),
}


def _generate(spec):
    args = dict(spec)
    args["key"] = value_type(np.dtype(args["key"]))
    args["value"] = None if args["value"] is None else value_type(np.dtype(args["value"]))
    return merge_sort_source(**args)


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_golden_source(name):
    src = _generate(GOLDEN_SPECS[name])
    assert _generate(GOLDEN_SPECS[name]) == src
    check_golden(name, render_source(src))


# described from build arguments (iterator kinds carry their generated C++)
GOLDEN_ITERATOR_ARGS = {
    "merge_sort_negated_keys_counting_values_sm90": lambda: dict(
        d_in_keys=TransformIterator(P(i4), OpKind.NEGATE), d_in_values=CountingIterator(np.int64(0)),
        d_out_keys=P(i4), d_out_values=P(i8), op=OpKind.LESS),
    "merge_sort_reverse_keys_zip_values_captured_sm90": lambda: dict(
        d_in_keys=ReverseIterator(P(f4)), d_in_values=ZipIterator(P(i2), CountingIterator(np.int32(0))),
        d_out_keys=P(f4), d_out_values=P(TAGGED), op=scaled_less),
}


def _described(name):
    kw = GOLDEN_ITERATOR_ARGS[name]()
    return ms._describe(kw["d_in_keys"], kw["d_in_values"], kw["d_out_keys"], kw["d_out_values"], kw["op"])


@pytest.mark.parametrize("name", sorted(GOLDEN_ITERATOR_ARGS))
def test_golden_iterator_source(name):
    src = _described(name).source(90)
    assert _described(name).source(90) == src
    check_golden(name, render_source(src))


def test_source_shape():
    py = _generate(GOLDEN_SPECS["merge_sort_i4_python_sm90"])
    assert py.extern_symbols == ("cuprims_op_0",) and "0" * 64 not in py.text
    assert len(py.name_expressions) == 3
    raw = _generate(GOLDEN_SPECS["merge_sort_u8_raw_state_wide_sm90"])
    assert raw.extern_symbols == ("my_raw_cmp",)
    assert "unsigned char bytes[12]" in raw.text and "unsigned long long" in raw.text
    builtin = _generate(GOLDEN_SPECS["merge_sort_f2_less_pairs_c16_sm90"])
    # NaN last (numpy's order): a strict weak order also over NaN keys
    assert builtin.extern_symbols == () and "return ((a < b) || (__hisnan(b) && !__hisnan(a)));" in builtin.text
    assert "#include <cuda_fp16.h>" in builtin.text and "cuprims_bytes_16_8" in builtin.text
    for src in (py, raw, builtin):  # arrays: read as pointers, no iterator header
        assert "cuprims_iterator.cuh" not in src.text and "cuprims_keys_in_t" not in src.text
    it = _described("merge_sort_reverse_keys_zip_values_captured_sm90").source(90)
    assert "#include <cuprims_iterator.cuh>" in it.text and "cuprims_values_in_t" in it.name_expressions[0]
    assert "cuprims_keys_in_t" in it.name_expressions[2]  # the merge kernel names the block sort's inputs
    assert "cuprims_keys_in_t" not in it.name_expressions[1]  # the partition kernel reads the output
    assert "unsigned char bytes[16]; } state;" in it.text  # the captured array: the comparator's state
    assert it.extern_symbols == ("cuprims_op_0",)


# ------------------------------------------------------------------- argument errors

@pytest.mark.parametrize("op,key", [(OpKind.PLUS, np.int32), (OpKind.LESS_EQUAL, np.int32),
                                    (OpKind.LESS, KEY_STRUCT), (OpKind.GREATER, np.complex64)],
                         ids=["plus", "less-equal", "struct", "complex"])
def test_rejected_builtins(op, key):
    with pytest.raises(ArgumentError) as info:
        make_merge_sort(d_in_keys=ProxyArray(key), d_out_keys=ProxyArray(key), op=op, compute_capability=90)
    assert info.value.argument == "op"


@pytest.mark.parametrize("kwargs,argument", [
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=None), "d_out_keys"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.uint32)), "d_out_keys"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=ProxyArray(np.int8)),
     "d_out_values"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_out_values=ProxyArray(np.int8)),
     "d_out_values"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=ProxyArray(np.int8),
          d_out_values=ProxyArray(np.uint8)), "d_out_values"),
    (dict(d_in_keys=None, d_out_keys=ProxyArray(np.int32)), "d_in_keys"),
], ids=["no-out", "out-dtype", "no-out-values", "out-values-without-in", "values-dtype", "no-in"])
def test_build_argument_errors(kwargs, argument):
    with pytest.raises(ArgumentError) as info:
        make_merge_sort(op=OpKind.LESS, compute_capability=90, **kwargs)
    assert info.value.argument == argument


@pytest.mark.parametrize("kwargs,argument", [
    (dict(d_in_keys=DiscardIterator(P(i4)), d_out_keys=P(i4)), "d_in_keys"),
    (dict(d_in_keys=TransformOutputIterator(P(i4), negate), d_out_keys=P(i4)), "d_in_keys"),
    (dict(d_in_keys=ZipIterator(P(i4), DiscardIterator(P(f4))), d_out_keys=P(KEY_STRUCT)), "d_in_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=DiscardIterator(P(i8)), d_out_values=P(i8)),
     "d_in_values"),
    (dict(d_in_keys=P(i4), d_out_keys=CountingIterator(np.int32(0))), "d_out_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=ReverseIterator(P(i4))), "d_out_keys"),  # writable, still not an output
    (dict(d_in_keys=CountingIterator(np.int32(0)), d_out_keys=ReverseIterator(P(i4))), "d_out_keys"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=CountingIterator(np.int64(0)),
          d_out_values=DiscardIterator(P(i8))), "d_out_values"),
    (dict(d_in_keys=CountingIterator(np.float64(0)), d_out_keys=P(i4)), "d_out_keys"),  # not same_kind
    (dict(d_in_keys=CountingIterator(np.int32(0)), d_out_keys=None), "d_out_keys"),
    (dict(d_in_keys=ZipIterator(P(i4), P(np.int8)), d_out_keys=P(KEY_STRUCT)), "d_out_keys"),  # another layout
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=CountingIterator(np.float32(0)), d_out_values=P(i8)),
     "d_out_values"),
    (dict(d_in_keys=P(i4), d_out_keys=P(i4), d_in_values=CountingIterator(np.int64(0))), "d_out_values"),
], ids=["discard-keys", "transform-output-keys", "zip-over-discard", "discard-values", "out-keys-counting",
        "out-keys-reverse", "both-keys-iterators", "out-values-discard", "keys-dtype", "no-out-for-iterator",
        "zip-layout", "values-dtype", "no-out-values"])
def test_bad_iterators_are_named_before_any_compile(kwargs, argument):
    before = cuprims.cache_info()
    with pytest.raises(ArgumentError) as info:
        make_merge_sort(op=OpKind.LESS, compute_capability=90, **kwargs)
    assert info.value.argument == argument
    after = cuprims.cache_info()
    assert all(after[k] == before[k] for k in ("numba_compiles", "nvrtc_compiles", "links"))


def test_radix_sort_still_takes_no_iterators():
    from cuprims import SortOrder, make_radix_sort

    with pytest.raises(ArgumentError) as info:
        make_radix_sort(d_in_keys=CountingIterator(np.uint32(0)), d_out_keys=P(np.uint32), d_in_values=None,
                        d_out_values=None, order=SortOrder.ASCENDING, compute_capability=90)
    assert info.value.argument == "d_in_keys"


def test_signature_is_keyword_only():
    import inspect

    for fn in (make_merge_sort, merge_sort, ms.MergeSort.__call__):
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), fn
    assert list(inspect.signature(make_merge_sort).parameters) == [
        "d_in_keys", "d_in_values", "d_out_keys", "d_out_values", "op", "compute_capability"]
    assert list(inspect.signature(merge_sort).parameters) == [
        "d_in_keys", "d_in_values", "d_out_keys", "d_out_values", "num_items", "op", "stream"]
    assert list(inspect.signature(ms.MergeSort.__call__).parameters)[1:] == [
        "temp_storage", "d_in_keys", "d_in_values", "d_out_keys", "d_out_values", "num_items", "op", "stream"]


# =============================================================== fake device

def _cmp_key(op):
    def cmp(a, b):
        if op(a, b):
            return -1
        if op(b, a):
            return 1
        return 0
    return functools.cmp_to_key(cmp)


class FakeMergeDevice:
    """Emulates CUB's merge-sort kernels with a Python comparator (``handles`` are
    (role, offset_size) tuples). An input given as an iterator's state (bytes) is read by
    ``readers[role](state, lo, hi)`` (a test's decoder of that iterator kind)."""

    def __init__(self, mem, key_dt, value_dt, op, tile, threads, vsmem, readers=None):
        self.mem, self.kdt, self.op = mem, np.dtype(key_dt), op
        self.vdt = None if value_dt is None else np.dtype((np.void, np.dtype(value_dt).itemsize))
        self.tile, self.threads, self.vsmem = tile, threads, vsmem
        self.readers = readers or {}
        self.launches = []
        self.partitioned = None

    def _load(self, role, src, lo, hi, dt):
        if isinstance(src, bytes):
            return np.ascontiguousarray(self.readers[role](src, lo, hi)).view(dt)
        return self.mem.view(src + lo * dt.itemsize, dt, hi - lo).copy()

    def launch(self, kernel, grid, block, stream, params, shared=0):
        role, osize = kernel
        self.launches.append((role, grid, block, stream, params))
        getattr(self, "_" + role)(grid, block, osize, *params)

    def _records(self, keys):
        return keys.view(np.recarray) if self.kdt.names else keys

    def _perm(self, keys) -> np.ndarray:
        recs = self._records(keys)
        return np.array(sorted(range(len(keys)), key=lambda i: _cmp_key(self.op)(recs[i])), dtype=np.int64)

    def _is_sorted(self, keys) -> bool:
        recs = self._records(keys)
        return not any(self.op(recs[i + 1], recs[i]) for i in range(len(keys) - 1))

    def _check_vsmem(self, vsmem, grid):
        if self.vsmem:
            self.mem.view(vsmem, np.uint8, grid * self.vsmem)
        else:
            assert vsmem == 0

    def _block_sort(self, grid, block, osize, ping, k_in, v_in, k_out, v_out, n, k_tmp, v_tmp, state, vsmem):
        assert grid == -(-n // self.tile) and block == self.threads
        self._check_vsmem(vsmem, grid)
        dst_k, dst_v = (k_out, v_out) if ping == b"\1" else (k_tmp, v_tmp)
        for t in range(grid):
            lo, hi = t * self.tile, min(n, (t + 1) * self.tile)
            keys = self._load("keys", k_in, lo, hi, self.kdt)
            perm = self._perm(keys)
            self.mem.view(dst_k + lo * self.kdt.itemsize, self.kdt, hi - lo)[:] = keys[perm]
            if self.vdt is not None:
                vals = self._load("values", v_in, lo, hi, self.vdt)
                self.mem.view(dst_v + lo * self.vdt.itemsize, self.vdt, hi - lo)[:] = vals[perm]
            else:
                assert v_in == v_out == v_tmp == 0

    def _partition(self, grid, block, osize, ping, keys_ping, keys_pong, n, num_partitions, partitions, state, target,
                   tile):
        assert grid * block >= num_partitions == -(-n // self.tile) + 1 and tile == self.tile
        self.mem.view(partitions, np.dtype(f"u{osize}"), num_partitions)[:] = 0
        src = keys_ping if ping == b"\1" else keys_pong
        self.mem.view(src, self.kdt, n)  # bounds
        self.partitioned = (ping, target)

    def _merge(self, grid, block, osize, ping, keys_ping, items_ping, n, keys_pong, items_pong, state, partitions,
               target, vsmem):
        assert self.partitioned == (ping, target), "merge without a partition pass for the same round"
        assert grid == -(-n // self.tile) and block == self.threads
        self._check_vsmem(vsmem, grid)
        src_k, src_v, dst_k, dst_v = ((keys_ping, items_ping, keys_pong, items_pong) if ping == b"\1"
                                      else (keys_pong, items_pong, keys_ping, items_ping))
        group = self.tile * target
        run = group // 2
        ks = self.kdt.itemsize
        for lo in range(0, n, group):
            hi = min(n, lo + group)
            keys = self.mem.view(src_k + lo * ks, self.kdt, hi - lo).copy()
            assert self._is_sorted(keys[:run]) and self._is_sorted(keys[run:]), "merging unsorted runs"
            perm = self._perm(keys)
            self.mem.view(dst_k + lo * ks, self.kdt, hi - lo)[:] = keys[perm]
            if self.vdt is not None:
                vs = self.vdt.itemsize
                vals = self.mem.view(src_v + lo * vs, self.vdt, hi - lo).copy()
                self.mem.view(dst_v + lo * vs, self.vdt, hi - lo)[:] = vals[perm]


class FakeBuilds:
    def __init__(self, meta):
        self.meta, self.archs = meta, [90]

    def build_for(self, archs, objs):
        pass

    def loaded(self, device, objs=None):
        roles = ("block_sort", "partition", "merge")
        return SimpleNamespace(module=None, handles=tuple((r, self.meta["offset_size"]) for r in roles),
                               names=roles, meta=self.meta, device=device, arch=90, extra={})


@pytest.fixture
def fake_merge(monkeypatch):
    mem = FakeMemory()
    state = {}

    def make(key_dt, value_dt=None, op=less, threads=4, items=3, vsmem=0, keys_in=None, values_in=None,
             emulate=None, readers=None):
        """A sorter over placeholders (or the build-time iterators ``keys_in``/``values_in``);
        the device compares with ``emulate`` (default: ``op`` itself)."""
        def meta(wide):
            return dict(key_size=np.dtype(key_dt).itemsize,
                        value_size=0 if value_dt is None else np.dtype(value_dt).itemsize,
                        offset_size=8 if wide else 4, threads=threads, items=items, block_sort_vsmem=vsmem,
                        merge_vsmem=vsmem // 2, partition_threads=256)
        monkeypatch.setattr(ms.MergeSort, "_builds_of", lambda self, variant: FakeBuilds(meta(bool(variant))))
        py_op = op if emulate is None else emulate
        if isinstance(py_op, OpKind):
            py_op = {OpKind.LESS: lambda a, b: a < b, OpKind.GREATER: lambda a, b: a > b}[py_op]
        dev = FakeMergeDevice(mem, key_dt, value_dt, py_op, threads * items, threads, vsmem, readers)
        state["dev"] = dev
        obj = make_merge_sort(d_in_keys=ProxyArray(key_dt) if keys_in is None else keys_in,
                              d_out_keys=ProxyArray(key_dt),
                              d_in_values=values_in if values_in is not None else
                              None if value_dt is None else ProxyArray(value_dt),
                              d_out_values=None if value_dt is None else ProxyArray(value_dt), op=op,
                              compute_capability=90)
        return obj, dev

    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "current_device", lambda: 0)
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "launch", lambda *a, **k: state["dev"].launch(*a, **k))
    allocations = []

    def alloc_async(nbytes, stream, device=-1):
        ptr = mem.alloc(nbytes, skew=32)
        allocations.append((ptr, nbytes, stream))
        return ptr

    monkeypatch.setattr(driver, "alloc_async", alloc_async)
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))
    make.mem, make.allocations = mem, allocations
    return make


def _stable_reference(keys, values, op):
    recs = keys.view(np.recarray) if keys.dtype.names else keys
    perm = sorted(range(len(keys)), key=lambda i: _cmp_key(op)(recs[i]))
    return keys[perm], None if values is None else values[perm]


def _run(obj, mem, keys, values, n, op, *, in_place=False, stream=None):
    kin = FakeArray(mem, keys)
    vin = None if values is None else FakeArray(mem, values)
    kout = kin if in_place else FakeArray.empty(mem, keys.size, keys.dtype)
    vout = None if values is None else (vin if in_place else FakeArray.empty(mem, values.size, values.dtype))
    args = dict(d_in_keys=kin, d_in_values=vin, d_out_keys=kout, d_out_values=vout, num_items=n, op=op)
    nbytes = obj(temp_storage=None, **args)
    temp = FakeArray(mem, np.zeros(nbytes, np.uint8), skew=24)
    assert obj(temp_storage=temp, stream=stream, **args) is None
    if not in_place:
        assert np.array_equal(kin.get(), keys)
    return kout.get(), None if vout is None else vout.get(), nbytes


@pytest.mark.parametrize("in_place", [False, True], ids=["copy", "in-place"])
@pytest.mark.parametrize("op", [OpKind.LESS, OpKind.GREATER, less], ids=["LESS", "GREATER", "python"])
def test_fake_device_sizes_and_rounds(fake_merge, op, in_place):
    obj, dev = fake_merge(np.int32, np.int64, op)
    py = dev.op
    rng = np.random.default_rng(2)
    tile = dev.tile
    for n in (0, 1, tile - 1, tile, tile + 1, 2 * tile, 3 * tile + 5, 8 * tile, 8 * tile + 1, 300):
        keys = rng.integers(0, 10, n).astype(np.int32)  # many ties: stability shows
        values = np.arange(n, dtype=np.int64)
        got_k, got_v, _ = _run(obj, fake_merge.mem, keys, values, n, op, in_place=in_place)
        want_k, want_v = _stable_reference(keys, values, py)
        assert np.array_equal(got_k[:n], want_k) and np.array_equal(got_v[:n], want_v), n


def test_fake_device_struct_keys_keys_only(fake_merge):
    obj, dev = fake_merge(KEY_STRUCT, None, struct_less)
    rng = np.random.default_rng(4)
    for n in (5, 40, 97):
        keys = np.zeros(n, KEY_STRUCT)
        keys["a"] = rng.integers(0, 4, n)
        keys["b"] = rng.integers(0, 3, n)
        got_k, _, _ = _run(obj, fake_merge.mem, keys, None, n, struct_less)
        want_k, _ = _stable_reference(keys, None, struct_less)
        assert np.array_equal(got_k, want_k)


def test_fake_device_temp_layout_vsmem_and_stream(fake_merge):
    obj, dev = fake_merge(np.float32, np.float64, OpKind.LESS, vsmem=384)
    mem = fake_merge.mem
    n = 100
    tiles = -(-n // dev.tile)
    keys = np.random.default_rng(0).random(n).astype(np.float32)
    got_k, got_v, nbytes = _run(obj, mem, keys, np.arange(n, dtype=np.float64), n, OpKind.LESS, stream=55)
    r = lambda x: -(-x // 256) * 256  # noqa: E731
    assert nbytes == r((tiles + 1) * 4) + r(n * 4) + r(n * 8) + r(tiles * 384) + 255
    assert np.array_equal(got_k, np.sort(keys))
    assert all(entry[3] == 55 for entry in dev.launches)
    rounds = (tiles - 1).bit_length()
    roles = [entry[0] for entry in dev.launches[-(1 + 2 * rounds):]]
    assert roles == ["block_sort"] + ["partition", "merge"] * rounds


def test_fake_device_wide_offsets_and_one_shot(fake_merge, monkeypatch):
    monkeypatch.setattr(ms, "NARROW_MAX_ITEMS", 50)
    obj, dev = fake_merge(np.uint16, None, OpKind.GREATER)
    mem = fake_merge.mem
    rng = np.random.default_rng(8)
    keys = rng.integers(0, 1000, 200).astype(np.uint16)
    kin = FakeArray(mem, keys)
    kout = FakeArray.empty(mem, 200, np.uint16)
    merge_sort(d_in_keys=kin, d_out_keys=kout, num_items=200, op=OpKind.GREATER, stream=9)
    assert np.array_equal(kout.get(), np.sort(keys)[::-1])
    (ptr, nbytes, stream), = fake_merge.allocations
    assert stream == 9 and mem.freed == [ptr]
    one_shot_obj = make_merge_sort(d_in_keys=kin, d_out_keys=kout, op=OpKind.GREATER)  # what merge_sort used
    assert dev.launches[-1][4][3] == 200 and one_shot_obj._plans[1].offset_size == 8
    merge_sort(d_in_keys=kin, d_out_keys=kout, num_items=0, op=OpKind.GREATER)
    assert len(fake_merge.allocations) == 1


def test_fake_device_call_argument_errors(fake_merge):
    obj, dev = fake_merge(np.int32, np.int32, OpKind.LESS)
    mem = fake_merge.mem
    a, b = FakeArray(mem, np.zeros(10, np.int32)), FakeArray(mem, np.zeros(10, np.int32))
    c, d = FakeArray(mem, np.zeros(10, np.int32)), FakeArray(mem, np.zeros(10, np.int32))
    f = FakeArray(mem, np.zeros(10, np.float32))
    short = FakeArray(mem, np.zeros(4, np.int32))

    class Shifted:  # a view of ``a`` starting 2 items in: partly overlaps it
        __cuda_array_interface__ = dict(a.__cuda_array_interface__, data=(a.ptr + 8, False))

    def call(**kw):
        args = dict(temp_storage=None, d_in_keys=a, d_in_values=c, d_out_keys=b, d_out_values=d, num_items=10,
                    op=OpKind.LESS)
        args.update(kw)
        return obj(**args)

    assert call() > 1
    assert call(d_out_keys=a, d_out_values=c) > 1  # in place
    for kw, argument in [
        (dict(d_out_keys=short), "d_out_keys"), (dict(d_in_keys=f), "d_in_keys"),
        (dict(d_out_keys=Shifted()), "d_out_keys"), (dict(d_out_values=a), "d_out_values"),
        (dict(d_out_values=None), "d_out_values"), (dict(d_in_values=None, d_out_values=None), "d_in_values"),
        (dict(d_out_keys=None), "d_out_keys"), (dict(num_items=-2), "num_items"),
    ]:
        with pytest.raises(ArgumentError) as info:
            call(**kw)
        assert info.value.argument == argument, kw


def test_raw_comparator_state_travels_by_value(fake_merge):
    op = RawOp(ltoir=stub_ltoir("my_cmp", 4), name="my_cmp", state=b"\1\2\3\4\5", state_alignment=4)
    obj, dev = fake_merge(np.int32, None, OpKind.LESS)  # device emulation uses LESS
    raw_obj = ms.MergeSort(ms._describe(ProxyArray(np.int32), None, ProxyArray(np.int32), None, op), 90, (op,))
    assert functor_size(raw_obj.desc.op) == 8
    keys = np.arange(30, dtype=np.int32)[::-1].copy()
    kin = FakeArray(fake_merge.mem, keys)
    tmp = FakeArray(fake_merge.mem, np.zeros(4096, np.uint8))
    raw_obj(temp_storage=tmp, d_in_keys=kin, d_in_values=None, d_out_keys=kin, d_out_values=None, num_items=30,
            op=op)
    states = {entry[4][8] for entry in dev.launches if entry[0] == "block_sort"}
    assert states == {b"\1\2\3\4\5\0\0\0"}
    op2 = RawOp(ltoir=stub_ltoir("my_cmp", 4), name="my_cmp", state=b"\x09\x09\x09\x09\x09", state_alignment=4)
    raw_obj(temp_storage=tmp, d_in_keys=kin, d_in_values=None, d_out_keys=kin, d_out_values=None, num_items=30,
            op=op2)
    assert dev.launches[-1][4][6] == b"\x09\x09\x09\x09\x09\0\0\0"
    assert np.array_equal(kin.get(), np.arange(30, dtype=np.int32))


# ------------------------------------------------------------------- iterators and captured arrays, per call

def _pointer_word(state: bytes, word: int = 0) -> int:
    return struct.unpack_from("<Q", state, 8 * word)[0]


def _reverse_reader(mem, dt):
    """Items [lo, hi) of a ReverseIterator over an array: its state is the last item's
    address, then the position (0)."""
    dt = np.dtype(dt)

    def read(state, lo, hi):
        assert len(state) == 16 and _pointer_word(state, 1) == 0
        last = _pointer_word(state)
        return mem.view(last - (hi - 1) * dt.itemsize, dt, hi - lo)[::-1].copy()
    return read


def _counting_reader(dt):
    dt = np.dtype(dt)

    def read(state, lo, hi):
        assert len(state) == 16 and _pointer_word(state, 1) == 0
        start = np.frombuffer(state[:dt.itemsize], dt)[0]
        return (start + np.arange(lo, hi)).astype(dt)
    return read


@pytest.mark.parametrize("n", [0, 1, 11, 12, 13, 100, 301])
def test_fake_device_reverse_keys_counting_values(fake_merge, n):
    """An argsort of reversed keys: the keys through a ReverseIterator, the values counted
    from a start that is per-call state."""
    mem = fake_merge.mem
    obj, dev = fake_merge(np.int32, np.int64, OpKind.LESS, keys_in=ReverseIterator(P(i4)),
                          values_in=CountingIterator(np.int64(0)),
                          readers={"keys": _reverse_reader(mem, np.int32), "values": _counting_reader(np.int64)})
    keys = np.random.default_rng(n).integers(0, 6, n).astype(np.int32)
    kin = FakeArray(mem, keys)
    for start in (0, 1000):
        kout, vout = FakeArray.empty(mem, n, np.int32), FakeArray.empty(mem, n, np.int64)
        args = dict(d_in_keys=ReverseIterator(kin), d_in_values=CountingIterator(np.int64(start)), d_out_keys=kout,
                    d_out_values=vout, num_items=n, op=OpKind.LESS)
        temp = FakeArray(mem, np.zeros(obj(temp_storage=None, **args), np.uint8))
        obj(temp_storage=temp, **args)
        order = np.argsort(keys[::-1], kind="stable")
        assert np.array_equal(kout.get(), keys[::-1][order]) and np.array_equal(vout.get(), order + start)
        assert np.array_equal(kin.get(), keys)
    if n:
        sort_launch = [entry for entry in dev.launches if entry[0] == "block_sort"][-1]
        assert [type(p) for p in sort_launch[4][1:3]] == [bytes, bytes]  # states by value, not pointers


def test_fake_device_iterator_call_errors(fake_merge):
    mem = fake_merge.mem
    obj, _ = fake_merge(np.int32, np.int64, OpKind.LESS, keys_in=ReverseIterator(P(i4)),
                        values_in=CountingIterator(np.int64(0)))
    a, o = FakeArray(mem, np.zeros(10, np.int32)), FakeArray(mem, np.zeros(10, np.int32))
    v = FakeArray(mem, np.zeros(10, np.int64))
    good = dict(temp_storage=None, d_in_keys=ReverseIterator(a), d_in_values=CountingIterator(np.int64(3)),
                d_out_keys=o, d_out_values=v, num_items=10, op=OpKind.LESS)
    assert obj(**good) > 1
    for kw, argument in [
        (dict(d_in_keys=a), "d_in_keys"),  # an array where the build took an iterator
        (dict(d_in_keys=CountingIterator(np.int32(0))), "d_in_keys"),  # another iterator kind
        (dict(d_in_values=CountingIterator(np.int32(0))), "d_in_values"),
        (dict(d_in_values=None, d_out_values=None), "d_in_values"),
        (dict(d_out_keys=ReverseIterator(o)), "d_out_keys"),
        (dict(d_in_keys=ReverseIterator(FakeArray(mem, np.zeros(4, np.int32)))), "d_in_keys"),  # too short
        (dict(d_out_values=FakeArray(mem, np.zeros(4, np.int64))), "d_out_values"),
    ]:
        with pytest.raises(ArgumentError) as info:
            obj(**{**good, **kw})
        assert info.value.argument == argument, kw
    arrays, _ = fake_merge(np.int32, np.int64, OpKind.LESS)
    with pytest.raises(ArgumentError) as info:  # built for arrays, given an iterator
        arrays(**good)
    assert info.value.argument == "d_in_keys"


def test_fake_device_captured_array_is_bound_per_call(fake_merge, monkeypatch):
    """The comparator's captured array travels as its state in every kernel's parameters,
    read from the global at each call; without op= the call is refused."""
    mem = fake_merge.mem
    obj, dev = fake_merge(np.float32, None, scaled_less, emulate=lambda a, b: a < b)
    assert obj.desc.op.state_size == 16
    n = 50
    keys = np.random.default_rng(3).random(n).astype(np.float32)
    kin, kout = FakeArray(mem, keys), FakeArray.empty(mem, n, np.float32)
    args = dict(d_in_keys=kin, d_in_values=None, d_out_keys=kout, d_out_values=None, num_items=n, op=scaled_less)
    temp = None
    for size in (1, 3):
        scale = FakeArray(mem, np.full(size, 2.0, np.float32))
        monkeypatch.setattr(sys.modules[__name__], "SCALE", scale)
        if temp is None:  # (the size query binds the comparator's arrays too)
            temp = FakeArray(mem, np.zeros(obj(temp_storage=None, **args), np.uint8))
        first = len(dev.launches)
        obj(temp_storage=temp, **args)
        launches = dev.launches[first:]
        states = {entry[4][8 if entry[0] == "block_sort" else 6] for entry in launches}
        assert states == {struct.pack("<Qq", scale.ptr, size)} and len(launches) > 1
        assert np.array_equal(kout.get(), np.sort(keys))
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=temp, **{**args, "op": None})
    assert info.value.argument == "op"
