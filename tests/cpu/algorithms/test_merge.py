"""Merge on the CPU: ahead-of-time sm_90 builds for several key and value dtypes, a Python
comparator, struct keys, iterators and the 64-bit-offset variant; a golden, kernel
parameters against the cubin, CUB's sm_90 tile facts read back through ``cuprims_meta``,
and bad arguments named before anything is compiled or launched."""

from __future__ import annotations

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, fake_driver_memory, render_source
from cuprims import CountingIterator, DiscardIterator, OpKind, ProxyArray as P
from cuprims.errors import ArgumentError, ArgumentTypeError
from twins import KEY_STRUCT, struct_less

i4, i8, f4, f8 = np.int32, np.int64, np.float32, np.float64


def _make(key=i4, value=None, op=OpKind.LESS, **over):
    v = None if value is None else P(value)
    kw = dict(d_in_keys1=P(key), d_in_values1=v, d_in_keys2=P(key), d_in_values2=v, d_out_keys=P(key),
              d_out_values=v, op=op, compute_capability=90)
    kw.update(over)
    return cuprims.make_merge(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make(i4, i4)
    check_golden("merge_i4_i4_less_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    # CUB's sm_90 merge policy: 512 threads, 15 nominal 4-byte items (7 for 8-byte pairs),
    # keys and values copied in bulk into shared memory
    assert (meta["threads"], meta["items"], meta["vsmem"]) == (512, 7, 0)
    assert meta["bulk_keys"] == meta["bulk_values"] == 1 and meta["offset_size"] == 4


@pytest.mark.parametrize("key, value, items", [(np.int8, None, 15), (np.uint16, np.float32, 10), (i4, None, 15),
                                               (i8, i8, 3), (f4, np.int8, 12), (f8, None, 7),
                                               (np.float16, np.complex128, 3)])
def test_builds_for_key_and_value_types(shared_cache, key, value, items):
    obj = _make(key, value)
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["items"] == items and meta["key_size"] == np.dtype(key).itemsize
    assert meta["value_size"] == (0 if value is None else np.dtype(value).itemsize)


def test_python_comparator_and_struct_keys(shared_cache):
    check_kernel_params(_make(f4, None, op=lambda a, b: a > b), 90)
    obj = _make(KEY_STRUCT, i4, op=struct_less)
    check_kernel_params(obj, 90)
    assert not obj._builds.result(90).meta["bulk_keys"]    # an 8-byte struct aligned to 4: no bulk copy


def test_iterators_in_and_out(shared_cache):
    obj = _make(i8, i8, d_in_keys1=CountingIterator(np.int64(0)), d_in_values1=CountingIterator(np.int64(0)),
                d_out_keys=DiscardIterator(P(i8)))
    check_kernel_params(obj, 90)
    assert not obj.desc.d_in_keys1.is_pointer and obj.desc.d_in_keys2.is_pointer
    assert not obj.desc.d_out_keys.is_pointer


def test_wide_offsets_variant(shared_cache):
    obj = _make(np.uint8)
    wide = obj._builds_of(1)
    wide.build_for([90], obj._objects(OpKind.LESS))
    assert wide.result(90).meta["offset_size"] == 8
    assert obj.desc.variant(1).kernel_params()[0][1] == "i64"


@pytest.mark.parametrize("over, argument", [
    (dict(d_in_values1=P(i4), d_in_values2=None, d_out_values=P(i4)), "d_in_values2"),
    (dict(d_in_values1=None, d_in_values2=P(i4), d_out_values=P(i4)), "d_in_values1"),
    (dict(d_in_values1=P(i4), d_in_values2=P(i4), d_out_values=None), "d_out_values"),
    (dict(d_in_keys2=P(i8)), "d_in_keys2"),
    (dict(d_out_keys=P(f4)), "d_out_keys"),
    (dict(d_in_values1=P(i4), d_in_values2=P(f4), d_out_values=P(i4)), "d_in_values2"),
    (dict(d_in_values1=P(i4), d_in_values2=P(i4), d_out_values=P(i8)), "d_out_values"),
    (dict(op=OpKind.PLUS), "op"),
    (dict(op=None), "op"),
    (dict(d_in_keys1=P(KEY_STRUCT), d_in_keys2=P(KEY_STRUCT), d_out_keys=P(KEY_STRUCT)), "op"),
    (dict(d_in_keys1=P(np.complex64), d_in_keys2=P(np.complex64), d_out_keys=P(np.complex64)), "op"),
])
def test_bad_build_arguments_are_named(shared_cache, over, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**over)
    assert info.value.argument == argument


def test_missing_keyword_is_named():
    with pytest.raises(ArgumentTypeError) as info:
        cuprims.make_merge(d_in_keys1=P(i4), d_in_keys2=P(i4), d_out_keys=P(i4), d_in_values1=None,
                           d_in_values2=None, op=OpKind.LESS)
    assert "d_out_values" in str(info.value)


def test_call_arguments_are_checked_before_launching(shared_cache):
    obj = _make(i4)
    kw = dict(temp_storage=None, d_in_keys1=P(i4), d_in_values1=None, d_in_keys2=P(i4), d_in_values2=None,
              d_out_keys=P(i4), d_out_values=None, num_items1=1, num_items2=1)
    for name, bad in (("num_items1", -1), ("num_items2", 1.5)):
        with pytest.raises(ArgumentError) as info:
            obj(**{**kw, name: bad})
        assert info.value.argument == name
    with pytest.raises(ArgumentError) as info:
        obj(**{**kw, "d_in_values1": P(i4)})
    assert info.value.argument == "d_in_values1"


# ----------------------------------------------------------- the dispatch on a fake device

class FakeMergeDevice:
    """The two kernels in numpy: the partition kernel's merge-path search (how many items of
    the first sequence go before each diagonal, ties to the first), and the merge kernel's
    tiles, each merging only the two ranges its diagonals bound, run last tile first."""

    def __init__(self, mem, plan, pairs):
        self.mem, self.plan, self.pairs, self.launches = mem, plan, pairs, []

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append((kernel, grid, block))
        if kernel == "partition":
            k1, n1, k2, n2, diagonals, key1_beg, _ = params
            assert block == self.plan.partition_threads and grid * block >= diagonals
            a, b = self.mem.view(k1, i8, n1), self.mem.view(k2, i8, n2)
            out = self.mem.view(key1_beg, i4, diagonals)
            for d in range(diagonals):
                diag = min(d * self.plan.tile, n1 + n2)
                lo, hi = max(0, diag - n2), min(diag, n1)
                while lo < hi:       # the first i with b[diag - 1 - i] < a[i]
                    mid = (lo + hi) // 2
                    if b[diag - 1 - mid] < a[mid]:
                        hi = mid
                    else:
                        lo = mid + 1
                out[d] = lo
            return
        assert kernel == "merge" and block == self.plan.threads
        k1, v1, n1, k2, v2, n2, ko, vo, _, key1_beg, vsmem = params
        n = n1 + n2
        assert grid == -(-n // self.plan.tile) and vsmem == 0
        starts = self.mem.view(key1_beg, i4, grid + 1)
        a, b, out = self.mem.view(k1, i8, n1), self.mem.view(k2, i8, n2), self.mem.view(ko, i8, n)
        if self.pairs:
            va, vb, vout = self.mem.view(v1, i4, n1), self.mem.view(v2, i4, n2), self.mem.view(vo, i4, n)
        for t in reversed(range(grid)):
            d0, d1 = t * self.plan.tile, min((t + 1) * self.plan.tile, n)
            a0, a1 = starts[t], starts[t + 1]
            b0, b1 = d0 - a0, d1 - a1
            keys = np.concatenate([a[a0:a1], b[b0:b1]])
            order = np.argsort(keys, kind="stable")
            out[d0:d1] = keys[order]
            if self.pairs:
                vout[d0:d1] = np.concatenate([va[a0:a1], vb[b0:b1]])[order]


@pytest.fixture
def fake(monkeypatch, shared_cache):
    from types import SimpleNamespace

    from cuprims._runtime import driver
    from cuprims.algorithms.merge import api

    mem = fake_driver_memory(monkeypatch, skew=64)

    def make(pairs):
        obj = _make(i8, i4 if pairs else None)
        plan = api._Plan(SimpleNamespace(meta=obj._builds.result(90).meta, handles=("partition", "merge")))
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeMergeDevice(mem, plan, pairs)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


@pytest.mark.parametrize("pairs", [False, True], ids=["keys", "pairs"])
@pytest.mark.parametrize("sizes", [(0, 0), (1, 0), (0, 5), (1536, 1536), (1537, 1), (5, 4000), (4000, 7), (9000, 5003)])
def test_fake_device_against_numpy(fake, pairs, sizes):
    from cpu_helpers import FakeArray

    obj, dev = fake(pairs)
    n1, n2 = sizes
    rng = np.random.default_rng(n1 * 7 + n2)
    h1, h2 = np.sort(rng.integers(0, 40, n1)).astype(i8), np.sort(rng.integers(0, 40, n2)).astype(i8)
    mem, n = fake.mem, n1 + n2
    kw = dict(d_in_keys1=FakeArray(mem, h1), d_in_keys2=FakeArray(mem, h2), d_out_keys=FakeArray.empty(mem, n, i8),
              d_in_values1=FakeArray(mem, np.arange(n1, dtype=i4)) if pairs else None,
              d_in_values2=FakeArray(mem, np.arange(n1, n, dtype=i4)) if pairs else None,
              d_out_values=FakeArray.empty(mem, n, i4) if pairs else None, num_items1=n1, num_items2=n2)
    need = obj(temp_storage=None, **kw)
    tiles = -(-n // dev.plan.tile)
    assert need == 1 if n == 0 else (tiles + 1) * 4 <= need <= (tiles + 1) * 4 + 511
    obj(temp_storage=FakeArray(mem, np.zeros(need, np.uint8)), **kw)
    order = np.argsort(np.concatenate([h1, h2]), kind="stable")
    assert kw["d_out_keys"].get()[:n].tolist() == np.concatenate([h1, h2])[order].tolist()
    if pairs:
        assert kw["d_out_values"].get()[:n].tolist() == order.tolist()
    assert [k for k, *_ in dev.launches] == ([] if n == 0 else ["partition", "merge"])


def test_fake_device_refuses_an_output_overlapping_an_input(fake):
    from cpu_helpers import FakeArray

    obj, dev = fake(False)
    a = FakeArray(fake.mem, np.arange(10, dtype=i8))
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=None, d_in_keys1=a, d_in_values1=None, d_in_keys2=FakeArray(fake.mem, np.arange(3, dtype=i8)),
            d_in_values2=None, d_out_keys=a, d_out_values=None, num_items1=5, num_items2=3)
    assert info.value.argument == "d_out_keys" and not dev.launches
