"""Host dispatch of segmented reduce, unique-by-key, three-way partition and select, run on
the CPU against a recording driver: the launches (kernel, grid, block), every packed
kernel parameter checked against the description's kinds (FakePack), and the temporary
storage. The kernels themselves run in tests/gpu."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack
from cuprims import CountingIterator, OpKind, ProxyArray as P, ProxyValue as V
from cuprims._runtime import driver
from cuprims.algorithms.select import api as select_mod
from cuprims.algorithms.three_way_partition import api as twp

i4, i8, f4 = np.int32, np.int64, np.float32


@pytest.fixture
def recorder(monkeypatch, fresh_caches):
    mem = FakeMemory()
    launches = []
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    monkeypatch.setattr(driver, "launch", lambda k, grid, block, stream, params, shared=0:
                        launches.append((k, grid, block, params)))
    monkeypatch.setattr(driver, "alloc_async", lambda nbytes, stream, device=-1: mem.alloc(nbytes))
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))
    return SimpleNamespace(mem=mem, launches=launches)


def _plan(obj, **attrs):
    """A plan for device 0 from the build's exported metadata, kernel handles as names."""
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    plan = SimpleNamespace(device=0, temp_align=1, threads=meta["threads"], tile_items=meta["threads"] * meta["items"],
                           **attrs)
    obj._plans[0] = plan
    return plan, meta, names


def test_segmented_reduce_cub_and_sliced_dispatch(recorder):
    obj = cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                        op=OpKind.PLUS, h_init=V(f4), compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    plan, _, _ = _plan(obj, cub=names[0], slice=names[1], combine=names[2],
                       medium_tile=meta["medium_items_per_tile"], medium_segments=meta["medium_segments_per_block"],
                       small_tile=meta["small_items_per_tile"], small_segments=meta["small_segments_per_block"],
                       block_slots=64, accum_size=4)
    mem = recorder.mem
    x = FakeArray(mem, np.ones(10_000, f4))
    out = FakeArray.empty(mem, 1000, f4)
    starts = FakeArray(mem, np.arange(0, 10_000, 10, dtype=i8))
    ends = FakeArray(mem, np.arange(10, 10_001, 10, dtype=i8))
    kw = dict(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends, h_init=f4(0))
    obj._run(None, num_segments=1000, op=None, max_segment_size=10, stream=None, one_shot=True, **kw)
    kernel, grid, block, params = recorder.launches[-1]
    assert kernel == names[0] and grid == -(-1000 // plan.small_segments) and block == plan.threads
    assert params[4] == 1000 and params[7] == 10
    # few segments: slices and a combine, partials in temporary storage
    recorder.launches.clear()
    nbytes = obj(temp_storage=None, num_segments=3, max_segment_size=None, **kw)
    assert nbytes == 3 * (64 // 3) * 4
    obj._run(None, num_segments=3, op=None, max_segment_size=None, stream=None, one_shot=True, **kw)
    (k1, g1, _, p1), (k2, g2, _, p2) = recorder.launches
    assert (k1, g1, p1[3]) == (names[1], 3 * 21, 21) and (k2, g2, p2[4]) == (names[2], 3, 21)
    assert p1[5] == p2[0]   # the slices' partials are what the combine reads


def test_segmented_reduce_without_a_hint_runs_the_adaptive_kernel(recorder):
    from cuprims.algorithms.segmented_reduce.api import ADAPTIVE_WAVES

    obj = cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8),
                                        op=OpKind.PLUS, h_init=V(f4), compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    plan, _, _ = _plan(obj, cub=names[0], slice=names[1], combine=names[2], warp=names[3], adaptive=names[4],
                       medium_tile=meta["medium_items_per_tile"], medium_segments=meta["medium_segments_per_block"],
                       small_tile=meta["small_items_per_tile"], small_segments=meta["small_segments_per_block"],
                       block_slots=64, warp_threads=meta["warp_threads"], warp_blocks=32, adaptive_slots=24,
                       accum_size=4)
    mem, ns = recorder.mem, 1000
    lengths = np.arange(ns) % 5000                  # short and long segments, empty ones too: the kernel sorts them
    ends = np.cumsum(lengths).astype(i8)
    x = FakeArray(mem, np.ones(int(ends[-1]), f4))
    out = FakeArray.empty(mem, ns, f4)
    starts, ends = FakeArray(mem, ends - lengths), FakeArray(mem, ends)
    kw = dict(d_in=x, d_out=out, start_offsets_in=starts, end_offsets_in=ends, h_init=f4(2))
    assert obj(temp_storage=None, num_segments=ns, **kw) == 1       # no temporary storage (a query says 1)
    obj._run(None, num_segments=ns, op=None, max_segment_size=None, stream=None, one_shot=True, **kw)
    [(kernel, grid, block, params)] = recorder.launches
    # 125 groups of eight for 8 waves of 24 block slots: two blocks share each group
    assert (kernel, grid, block) == (names[4], 2 * -(-ns // 8), 256)
    assert params[:6] == (x.ptr, out.ptr, starts.ptr, ends.ptr, ns, 2) and params[7] == f4(2).tobytes()
    # many segments: the grid is capped at a few waves of the kernel's block slots
    recorder.launches.clear()
    big = 1 << 16
    wide = dict(kw, d_out=FakeArray.empty(mem, big, f4), start_offsets_in=FakeArray(mem, np.zeros(big, i8)),
                end_offsets_in=FakeArray(mem, np.zeros(big, i8)))
    obj._run(None, num_segments=big, op=None, max_segment_size=None, stream=None, one_shot=True, **wide)
    [(kernel, grid, _, params)] = recorder.launches
    assert (kernel, grid, params[5]) == (names[4], ADAPTIVE_WAVES * 24, 1)
    # a hint keeps its paths: a warp each within the warp tile, CUB's block each beyond
    for hint, kernel, grid in ((300, names[3], 32), (4096, names[0], ns)):
        recorder.launches.clear()
        obj._run(None, num_segments=ns, op=None, max_segment_size=hint, stream=None, one_shot=True, **kw)
        assert [(k, g) for k, g, _, _ in recorder.launches] == [(kernel, grid)]
    # few segments without a hint: still sliced over the GPU
    recorder.launches.clear()
    obj._run(None, num_segments=3, op=None, max_segment_size=None, stream=None, one_shot=True, **kw)
    assert [k for k, *_ in recorder.launches] == [names[1], names[2]]


def test_unique_by_key_dispatch(recorder):
    obj = cuprims.make_unique_by_key(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4), d_out_items=P(f4),
                                     d_out_num_selected=P(i8), op=OpKind.EQUAL_TO, compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    _plan(obj, init=names[0], sweep=names[1], padding=meta["tile_padding"], word_bytes=meta["tile_word_bytes"],
          vsmem_per_block=meta["vsmem_per_block"])
    mem, n = recorder.mem, 100_000
    arrays = [FakeArray(mem, np.zeros(n, dt)) for dt in (i4, f4, i4, f4)]
    count = FakeArray.empty(mem, 1, i8)
    obj._run(None, *arrays, count, None, n, None, True)
    (k0, g0, b0, p0), (k1, g1, b1, p1) = recorder.launches
    tiles = -(-n // (meta["threads"] * meta["items"]))
    assert (k0, g0, b0, p0[1]) == (names[0], -(-tiles // 128), 128, tiles)
    assert (k1, g1, p1[7], p1[8]) == (names[1], tiles, n, tiles) and p1[5] == p0[0] and p0[0] % 256 == 0
    # an empty input still zeroes the count, and launches nothing else
    recorder.launches.clear()
    obj._run(None, *arrays, count, None, 0, None, True)
    assert [k for k, *_ in recorder.launches] == [names[0]]


def test_three_way_partition_dispatch(recorder):
    obj = cuprims.make_three_way_partition(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
                                           d_unselected_out=P(i4), d_num_selected_out=P(i8),
                                           select_first_part_op=lambda v: v < 3,
                                           select_second_part_op=lambda v: v > 6, compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    _plan(obj, init=names[0], sweep=names[1], padding=meta["tile_padding"], word_bytes=meta["tile_word_bytes"])
    mem, n = recorder.mem, 50_000
    arrays = [FakeArray(mem, np.zeros(n, i4)) for _ in range(4)]
    counts = FakeArray.empty(mem, 2, i8)
    obj._run(None, *arrays, counts, lambda v: v < 3, lambda v: v > 6, n, None, True)
    (k0, _, b0, _), (k1, g1, _, p1) = recorder.launches
    assert (k0, b0, k1) == (names[0], 256, names[1]) and p1[8] == n and p1[9] == g1
    with pytest.raises(cuprims.errors.ArgumentError) as info:  # more items than the arrays hold
        obj._run(None, *arrays, counts, lambda v: v < 3, lambda v: v > 6, n + 1, None, True)
    assert info.value.argument == "d_in"


def test_three_way_partition_runs_partition_by_partition(recorder, monkeypatch):
    # as past 2^31 - 1 items, with partitions of 20000: each reads the counts the previous one left
    monkeypatch.setattr(twp, "_PARTITION_ITEMS", 20_000)
    obj = cuprims.make_three_way_partition(d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4),
                                           d_unselected_out=P(i4), d_num_selected_out=P(i8),
                                           select_first_part_op=lambda v: v < 3,
                                           select_second_part_op=lambda v: v > 6, compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    plan, _, _ = _plan(obj, init=names[0], sweep=names[1], padding=meta["tile_padding"],
                       word_bytes=meta["tile_word_bytes"])
    mem, n = recorder.mem, 50_000
    arrays = [FakeArray(mem, np.zeros(n, i4)) for _ in range(4)]
    counts = FakeArray.empty(mem, 2, i8)
    nbytes = obj(temp_storage=None, d_in=arrays[0], d_first_part_out=arrays[1], d_second_part_out=arrays[2],
                 d_unselected_out=arrays[3], d_num_selected_out=counts, num_items=n)
    states = 256 + (-(-20_000 // plan.tile_items) + plan.padding) * plan.word_bytes
    assert nbytes == states + 48 + 8
    temp = FakeArray(mem, np.zeros(nbytes, np.uint8))
    obj._run(temp, *arrays, counts, lambda v: v < 3, lambda v: v > 6, n, None, False)
    sweeps = [params for kernel, _, _, params in recorder.launches if kernel == names[1]]
    inits = [params for kernel, _, _, params in recorder.launches if kernel == names[0]]
    assert len(sweeps) == len(inits) == 3
    contexts = [struct.unpack("<??6xqQQ", p[10]) for p in sweeps]
    assert [(c[0], c[1], c[2]) for c in contexts] == [(True, False, 0), (False, False, 20_000), (False, True, 40_000)]
    assert [p[8] for p in sweeps] == [20_000, 20_000, 10_000]
    assert [p[9] for p in sweeps] == [-(-m // plan.tile_items) for m in (20_000, 20_000, 10_000)]
    # the buffers take turns: what a partition leaves is what the next one reads
    assert contexts[0][4] == contexts[1][3] and contexts[1][4] == contexts[2][3] != contexts[0][4]
    base = temp.__cuda_array_interface__["data"][0]
    for c in contexts:
        for address in c[3:]:
            assert address % 8 == 0 and base + states <= address and address + 24 <= base + nbytes
    assert all(p[4] == counts.__cuda_array_interface__["data"][0] for p in sweeps)  # the last writes the user's


def test_select_dispatch_with_an_iterator_input(recorder):
    obj = cuprims.make_select(d_in=CountingIterator(i8(0)), d_out=P(i8), d_num_selected_out=P(i4),
                              cond=lambda v: v % 2 == 0, compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    _plan(obj, init=names[0], sweep=names[1], padding=meta["tile_padding"], word_bytes=meta["tile_word_bytes"])
    mem, n = recorder.mem, 12_345
    out, count = FakeArray.empty(mem, n, i8), FakeArray.empty(mem, 1, i4)
    nbytes = obj(temp_storage=None, d_in=CountingIterator(i8(0)), d_out=out, d_num_selected_out=count, num_items=n,
                 cond=lambda v: v % 2 == 0)
    tiles = -(-n // (meta["threads"] * meta["items"]))
    assert nbytes == 256 + (tiles + meta["tile_padding"]) * meta["tile_word_bytes"]
    obj._run(None, CountingIterator(i8(0)), out, count, lambda v: v % 2 == 0, n, None, True)
    (_, _, _, p0), (k1, g1, b1, p1) = recorder.launches
    assert (k1, g1, b1) == (names[1], tiles, meta["threads"]) and p1[3] == p0[0] and p1[5:] == (n, tiles)


def test_select_runs_partition_by_partition(recorder, monkeypatch):
    # as past 2^31 - 1 items, with partitions of 5000: the running count passes between them
    monkeypatch.setattr(select_mod, "_PARTITION_ITEMS", 5000)
    obj = cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=lambda v: v > 2,
                              compute_capability=90)
    meta = obj._builds.result(90).meta
    names = obj._builds.source(90).name_expressions
    plan, _, _ = _plan(obj, init=names[0], sweep=names[1], padding=meta["tile_padding"],
                       word_bytes=meta["tile_word_bytes"])
    obj._plans[1] = SimpleNamespace(**{k: getattr(plan, k) for k in vars(plan)},
                                    partition_params=FakePack(obj.desc.variant(1).kernel_params()[1]))
    mem, n = recorder.mem, 12_000
    x, out, count = FakeArray(mem, np.zeros(n, i4)), FakeArray.empty(mem, n, i4), FakeArray.empty(mem, 1, i8)
    call = dict(d_in=x, d_out=out, d_num_selected_out=count, num_items=n, cond=lambda v: v > 2)
    states = 256 + (-(-5000 // plan.tile_items) + plan.padding) * plan.word_bytes
    assert obj(temp_storage=None, **call) == states + 16 + 8
    assert obj(temp_storage=None, **{**call, "num_items": 5000}) == states   # one partition: no counters
    temp = FakeArray(mem, np.zeros(states + 24, np.uint8))
    obj(temp_storage=temp, **call)
    sweeps = [params for kernel, _, _, params in recorder.launches if kernel == names[1]]
    assert len(sweeps) == 3 and [p[5] for p in sweeps] == [5000, 5000, 2000]
    contexts = [select_mod.PARTITION_CONTEXT.unpack(p[7]) for p in sweeps]
    assert [(c[0], c[3], c[4]) for c in contexts] == [(0, 1, 0), (5000, 0, 0), (10_000, 0, 1)]
    assert contexts[0][2] == contexts[1][1] and contexts[1][2] == contexts[2][1] != contexts[0][2]
    base = temp.__cuda_array_interface__["data"][0]
    for c in contexts:
        for address in c[1:3]:
            assert address % 8 == 0 and base + states <= address and address + 8 <= base + states + 24
