"""Top-k on the CPU: ahead-of-time sm_90 builds for every key kind, keys alone and pairs,
iterators, both orders, sorted or not; a golden, kernel parameters against the cubin; the
host dispatch on a fake device (the kernels emulated in numpy over the device state they
share: passes, choices, candidate buffers, the final filter and the sort) against numpy's
selection, NaNs and ties included; and bad arguments named before anything is compiled or
launched."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, check_golden, check_kernel_params, fake_driver_memory, render_source
from cuprims import CountingIterator, ProxyArray as P, SortOrder
from cuprims._runtime import driver
from cuprims.algorithms.top_k import api as tk
from cuprims.errors import ArgumentError

f4, i4 = np.float32, np.int32
KEY_DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
              np.float16, np.float32, np.float64]


def _make(**over):
    kw = dict(d_in_keys=P(f4), d_out_keys=P(f4), compute_capability=90)
    kw.update(over)
    return cuprims.make_top_k(**kw)


def test_golden_and_parameters(shared_cache):
    obj = _make()
    check_golden("top_k_f4_keys_descending_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["word_bits"] == 32 and meta["threads"] * meta["items"] == 4096
    assert meta["sort_threads"] * meta["sort_items"] == 4096 and meta["merge_threads"] * meta["merge_items"] == 2048


@pytest.mark.parametrize("key", KEY_DTYPES)
def test_builds_for_every_key_dtype(shared_cache, key):
    obj = _make(d_in_keys=P(key), d_out_keys=P(key), d_in_values=P(i4), d_out_values=P(i4), sorted=True,
                order=SortOrder.ASCENDING)
    check_kernel_params(obj, 90)
    assert obj._builds.result(90).meta["word_bits"] == 8 * np.dtype(key).itemsize


def test_iterator_keys_and_values(shared_cache):
    obj = _make(d_in_keys=CountingIterator(np.int64(3)), d_out_keys=P(np.int64),
                d_in_values=CountingIterator(np.int32(0)), d_out_values=P(i4))
    check_kernel_params(obj, 90)
    assert not obj.desc.d_in_keys.is_pointer and not obj.desc.d_in_values.is_pointer


@pytest.mark.parametrize("kw, argument", [
    (dict(order="sideways"), "order"),
    (dict(sorted=1), "sorted"),
    (dict(d_in_keys=P(np.complex64), d_out_keys=P(np.complex64)), "d_in_keys"),
    (dict(d_out_keys=P(np.float64)), "d_out_keys"),
    (dict(d_in_values=P(i4)), "d_out_values"),
    (dict(d_out_values=P(i4)), "d_in_values"),
    (dict(d_in_values=P(i4), d_out_values=P(np.int64)), "d_out_values"),
])
def test_bad_build_arguments_are_named(shared_cache, kw, argument):
    with pytest.raises(ArgumentError) as info:
        _make(**kw)
    assert info.value.argument == argument


# ------------------------------------------------------------------ the fake device

_ST = 7  # state_t: prefix, prev_prefix, k_left, greater, equal, candidates[2], then the histogram


def ordered_words(keys: np.ndarray, descending: bool) -> np.ndarray:
    """numpy model of ``ordered_word``: the larger word is taken first."""
    size = keys.dtype.itemsize
    bits = 8 * size
    b = keys.view(f"u{size}").astype(np.uint64)
    high, ones = np.uint64(1 << (bits - 1)), np.uint64((1 << bits) - 1)
    if keys.dtype.kind == "i":
        b ^= high
    elif keys.dtype.kind == "f":
        inf = np.uint64({2: 0x7C00, 4: 0x7F800000, 8: 0x7FF0000000000000}[size])
        nan = (b & (ones ^ high)) > inf
        b = np.where(nan, ones, np.where(b & high != 0, b ^ ones, b ^ high))
    return b if descending else b ^ ones


class FakeTopKDevice:
    """The four kernels in numpy, over the state words in temporary storage. Outputs and
    buffer slots are taken in the order given (``reverse``: from the last item back)."""

    def __init__(self, mem: FakeMemory, desc, plan, reverse: bool):
        self.mem, self.desc, self.plan, self.reverse, self.launches = mem, desc, plan, reverse, []
        self.kt = desc.d_in_keys.value.dtype
        self.vt = None if desc.d_in_values is None else desc.d_in_values.value.dtype
        self.down = desc.order is SortOrder.DESCENDING

    def launch(self, kernel, grid, block, stream, params, shared=0):
        self.launches.append(kernel)
        getattr(self, kernel)(grid, block, *params)

    def init(self, grid, block, state, k):
        st = self.mem.view(state, np.uint64, _ST + 256)
        st[:] = 0
        st[2] = k

    def pass_(self, grid, block, keys, values, out_keys, out_values, state, rk, ri, wk, wi, n, cap, k, j, passes):
        assert grid >= 1 and block == self.plan.threads
        st = self.mem.view(state, np.uint64, _ST + 256)
        bits = 8 * self.kt.itemsize
        full = (1 << bits) - 1
        mask = 0 if j == 0 else (full << (bits - 8 * j)) & full
        src_mask = 0 if j <= 1 else (full << (bits - 8 * (j - 1))) & full
        prefix, src_prefix, k_left = int(st[0]), int(st[1]), int(st[2])
        if j >= 2 and int(st[5 + ((j - 1) & 1)]) <= cap:
            count = int(st[5 + ((j - 1) & 1)])
            src_keys = self.mem.view(rk, self.kt, count).copy()
            index = self.mem.view(ri, np.uint64, count).copy() if self.vt is not None else np.arange(count)
        else:
            src_keys = self.mem.view(keys, self.kt, n).copy()
            index = np.arange(n)
        w = [int(x) for x in ordered_words(src_keys, self.down)]
        order = range(len(w) - 1, -1, -1) if self.reverse else range(len(w))
        last = j == passes
        shift = 0 if last else bits - 8 * (j + 1)
        ok = self.mem.view(out_keys, self.kt, k)
        ov = self.mem.view(out_values, self.vt, k) if self.vt is not None else None
        vals = self.mem.view(values, self.vt, n) if self.vt is not None else None

        def put(at, i):
            ok[at] = src_keys[i]
            if ov is not None:
                ov[at] = vals[int(index[i])]
        for i in order:
            if (w[i] & src_mask) != src_prefix:
                continue
            top = w[i] if last else w[i] & mask
            if top > prefix:
                put(int(st[3]), i)
                st[3] += 1
            elif top == prefix and last:
                if st[4] < k_left:
                    put(k - k_left + int(st[4]), i)
                st[4] += 1
            elif top == prefix:
                st[_ST + ((w[i] >> shift) & 255)] += 1
                if j >= 1:
                    a = int(st[5 + (j & 1)])
                    if a < cap:
                        self.mem.view(wk, self.kt, cap)[a] = src_keys[i]
                        if self.vt is not None:
                            self.mem.view(wi, np.uint64, cap)[a] = index[i]
                    st[5 + (j & 1)] += 1

    def choose(self, grid, block, state, j):
        assert (grid, block) == (1, 256)
        st = self.mem.view(state, np.uint64, _ST + 256)
        bits = 8 * self.kt.itemsize
        k_left, above = int(st[2]), 0
        for d in range(255, -1, -1):
            c = int(st[_ST + d])
            if above < k_left <= above + c:
                st[1], st[0], st[2] = st[0], int(st[0]) | (d << (bits - 8 * (j + 1))), k_left - above
            above += c
        st[_ST:] = 0
        st[5 + ((j + 1) & 1)] = 0

    def sort(self, grid, block, out_keys, out_values, k):
        tile = self.plan.sort_tile
        assert grid == -(-k // tile) and block == self.plan.sort_threads
        ok = self.mem.view(out_keys, self.kt, k)
        ov = self.mem.view(out_values, self.vt, k) if self.vt is not None else None
        for b in range(grid):
            part = slice(b * tile, min(k, (b + 1) * tile))
            perm = _best_first(ordered_words(ok[part].copy(), self.down))
            ok[part] = ok[part].copy()[perm]
            if ov is not None:
                ov[part] = ov[part].copy()[perm]

    def merge(self, grid, block, in_keys, in_values, out_keys, out_values, k, run):
        assert grid * block * self.plan.merge_items >= k and block == self.plan.merge_threads
        assert in_keys != out_keys
        ik, ok = self.mem.view(in_keys, self.kt, k).copy(), self.mem.view(out_keys, self.kt, k)
        iv = self.mem.view(in_values, self.vt, k).copy() if self.vt is not None else None
        w = [int(v) for v in ordered_words(ik, self.down)]
        ov = self.mem.view(out_values, self.vt, k) if iv is not None else None
        items = self.plan.merge_items
        for o0 in range(0, k, items):          # each thread as the kernel runs it
            a0 = o0 // (2 * run) * (2 * run)
            la = min(run, k - a0)
            b0 = a0 + la
            lb = min(run, k - b0)
            d = o0 - a0
            lo, hi = max(0, d - lb), min(d, la)
            while lo < hi:                      # the merge path: the first run wins ties
                mid = (lo + hi) // 2
                if w[a0 + mid] >= w[b0 + d - mid - 1]:
                    lo = mid + 1
                else:
                    hi = mid
            ia, ib = lo, d - lo
            for o in range(o0, min(o0 + items, a0 + la + lb)):
                if ib >= lb or (ia < la and w[a0 + ia] >= w[b0 + ib]):
                    src, ia = a0 + ia, ia + 1
                else:
                    src, ib = b0 + ib, ib + 1
                ok[o] = ik[src]
                if ov is not None:
                    ov[o] = iv[src]


def _best_first(words: np.ndarray) -> np.ndarray:
    """The permutation putting the largest words first, ties in order."""
    return np.argsort(np.iinfo(np.uint64).max - words, kind="stable")


@pytest.fixture
def fake(monkeypatch, shared_cache):
    mem = fake_driver_memory(monkeypatch)

    def make(key=np.int16, pairs=False, order=SortOrder.DESCENDING, sorted=False, reverse=False):
        extra = dict(d_in_values=P(i4), d_out_values=P(i4)) if pairs else {}
        obj = _make(d_in_keys=P(key), d_out_keys=P(key), order=order, sorted=sorted, **extra)
        meta = obj._builds.result(90).meta
        module = SimpleNamespace(max_active_blocks=lambda name, threads: 2)
        monkeypatch.setattr(driver, "sm_count", lambda device: 3)
        plan = tk._Plan(SimpleNamespace(meta=meta, handles=("init", "pass_", "choose", "sort", "merge"),
                                        module=module, names=("a", "b", "c", "d", "e"), device=0))
        plan.device = 0
        obj._plans[0] = plan
        dev = FakeTopKDevice(mem, obj.desc, plan, reverse)
        monkeypatch.setattr(driver, "launch", dev.launch)
        return obj, dev

    make.mem = mem
    return make


def _data(key, n, rng, ties):
    key = np.dtype(key)
    if key.kind == "b":
        return rng.integers(0, 2, n).astype(key)
    if key.kind == "f":
        x = rng.standard_normal(n).astype(key) * 100
        x[rng.integers(0, max(n, 1), n // 7)] = np.nan
        x[rng.integers(0, max(n, 1), n // 11)] = np.inf
        return np.round(x) if ties else x
    info = np.iinfo(key)
    lo, hi = (-5, 5) if ties else (max(info.min, -(1 << 40)), min(info.max, 1 << 40))
    return rng.integers(max(lo, info.min), hi, n, endpoint=True).astype(key)


def _check(got_keys, got_values, x, k, descending, sorted_):
    want = np.sort(x)            # NaNs last, as numpy sorts
    want = want[::-1][:k] if descending else want[:k]
    got = got_keys if sorted_ else np.sort(got_keys)[::-1] if descending else np.sort(got_keys)
    np.testing.assert_array_equal(got, want)
    if got_values is not None:   # each value the index of an item with that key
        np.testing.assert_array_equal(x[got_values], got_keys)
        assert len(set(got_values.tolist())) == k


@pytest.mark.parametrize("key", [np.bool_, np.int8, np.int16, np.uint32, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("order", [SortOrder.DESCENDING, SortOrder.ASCENDING])
@pytest.mark.parametrize("ties", [False, True])
def test_fake_device_against_numpy(fake, key, order, ties):
    rng = np.random.default_rng(7)
    for n, ks, pairs, reverse in [(1, (0, 1), False, False), (600, (1, 37, 600), True, False),
                                  (2500, (5, 1000, 2499), False, True), (3000, (64,), True, True)]:
        obj, dev = fake(key, pairs, order, sorted=False, reverse=reverse)
        x = _data(key, n, rng, ties)
        xs = FakeArray(fake.mem, x)
        for k in ks:
            ok = FakeArray(fake.mem, np.zeros(max(k, 1), key))
            kw = dict(d_in_keys=xs, d_out_keys=ok, k=k, num_items=n)
            if pairs:
                ov = FakeArray(fake.mem, np.zeros(max(k, 1), i4))
                kw.update(d_in_values=FakeArray(fake.mem, np.arange(n, dtype=i4)), d_out_values=ov)
            need = obj(temp_storage=None, **kw)
            obj(temp_storage=FakeArray(fake.mem, np.zeros(need, np.uint8)), **kw)
            _check(ok.get()[:k], ov.get()[:k] if pairs else None, x, k, order is SortOrder.DESCENDING, False)


@pytest.mark.parametrize("order", [SortOrder.DESCENDING, SortOrder.ASCENDING])
def test_fake_device_sorted_pairs(fake, order):
    rng = np.random.default_rng(11)
    obj, dev = fake(np.float32, True, order, sorted=True)
    n = 26_000
    x = _data(np.float32, n, rng, True)     # ties: the merges must keep each key with its value
    for k in (1, 2, 4096, 4097, 12289, 3 * 8192 + 5):
        ok, ov = FakeArray(fake.mem, np.zeros(k, f4)), FakeArray(fake.mem, np.zeros(k, i4))
        dev.launches.clear()
        kw = dict(d_in_keys=FakeArray(fake.mem, x), d_in_values=FakeArray(fake.mem, np.arange(n, dtype=i4)),
                  d_out_keys=ok, d_out_values=ov, k=np.int64(k), num_items=np.int64(n))
        temp = FakeArray(fake.mem, np.zeros(obj(temp_storage=None, **kw), np.uint8))
        obj(temp_storage=temp, **kw)
        _check(ok.get(), ov.get(), x, k, order is SortOrder.DESCENDING, True)
        merges = max(0, (k - 1).bit_length() - 12)          # runs of 4096 doubled until one holds k
        merges += merges % 2                                 # an odd count ends with a copy back
        assert dev.launches == ["init"] + ["pass_", "choose"] * 4 + ["pass_"] + ["sort"] * (k > 1) + ["merge"] * merges


def test_k_zero_launches_nothing_and_k_past_n_is_refused(fake):
    obj, dev = fake()
    x = FakeArray(fake.mem, np.arange(10, dtype=np.int16))
    out = FakeArray(fake.mem, np.full(1, 7, np.int16))
    assert obj(temp_storage=None, d_in_keys=x, d_out_keys=out, k=0, num_items=10) == 1
    obj(temp_storage=FakeArray(fake.mem, np.zeros(1, np.uint8)), d_in_keys=x, d_out_keys=out, k=0, num_items=10)
    assert dev.launches == [] and out.get().tolist() == [7]
    for k, n in ((11, 10), (-1, 10), (1.5, 10), (1, 0)):
        with pytest.raises(ArgumentError) as info:
            obj(temp_storage=None, d_in_keys=x, d_out_keys=out, k=k, num_items=n)
        assert info.value.argument == "k"
    assert dev.launches == []


def test_sorted_temporary_storage_adds_merge_buffers_past_one_tile(fake):
    obj, dev = fake(np.int32, pairs=True, sorted=True)
    n = 10_000
    kw = dict(d_in_keys=FakeArray(fake.mem, np.zeros(n, i4)), d_out_keys=FakeArray(fake.mem, np.zeros(n, i4)),
              d_in_values=FakeArray(fake.mem, np.zeros(n, i4)), d_out_values=FakeArray(fake.mem, np.zeros(n, i4)),
              num_items=n)
    select = 2304 + 2 * (1280 + 2560)                     # two buffers of 313 keys and 313 indices
    assert obj(temp_storage=None, k=4096, **kw) == select
    assert obj(temp_storage=None, k=4097, **kw) == select + 2 * 16640   # 4097 keys and values, rounded to 256


def test_temporary_storage_holds_the_state_and_two_candidate_buffers(fake):
    obj, dev = fake(np.float32, pairs=True)
    n = 1000
    kw = dict(d_in_keys=FakeArray(fake.mem, np.zeros(n, f4)), d_out_keys=FakeArray(fake.mem, np.zeros(5, f4)),
              d_in_values=FakeArray(fake.mem, np.zeros(n, i4)), d_out_values=FakeArray(fake.mem, np.zeros(5, i4)),
              num_items=n)
    cap = -(-n // 32)
    assert obj(temp_storage=None, k=5, **kw) == 2304 + 2 * (256 + 256)   # 32 float32 keys and 32 indices a buffer
    assert cap == 32
    obj8, _ = fake(np.int8)
    x8 = FakeArray(fake.mem, np.zeros(n, np.int8))
    assert obj8(temp_storage=None, d_in_keys=x8, d_out_keys=FakeArray(fake.mem, np.zeros(5, np.int8)), k=5,
                num_items=n) == 2304                                           # one pass: no buffers


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_word_model_orders_as_numpy(dt):
    """Best first by the words is numpy's order: descending NaNs (either sign) first, ascending last."""
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -1.5, 2.0, 3.0, 65504.0, -65504.0, 1e-7], dt)
    x = np.concatenate([x, np.random.default_rng(2).standard_normal(50).astype(dt)])
    for descending in (True, False):
        got = x[_best_first(ordered_words(x, descending))]
        want = np.sort(x)[::-1] if descending else np.sort(x)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", KEY_DTYPES)
def test_kernel_words_are_the_model(dt, shared_cache):
    """NVRTC evaluates the header's ``ordered_word::from_bits`` on special and random keys of
    every dtype, in both orders: the words of the numpy model above (which orders as numpy)."""
    from cuprims._codegen.common import preamble
    from cuprims._compile.nvrtc import compile_to_ltoir
    from cuprims._compile.source import Source
    from cuprims._value_types import value_type

    dt = np.dtype(dt)
    rng = np.random.default_rng(9)
    if dt.kind == "f":
        special = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], dt)
        keys = np.concatenate([special, rng.standard_normal(24).astype(dt),
                               np.array([0x7F81, 0xFFFF], np.uint16).view(np.float16).astype(dt)])
        if dt.itemsize == 4:   # a signalling NaN and a negative NaN with a payload, bit for bit
            keys = np.concatenate([keys, np.array([0x7F800001, 0xFFC00123], np.uint32).view(dt)])
    elif dt.kind == "b":
        keys = np.array([False, True])
    else:
        info = np.iinfo(dt)
        keys = np.concatenate([np.array([info.min, info.max, 0, 1], dt), rng.integers(info.min, info.max, 24,
                                                                                     dtype=dt)])
    vt = value_type(dt)
    kind = {"b": 0, "u": 0, "i": 1, "f": 2}[dt.kind]
    checks = []
    for descending in (True, False):
        t = f"cuprims::top_k::ordered_word<{vt.cpp}, {kind}, {'true' if descending else 'false'}>"
        bits = keys.view(f"u{dt.itemsize}").tolist()
        for b, w in zip(bits, ordered_words(keys, descending).tolist()):
            checks.append(f"static_assert({t}::from_bits({t}::word_t({b}ull)) == {t}::word_t({w}ull), "
                          f"\"{b:#x}\");\n")
    text = preamble((vt,), 90) + "#include <top_k/cuprims_top_k.cuh>\n" + "".join(checks)
    ltoir, _ = compile_to_ltoir(Source(text, (), (), ()), 90)
    assert ltoir
