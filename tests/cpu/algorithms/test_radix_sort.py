"""Radix sort without a GPU: AOT builds for sm_90/sm_80, kernel parameter sizes checked
against the compiled cubin, golden sources, argument errors, and the host dispatch run
against a fake device that emulates CUB's kernels in numpy (temporary-storage layout,
passes, portions, ping-pong, DoubleBuffer selector, 64-bit offsets).

Regenerate the golden sources after an intended codegen change with::

    CUPRIMS_UPDATE_GOLDENS=1 python -m pytest tests/cpu/algorithms/test_radix_sort.py -k golden
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cuprims import ProxyArray, SortOrder
from cuprims._runtime import driver
from cuprims._value_types import value_type
from cuprims.algorithms import sort_common
from cuprims.algorithms.radix_sort import api as rs
from cuprims.algorithms.radix_sort.api import make_radix_sort, radix_sort
from cuprims.algorithms.radix_sort.source import radix_sort_source
from cuprims.algorithms.sort_common import DoubleBuffer
from cuprims.errors import ArgumentError
from cpu_helpers import FakeArray, FakeMemory, FakePack, check_golden, kernel_param_sizes, pack_sizes, render_source
from twins import STRUCT, ordered_bits, random_keys, sorted_keys  # the radix order's model, test_radix_sort_gpu's too

ELF = b"\x7fELF"


# --------------------------------------------------------------------- cubin helpers

def check_param_layout(builds_result, source, kinds_per_kernel) -> None:
    assert len(source.name_expressions) == len(kinds_per_kernel)
    for name, kinds in zip(source.name_expressions, kinds_per_kernel):
        got = kernel_param_sizes(builds_result.cubin, builds_result.kernels[name])
        assert got == pack_sizes(kinds), (name, got, kinds)


# ------------------------------------------------------------------- AOT builds

def _radix(key, value=None, order=SortOrder.ASCENDING, cc=90, double_buffer=False):
    if double_buffer:
        kin = DoubleBuffer(ProxyArray(key), ProxyArray(key))
        vin = None if value is None else DoubleBuffer(ProxyArray(value), ProxyArray(value))
        return make_radix_sort(d_in_keys=kin, d_out_keys=None, d_in_values=vin, d_out_values=None, order=order,
                               compute_capability=cc)
    return make_radix_sort(d_in_keys=ProxyArray(key), d_out_keys=ProxyArray(key),
                           d_in_values=None if value is None else ProxyArray(value),
                           d_out_values=None if value is None else ProxyArray(value), order=order,
                           compute_capability=cc)


def test_keys_only_build_sm90(shared_cache):
    obj = _radix(np.uint32)
    assert obj.compute_capabilities == [90]
    cubin = obj.cubin()
    assert cubin[:4] == ELF
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    meta = result.meta
    assert meta["key_size"] == 4 and meta["value_size"] == 0 and meta["offset_size"] == 4
    assert meta["key_bits"] == 32 and meta["radix_bits"] == 8
    assert meta["algorithm"] == 1  # CUB chooses onesweep on sm_90
    for name in ("single_tile_threads", "histogram_threads", "exclusive_sum_threads", "onesweep_threads"):
        assert meta[name] % 32 == 0 and meta[name] > 0, name
    assert meta["onesweep_items"] > 0 and meta["single_tile_items"] > 0
    check_param_layout(result, source, obj.desc.kernel_params())
    # the same make call in this thread returns the same object
    assert _radix(np.uint32) is obj


def test_pairs_struct_values_descending_double_buffer_sm90(shared_cache):
    obj = _radix(np.float32, STRUCT, SortOrder.DESCENDING, double_buffer=True)
    builds = obj._builds_of(0)
    result, source = builds.result(90), builds.source(90)
    assert result.meta["value_size"] == STRUCT.itemsize and result.meta["key_size"] == 4
    assert "cub::SortOrder::Descending" in source.name_expressions[0]
    assert f"cuprims_bytes_{STRUCT.itemsize}_8" in source.text  # values travel as opaque bytes
    check_param_layout(result, source, obj.desc.kernel_params())
    # arrays instead of DoubleBuffers: the same object (the code does not depend on it)
    assert _radix(np.float32, STRUCT, SortOrder.DESCENDING) is obj


def test_small_keys_sm80(shared_cache):
    obj = _radix(np.int8, np.int64, cc=80)
    builds = obj._builds_of(0)
    result, source = builds.result(80), builds.source(80)
    assert obj.compute_capabilities == [80]
    # CUB would pick its multi-pass kernels here; cuprims runs onesweep everywhere
    assert result.meta["algorithm"] == 0
    assert result.meta["key_bits"] == 8 and result.meta["value_size"] == 8
    check_param_layout(result, source, obj.desc.kernel_params())


def test_wide_offset_build(shared_cache):
    obj = _radix(np.uint32)
    cubin = obj.cubin(90, wide_offsets=True)
    assert cubin[:4] == ELF and cubin != obj.cubin(90)
    builds = obj._builds_of(1)
    result, source = builds.result(90), builds.source(90)
    assert result.meta["offset_size"] == 8
    check_param_layout(result, source, obj.desc.variant(1).kernel_params())


# ------------------------------------------------------------------- goldens

GOLDEN_SPECS = {
    "radix_u4_keys_asc_sm90": dict(key="u4", value=None, descending=False, wide_offsets=False, arch=90),
    "radix_f4_pairs_struct_desc_sm90": dict(key="f4", value=STRUCT, descending=True, wide_offsets=False, arch=90),
    "radix_f2_pairs_i4_asc_wide_sm90": dict(key="f2", value="i4", descending=False, wide_offsets=True, arch=90),
    "radix_i1_pairs_i8_asc_sm80": dict(key="i1", value="i8", descending=False, wide_offsets=False, arch=80),
}


def _generate(spec):
    args = dict(spec)
    args["key"] = value_type(np.dtype(args["key"]))
    args["value"] = None if args["value"] is None else value_type(np.dtype(args["value"]))
    return radix_sort_source(**args)


def test_value_carriers():
    from cuprims.algorithms.sort_source import bytes_type

    assert bytes_type(value_type(np.float32))[0] == "unsigned int"
    assert bytes_type(value_type(np.float16))[0] == "unsigned short"
    assert bytes_type(value_type(np.complex128))[0] == "cuprims_bytes_16_8"
    assert bytes_type(value_type(np.bool_))[0] == "unsigned char"
    packed = np.dtype([(c, np.uint8) for c in "abcd"])
    assert bytes_type(value_type(packed))[0] == "cuprims_bytes_4_1"


# ------------------------------------------------------------------- argument errors

def test_rejects_unsortable_keys():
    for dt in (np.complex64, STRUCT):
        with pytest.raises(ArgumentError) as info:
            _radix(dt)
        assert info.value.argument == "d_in_keys"


@pytest.mark.parametrize("kwargs,argument", [
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=None, d_in_values=None, d_out_values=None), "d_out_keys"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int64), d_in_values=None, d_out_values=None),
     "d_out_keys"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=ProxyArray(np.int32),
          d_out_values=None), "d_out_values"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=None,
          d_out_values=ProxyArray(np.int32)), "d_out_values"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=ProxyArray(np.int32),
          d_out_values=ProxyArray(np.float32)), "d_out_values"),
    (dict(d_in_keys=DoubleBuffer(ProxyArray(np.int32), ProxyArray(np.int32)), d_out_keys=ProxyArray(np.int32),
          d_in_values=None, d_out_values=None), "d_out_keys"),
    (dict(d_in_keys=DoubleBuffer(ProxyArray(np.int32), ProxyArray(np.int64)), d_out_keys=None,
          d_in_values=None, d_out_values=None), "d_in_keys"),
    (dict(d_in_keys=DoubleBuffer(ProxyArray(np.int32), ProxyArray(np.int32)), d_out_keys=None,
          d_in_values=ProxyArray(np.int32), d_out_values=ProxyArray(np.int32)), "d_in_values"),
    (dict(d_in_keys=ProxyArray(np.int32), d_out_keys=ProxyArray(np.int32),
          d_in_values=DoubleBuffer(ProxyArray(np.int32), ProxyArray(np.int32)), d_out_values=None), "d_in_values"),
    (dict(d_in_keys=np.zeros(4, np.int32), d_out_keys=ProxyArray(np.int32), d_in_values=None,
          d_out_values=None), "d_in_keys"),
], ids=["no-out", "out-dtype", "no-out-values", "out-values-without-in", "values-dtype", "db-with-out",
        "db-mixed-dtypes", "db-keys-array-values", "array-keys-db-values", "host-array"])
def test_build_argument_errors(kwargs, argument):
    with pytest.raises(ArgumentError) as info:
        make_radix_sort(order=SortOrder.ASCENDING, compute_capability=90, **kwargs)
    assert info.value.argument == argument


@pytest.mark.parametrize("order", ["up", 3, None])
def test_bad_order(order):
    with pytest.raises(ArgumentError) as info:
        _radix(np.int32, order=order)
    assert info.value.argument == "order"


def test_order_spellings():
    from cuprims.algorithms.sort_common import parse_order

    assert parse_order("descending") is SortOrder.DESCENDING
    assert parse_order(0) is SortOrder.ASCENDING
    assert parse_order(SortOrder.DESCENDING) is SortOrder.DESCENDING


def test_signature_is_keyword_only():
    import inspect

    for fn in (make_radix_sort, radix_sort, rs.RadixSort.__call__):
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), fn
    assert list(inspect.signature(make_radix_sort).parameters) == [
        "d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "order", "compute_capability"]
    assert list(inspect.signature(radix_sort).parameters) == [
        "d_in_keys", "d_out_keys", "d_in_values", "d_out_values", "num_items", "order", "begin_bit", "end_bit",
        "stream"]


def test_double_buffer_api():
    a, b = object(), object()
    db = DoubleBuffer(a, b)
    assert db.current() is a and db.alternate() is b and db.selector == 0 and db.d_buffers == [a, b]
    db.selector = 1
    assert db.current() is b and db.alternate() is a
    with pytest.raises(ArgumentError):
        DoubleBuffer(a, None)


def test_temp_layout_matches_cub_alias_temporaries():
    offsets, total = sort_common.temp_layout([10, 0, 300, 256])
    assert offsets == [0, 256, 256, 768]
    assert total == 256 + 0 + 512 + 256 + 255


# =============================================================== fake device
#
# The host dispatch is exercised against a fake device: device memory is numpy bytes at
# made-up addresses (every access is bounds- and alignment-checked against one
# allocation), and each CUB kernel is emulated by what it computes. A wrong pointer,
# pass order, temporary-storage size or buffer choice in the host code shows up as a
# wrong result or a failed check, without a GPU.

def digits_of(bits: np.ndarray, bit: int, nbits: int) -> np.ndarray:
    d = (bits >> np.uint64(bit)) & np.uint64((1 << nbits) - 1)
    return d.astype(np.int64) if nbits <= 32 else d


class FakeRadixDevice:
    """Emulates CUB's radix sort kernels; ``handles`` are (role, offset_size) tuples."""

    def __init__(self, mem: FakeMemory, key_dtype, value_dtype, descending: bool, plan_overrides: dict):
        self.mem, self.kdt, self.desc = mem, np.dtype(key_dtype), descending
        # values are opaque bytes to the kernels
        self.vdt = None if value_dtype is None else np.dtype((np.void, np.dtype(value_dtype).itemsize))
        self.plan_overrides = plan_overrides
        self.launches: list[tuple] = []

    def launch(self, kernel, grid, block, stream, params, shared=0):
        role, osize = kernel
        self.launches.append((role, grid, block, stream, params))
        getattr(self, "_" + role)(grid, block, osize, *params)

    def _off(self, osize):
        return np.dtype(f"u{osize}")

    def _single(self, grid, block, osize, k_in, k_out, v_in, v_out, n, b, e, _dec):
        assert grid == 1
        keys = self.mem.view(k_in, self.kdt, n).copy()
        order = np.argsort(digits_of(ordered_bits(keys, self.desc), b, e - b), kind="stable")
        self.mem.view(k_out, self.kdt, n)[:] = sorted_keys(keys[order])
        if self.vdt is not None:
            self.mem.view(v_out, self.vdt, n)[:] = self.mem.view(v_in, self.vdt, n).copy()[order]
        else:
            assert v_in == v_out == 0

    def _init(self, grid, block, osize, p0, n0, p1, n1):
        assert grid * block >= max(n0, n1)
        self.mem.view(p0, np.int32, n0)[:] = 0
        if n1:
            self.mem.view(p1, self._off(osize), n1)[:] = 0

    def _histogram(self, grid, block, osize, bins, k_in, n, b, e, _dec):
        r = self.radix_bits
        digits = 1 << r
        passes = -(-(e - b) // r)
        bits = ordered_bits(self.mem.view(k_in, self.kdt, n), self.desc)
        view = self.mem.view(bins, self._off(osize), passes * digits)
        for p in range(passes):
            bit = b + p * r
            counts = np.bincount(digits_of(bits, bit, min(r, e - bit)), minlength=digits)
            view[p * digits:(p + 1) * digits] += counts.astype(view.dtype)

    def _scan(self, grid, block, osize, bins):
        digits = 1 << self.radix_bits
        view = self.mem.view(bins, self._off(osize), grid * digits)
        for p in range(grid):
            seg = view[p * digits:(p + 1) * digits]
            seg[:] = np.concatenate([[0], np.cumsum(seg.astype(np.uint64))[:-1]]).astype(seg.dtype)

    def _onesweep(self, grid, block, osize, lookback, ctr, bins_out, bins_in, k_out, k_in, v_out, v_in, n, bit,
                  nbits, _dec):
        digits = 1 << self.radix_bits
        assert grid == -(-n // self.tile)
        look = self.mem.view(lookback, np.int32, grid * digits)
        assert not look.any(), "look-back flags not zeroed before the pass"
        look[:] = 0x40000001  # the kernel leaves flags behind
        counter = self.mem.view(ctr, np.int32, 1)
        assert counter[0] == 0, "block counter not zeroed"
        counter[0] = grid
        keys = self.mem.view(k_in, self.kdt, n).copy()
        d = digits_of(ordered_bits(keys, self.desc), bit, nbits)
        counts = np.bincount(d, minlength=digits)
        base = self.mem.view(bins_in, self._off(osize), digits).astype(np.int64)
        order = np.argsort(d, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(n) - starts[d[order]]
        pos = base[d[order]] + rank
        # the output view ends at the furthest item written: FakeMemory checks it stays inside the buffer
        total = int(pos.max()) + 1 if n else 0
        assert pos.min(initial=0) >= 0
        self.mem.view(k_out, self.kdt, total)[pos] = sorted_keys(keys[order])
        if self.vdt is not None:
            vals = self.mem.view(v_in, self.vdt, n).copy()
            self.mem.view(v_out, self.vdt, total)[pos] = vals[order]
        if bins_out:
            self.mem.view(bins_out, self._off(osize), digits)[:] = (base + counts).astype(self._off(osize))


def _fake_meta(key_dt, value_dt, wide, overrides):
    key_dt = np.dtype(key_dt)
    meta = dict(key_size=key_dt.itemsize, value_size=0 if value_dt is None else np.dtype(value_dt).itemsize,
                offset_size=8 if wide else 4, key_bits=8 * key_dt.itemsize, algorithm=1,
                single_tile_threads=32, single_tile_items=2, histogram_threads=128, exclusive_sum_threads=256,
                onesweep_threads=32, onesweep_items=3, radix_bits=8)
    meta.update(overrides)
    return meta


class FakeBuilds:
    def __init__(self, meta, roles):
        self.meta, self.roles = meta, roles
        self.archs = [90]

    def build_for(self, archs, objs):
        pass

    def loaded(self, device, objs=None):
        names = tuple(f"kernel_{r}" for r in self.roles)
        offset_size = self.meta["offset_size"]
        return SimpleNamespace(module=SimpleNamespace(max_active_blocks=lambda name, threads, smem=0: 3),
                               handles=tuple((r, offset_size) for r in self.roles), names=names, meta=self.meta,
                               device=device, arch=90, extra={})


RADIX_ROLES = ("single", "histogram", "scan", "init", "onesweep")


class _Placeholder:
    """Like ProxyArray, for any dtype (ProxyArray only takes types operators can compute on)."""

    def __init__(self, dtype):
        self._cuprims_proxy_dtype = np.dtype(dtype)


@pytest.fixture
def fake_radix(monkeypatch):
    """make(key_dtype, value_dtype, order, **meta_overrides) -> (sorter, device, memory)."""
    mem = FakeMemory()
    state = {}

    def make(key_dt, value_dt=None, order=SortOrder.ASCENDING, portion=None, double_buffer=False, **meta):
        dev = FakeRadixDevice(mem, key_dt, None if value_dt is None else np.dtype(value_dt),
                              order is SortOrder.DESCENDING, meta)
        dev.radix_bits = meta.get("radix_bits", 8)
        metas = {w: _fake_meta(key_dt, value_dt, w, meta) for w in (False, True)}
        dev.tile = metas[False]["onesweep_threads"] * metas[False]["onesweep_items"]
        monkeypatch.setattr(rs.RadixSort, "_builds_of",
                            lambda self, variant: FakeBuilds(metas[bool(variant)], RADIX_ROLES))
        state["dev"] = dev
        if portion is not None:
            monkeypatch.setattr(rs, "_PORTION_LIMIT", portion)
        P = _Placeholder
        if double_buffer:
            kin = DoubleBuffer(P(key_dt), P(key_dt))
            vin = None if value_dt is None else DoubleBuffer(P(value_dt), P(value_dt))
            obj = make_radix_sort(d_in_keys=kin, d_out_keys=None, d_in_values=vin, d_out_values=None, order=order,
                                  compute_capability=90)
        else:
            obj = make_radix_sort(d_in_keys=P(key_dt), d_out_keys=P(key_dt),
                                  d_in_values=None if value_dt is None else P(value_dt),
                                  d_out_values=None if value_dt is None else P(value_dt), order=order,
                                  compute_capability=90)
        return obj, dev

    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "current_device", lambda: 0)
    monkeypatch.setattr(driver, "sm_count", lambda device: 4)
    monkeypatch.setattr(driver, "compute_capability", lambda device: (9, 0))
    monkeypatch.setattr(driver, "launch", lambda *a, **k: state["dev"].launch(*a, **k))
    allocations = []

    def alloc_async(nbytes, stream, device=-1):
        ptr = mem.alloc(nbytes, skew=64)
        allocations.append((ptr, nbytes, stream))
        return ptr

    monkeypatch.setattr(driver, "alloc_async", alloc_async)
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))

    def memcpy(dst, src, nbytes, stream):
        state["dev"].launches.append(("memcpy", nbytes))
        mem.view(dst, np.uint8, nbytes)[:] = mem.view(src, np.uint8, nbytes).copy()

    monkeypatch.setattr(rs, "memcpy_async", memcpy)

    def zero_words(ptr, count, stream):
        state["dev"].launches.append(("memset", count, None, stream))
        mem.view(ptr, np.int32, count)[:] = 0

    monkeypatch.setattr(rs, "zero_words_async", zero_words)
    make.mem = mem
    make.allocations = allocations
    return make


def reference(keys, values, descending, b=0, e=None):
    e = keys.dtype.itemsize * 8 if e is None else e
    order = np.argsort(digits_of(ordered_bits(keys, descending), b, e - b), kind="stable")
    return sorted_keys(keys[order]), None if values is None else values[order]


def _run_object(obj, mem, keys, values, n, *, double_buffer, b=None, e=None, stream=None, skew=8):
    kin = FakeArray(mem, keys)
    vin = None if values is None else FakeArray(mem, values)
    if double_buffer:
        kdb = DoubleBuffer(kin, FakeArray.empty(mem, keys.size, keys.dtype))
        vdb = None if values is None else DoubleBuffer(vin, FakeArray.empty(mem, values.size, values.dtype))
        args = dict(d_in_keys=kdb, d_out_keys=None, d_in_values=vdb, d_out_values=None)
    else:
        kout = FakeArray.empty(mem, keys.size, keys.dtype)
        vout = None if values is None else FakeArray.empty(mem, values.size, values.dtype)
        args = dict(d_in_keys=kin, d_out_keys=kout, d_in_values=vin, d_out_values=vout)
    nbytes = obj(temp_storage=None, num_items=n, begin_bit=b, end_bit=e, **args)
    assert isinstance(nbytes, int) and nbytes >= 1
    temp = FakeArray(mem, np.zeros(nbytes, np.uint8), skew=skew)  # base not 256-aligned on purpose
    assert obj(temp_storage=temp, num_items=n, begin_bit=b, end_bit=e, stream=stream, **args) is None
    if double_buffer:
        got_k = args["d_in_keys"].current().get()
        got_v = None if values is None else args["d_in_values"].current().get()
    else:
        got_k = args["d_out_keys"].get()
        got_v = None if values is None else args["d_out_values"].get()
        assert np.array_equal(kin.get().view(np.uint8), keys.view(np.uint8)), "the input keys were written"
        if values is not None:
            assert np.array_equal(vin.get().view(np.uint8), values.view(np.uint8)), "the input values were written"
    return got_k, got_v, args, nbytes


def _same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


KEY_DTYPES = ["uint32", "int32", "float32", "float16", "int8", "uint8", "bool", "int64", "uint64", "float64",
              "int16", "uint16"]


@pytest.mark.parametrize("double_buffer", [False, True], ids=["arrays", "double-buffer"])
@pytest.mark.parametrize("order", [SortOrder.ASCENDING, SortOrder.DESCENDING], ids=["asc", "desc"])
@pytest.mark.parametrize("key", KEY_DTYPES)
def test_fake_device_every_key_type(fake_radix, key, order, double_buffer):
    rng = np.random.default_rng(abs(hash((key, order.value, double_buffer))) % 1000)
    obj, dev = fake_radix(key, np.int32, order, double_buffer=double_buffer)
    for n in (0, 1, 31, 64, 65, 1000):
        keys = random_keys(key, n, rng)
        values = np.arange(n, dtype=np.int32)
        got_k, got_v, _, _ = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=double_buffer)
        want_k, want_v = reference(keys, values, order is SortOrder.DESCENDING)
        assert _same_bits(got_k, want_k), (key, n)
        assert np.array_equal(got_v, want_v), (key, n)


@pytest.mark.parametrize("double_buffer", [False, True], ids=["arrays", "double-buffer"])
@pytest.mark.parametrize("bits", [(0, 32), (0, 8), (3, 17), (8, 32), (5, 5), (0, 1), (31, 32)])
def test_fake_device_bit_ranges_and_pass_parity(fake_radix, bits, double_buffer):
    """Odd and even pass counts, partial digits, empty ranges: the result lands where promised."""
    rng = np.random.default_rng(7)
    b, e = bits
    obj, dev = fake_radix(np.uint32, STRUCT, SortOrder.ASCENDING, double_buffer=double_buffer)
    for n in (1, 50, 700):
        keys = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
        values = np.zeros(n, STRUCT)
        values["a"] = np.arange(n)
        values["b"] = rng.random(n)
        got_k, got_v, args, _ = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=double_buffer,
                                            b=b, e=e)
        want_k, want_v = reference(keys, values, False, b, e)
        assert np.array_equal(got_k, want_k) and np.array_equal(got_v, want_v), (bits, n)
        if b == e:
            kinds = [entry[0] for entry in dev.launches[-2:]]
            if double_buffer:
                assert args["d_in_keys"].selector == 0  # nothing to do: the input is the result
            else:
                assert kinds == ["memcpy", "memcpy"]


def test_fake_device_selector_flips_with_pass_parity(fake_radix):
    obj, dev = fake_radix(np.uint32, None, SortOrder.ASCENDING, double_buffer=True)
    mem = fake_radix.mem
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 1 << 32, 500, dtype=np.uint64).astype(np.uint32)
    for (b, e), flips in (((0, 32), 0), ((0, 24), 1), ((0, 8), 1), ((4, 20), 0)):
        db = DoubleBuffer(FakeArray(mem, keys), FakeArray.empty(mem, keys.size, np.uint32))
        db.selector = 0
        nbytes = obj(temp_storage=None, d_in_keys=db, d_out_keys=None, d_in_values=None, d_out_values=None,
                     num_items=keys.size, begin_bit=b, end_bit=e)
        assert db.selector == 0  # a size query changes nothing
        tmp = FakeArray(mem, np.zeros(nbytes, np.uint8))
        obj(temp_storage=tmp, d_in_keys=db, d_out_keys=None, d_in_values=None, d_out_values=None,
            num_items=keys.size, begin_bit=b, end_bit=e)
        assert db.selector == flips
        assert np.array_equal(db.current().get(), reference(keys, None, False, b, e)[0])
    # a DoubleBuffer whose selector is already 1 starts from d_buffers[1]
    db = DoubleBuffer(FakeArray.empty(mem, keys.size, np.uint32), FakeArray(mem, keys))
    db.selector = 1
    tmp = FakeArray(mem, np.zeros(1 << 20, np.uint8))
    obj(temp_storage=tmp, d_in_keys=db, d_out_keys=None, d_in_values=None, d_out_values=None,
        num_items=keys.size, begin_bit=0, end_bit=24)
    assert db.selector == 0
    assert np.array_equal(db.current().get(), reference(keys, None, False, 0, 24)[0])


@pytest.mark.parametrize("double_buffer", [False, True], ids=["arrays", "double-buffer"])
def test_fake_device_portions(fake_radix, double_buffer):
    """Inputs of several onesweep portions (CUB's < 2^28-item chunks), made small here."""
    rng = np.random.default_rng(11)
    obj, dev = fake_radix(np.int64, np.float64, SortOrder.DESCENDING, portion=100, double_buffer=double_buffer)
    for n in (97, 288, 289, 1001):
        keys = rng.integers(-50, 50, n).astype(np.int64)
        values = rng.random(n)
        got_k, got_v, _, _ = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=double_buffer)
        want_k, want_v = reference(keys, values, True)
        assert np.array_equal(got_k, want_k) and np.array_equal(got_v, want_v), n
    roles = [entry[0] for entry in dev.launches]
    assert roles.count("onesweep") > 8


def test_fake_device_wide_offsets(fake_radix, monkeypatch):
    monkeypatch.setattr(rs, "NARROW_MAX_ITEMS", 100)
    rng = np.random.default_rng(5)
    obj, dev = fake_radix(np.float32, np.uint8, SortOrder.ASCENDING, portion=120)
    for n in (100, 101, 500):
        keys = random_keys(np.float32, n, rng)
        values = rng.integers(0, 255, n).astype(np.uint8)
        got_k, got_v, _, nbytes = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=False)
        want_k, want_v = reference(keys, values, False)
        assert _same_bits(got_k, want_k) and np.array_equal(got_v, want_v), n
        osize = dev.launches[-1][0] == "onesweep" and obj._plans[int(n > 100)].offset_size
        assert osize == (8 if n > 100 else 4)


def test_fake_device_radix_bits_other_than_8(fake_radix):
    """The host takes the digit width from the build: nothing assumes 8."""
    rng = np.random.default_rng(9)
    obj, dev = fake_radix(np.uint16, np.int16, SortOrder.DESCENDING, radix_bits=5)
    for n in (33, 400):
        keys = rng.integers(0, 1 << 16, n).astype(np.uint16)
        values = np.arange(n, dtype=np.int16)
        got_k, got_v, _, _ = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=False)
        want_k, want_v = reference(keys, values, True)
        assert np.array_equal(got_k, want_k) and np.array_equal(got_v, want_v)
    scans = [entry for entry in dev.launches if entry[0] == "scan"]
    assert scans[-1][1] == 4  # ceil(16 / 5) passes, one scan block each


def test_fake_device_launch_plan_and_temp_size(fake_radix):
    obj, dev = fake_radix(np.uint32, np.uint32, SortOrder.ASCENDING)
    mem = fake_radix.mem
    n = 1000
    keys = np.arange(n, dtype=np.uint32)[::-1].copy()
    kin, kout = FakeArray(mem, keys), FakeArray.empty(mem, n, np.uint32)
    vin, vout = FakeArray(mem, keys), FakeArray.empty(mem, n, np.uint32)
    args = dict(d_in_keys=kin, d_out_keys=kout, d_in_values=vin, d_out_values=vout, num_items=n)
    nbytes = obj(temp_storage=None, **args)
    tile, digits = 32 * 3, 256
    blocks = -(-n // tile)
    # bins (4 passes x 256 x 4 B), look-back, scratch keys and values, counters, each 256-aligned, + 255
    expect = (4 * digits * 4) + -(-(blocks * digits * 4) // 256) * 256 + 2 * (-(-(n * 4) // 256) * 256) + 256 + 255
    assert nbytes == expect
    with pytest.raises(ArgumentError) as info:
        obj(temp_storage=FakeArray(mem, np.zeros(nbytes - 1, np.uint8)), **args)
    assert info.value.argument == "temp_storage"
    dev.launches.clear()
    obj(temp_storage=FakeArray(mem, np.zeros(nbytes, np.uint8)), stream=1234, **args)
    roles = [(entry[0], entry[1], entry[2]) for entry in dev.launches]
    assert roles[0][0] == "init" and roles[1] == ("histogram", 3 * 4, 128) and roles[2] == ("scan", 4, 256)
    # look-back flags are cleared by the driver's memset before every pass (as CUB does)
    assert [r[0] for r in roles[3:]] == ["memset", "onesweep"] * 4
    assert all(r[1] == blocks * digits for r in roles if r[0] == "memset")
    assert all(r[2] == 32 for r in roles if r[0] == "onesweep")
    assert all(entry[3] == 1234 for entry in dev.launches)
    assert np.array_equal(kout.get(), np.arange(n, dtype=np.uint32))
    # a DoubleBuffer needs no scratch copies
    db = DoubleBuffer(FakeArray(mem, keys), FakeArray.empty(mem, n, np.uint32))
    vdb = DoubleBuffer(FakeArray(mem, keys), FakeArray.empty(mem, n, np.uint32))
    smaller = obj(temp_storage=None, d_in_keys=db, d_out_keys=None, d_in_values=vdb, d_out_values=None,
                  num_items=n)
    assert smaller == nbytes - 2 * (-(-(n * 4) // 256) * 256)


def test_fake_device_one_shot_allocates_on_the_stream(fake_radix):
    obj, dev = fake_radix(np.int32, None, SortOrder.ASCENDING)
    mem = fake_radix.mem
    rng = np.random.default_rng(1)
    keys = rng.integers(-1000, 1000, 5000).astype(np.int32)
    kin, kout = FakeArray(mem, keys), FakeArray.empty(mem, keys.size, np.int32)
    radix_sort(d_in_keys=kin, d_out_keys=kout, num_items=keys.size, order=SortOrder.ASCENDING, stream=77)
    assert np.array_equal(kout.get(), np.sort(keys))
    (ptr, nbytes, stream), = fake_radix.allocations
    assert stream == 77 and mem.freed == [ptr]
    # single tile and empty problems allocate nothing
    radix_sort(d_in_keys=kin, d_out_keys=kout, num_items=3, order=SortOrder.ASCENDING)
    radix_sort(d_in_keys=kin, d_out_keys=kout, num_items=0, order=SortOrder.ASCENDING)
    assert len(fake_radix.allocations) == 1
    assert np.array_equal(kout.get()[:3], np.sort(keys[:3]))


def test_fake_device_call_argument_errors(fake_radix):
    obj, dev = fake_radix(np.int32, np.int32, SortOrder.ASCENDING)
    mem = fake_radix.mem
    a = FakeArray(mem, np.zeros(10, np.int32))
    b = FakeArray(mem, np.zeros(10, np.int32))
    c = FakeArray(mem, np.zeros(10, np.int32))
    d = FakeArray(mem, np.zeros(10, np.int32))
    f = FakeArray(mem, np.zeros(10, np.float32))
    short = FakeArray(mem, np.zeros(5, np.int32))

    def call(**kw):
        args = dict(temp_storage=None, d_in_keys=a, d_out_keys=b, d_in_values=c, d_out_values=d, num_items=10)
        args.update(kw)
        return obj(**args)

    assert call() >= 1
    cases = [
        (dict(d_out_keys=short), "d_out_keys"),
        (dict(d_in_keys=f), "d_in_keys"),
        (dict(d_out_keys=a), "d_out_keys"),            # overlaps the input: use a DoubleBuffer
        (dict(d_out_values=c), "d_out_values"),
        (dict(d_out_values=a), "d_out_values"),        # values onto the keys
        (dict(d_in_values=None, d_out_values=None), "d_in_values"),
        (dict(d_out_keys=None), "d_out_keys"),
        (dict(num_items=-1), "num_items"),
        (dict(begin_bit=-1), "begin_bit"),
        (dict(end_bit=33), "end_bit"),
        (dict(begin_bit=9, end_bit=8), "end_bit"),
        (dict(begin_bit=1.5), "begin_bit"),
        (dict(d_in_keys=DoubleBuffer(a, b), d_out_keys=None), "d_in_values"),
        (dict(d_in_keys=DoubleBuffer(a, b), d_out_keys=b), "d_out_keys"),
    ]
    for kw, argument in cases:
        with pytest.raises(ArgumentError) as info:
            call(**kw)
        assert info.value.argument == argument, (kw, info.value)
    # 10 items fit one tile of the fake plan (32 x 2): no storage needed beyond the token byte
    assert call() == 1
    assert call(temp_storage=FakeArray(mem, np.zeros(1, np.uint8))) is None
    keys_only, _ = fake_radix(np.int32, None, SortOrder.ASCENDING)
    with pytest.raises(ArgumentError) as info:
        keys_only(temp_storage=None, d_in_keys=a, d_out_keys=b, d_in_values=c, d_out_values=d, num_items=10)
    assert info.value.argument == "d_in_values"


def test_fake_device_packed_and_odd_values(fake_radix):
    """Values are only moved: packed structs and non-arithmetic dtypes travel as bytes."""
    from cuprims.algorithms.sort_source import bytes_type
    from cuprims.algorithms.sort_common import opaque_value_type

    packed = np.dtype([("a", np.int8), ("b", np.int32)])  # itemsize 5, numpy alignment 1
    assert bytes_type(opaque_value_type(packed, "v"))[0] == "cuprims_bytes_5_1"
    assert bytes_type(opaque_value_type(np.dtype("M8[ns]"), "v"))[0] == "unsigned long long"
    rng = np.random.default_rng(12)
    n = 777
    keys = rng.integers(0, 50, n).astype(np.int16)
    values = np.zeros(n, packed)
    values["a"] = rng.integers(-100, 100, n)
    values["b"] = np.arange(n)
    obj, dev = fake_radix(np.int16, packed, SortOrder.DESCENDING)
    got_k, got_v, _, _ = _run_object(obj, fake_radix.mem, keys, values, n, double_buffer=False)
    want_k, want_v = reference(keys, values, True)
    assert np.array_equal(got_k, want_k) and np.array_equal(got_v, want_v)


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_golden_source(name):
    src = _generate(GOLDEN_SPECS[name])
    assert _generate(GOLDEN_SPECS[name]) == src  # deterministic
    check_golden(name, render_source(src))


def test_fake_device_init_kernel_can_clear_look_back(fake_radix):
    """The kernel path (CUB's PDL-era choice) stays correct when memset is switched off."""
    obj, dev = fake_radix(np.uint32, None, SortOrder.ASCENDING)
    keys = np.random.default_rng(11).integers(0, 1 << 32, 1000, dtype=np.uint32)
    with cuprims.settings.override(radix_memset=False):
        got_k, _, _, _ = _run_object(obj, fake_radix.mem, keys, None, 1000, double_buffer=False)
    assert np.array_equal(got_k, np.sort(keys))
    roles = [entry[0] for entry in dev.launches]
    assert "memset" not in roles and roles.count("init") == 1 + roles.count("onesweep")
