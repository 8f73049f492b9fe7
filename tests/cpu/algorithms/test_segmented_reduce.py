"""Segmented reduce on the CPU: ahead-of-time sm_90 builds (arrays and iterator offsets),
goldens, the kernels' parameters against the cubin, and the host dispatch (bad arguments:
tests/cpu/reliability/test_bad_arguments.py)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import check_golden, check_kernel_params, counters, delta, render_source
from cuprims import CountingIterator, OpKind, ProxyArray as P, ProxyValue as V, TransformIterator
from cuprims._compile import elfmeta
from cuprims.algorithms.segmented_reduce.api import (ADAPTIVE_SPREAD_WAVES, ADAPTIVE_WAVES, adaptive_grid, cub_grid,
                                                     slices_for, warp_grid)

f4, i4, i8 = np.float32, np.int32, np.int64


def _fixed_offsets(size: int):
    starts = TransformIterator(CountingIterator(i8(0)), lambda i: i * size)
    ends = TransformIterator(CountingIterator(i8(1)), lambda i: i * size)
    return starts, ends


def _make(**over):
    kw = dict(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8), end_offsets_in=P(i8), op=OpKind.PLUS,
              h_init=V(f4), compute_capability=90)
    kw.update(over)
    return cuprims.make_segmented_reduce(**kw)


def test_golden_arrays_plus(shared_cache):
    obj = _make()
    check_golden("segmented_reduce_f4_plus_i8_offsets_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    meta = obj._builds.result(90).meta
    assert meta["threads"] * meta["items"] > meta["medium_items_per_tile"] > meta["small_items_per_tile"] >= 1
    assert meta["small_segments_per_block"] == meta["threads"]            # a thread per segment
    assert meta["medium_segments_per_block"] * 32 == meta["threads"]     # a warp per segment


def test_iterator_offsets_and_python_op(shared_cache):
    starts, ends = _fixed_offsets(256)
    obj = _make(d_in=P(i4), d_out=P(i8), start_offsets_in=starts, end_offsets_in=ends, op=lambda a, b: a + b,
                h_init=i8(0))
    check_golden("segmented_reduce_i4_to_i8_python_fixed_size_sm90", render_source(obj._builds.source(90)))
    check_kernel_params(obj, 90)
    # new iterator objects of the same kinds (and equal operators) are the same build
    before = counters()
    starts2, ends2 = _fixed_offsets(256)
    again = _make(d_in=P(i4), d_out=P(i8), start_offsets_in=starts2, end_offsets_in=ends2, op=lambda a, b: a + b,
                  h_init=i8(0))
    assert again is obj and delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


def test_struct_values_and_uint32_offsets(shared_cache):
    pair = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})

    def widest(a, b):
        return pair(min(a.lo, b.lo), max(a.hi, b.hi))

    obj = _make(d_in=P(pair.dtype), d_out=P(pair.dtype), start_offsets_in=P(np.uint32), end_offsets_in=P(np.uint32),
                op=widest, h_init=pair(np.inf, -np.inf))
    check_kernel_params(obj, 90)


PLAN = SimpleNamespace(tile_items=4096, small_tile=16, small_segments=256, medium_tile=512, medium_segments=8,
                       block_slots=132 * 8, warp_threads=256, warp_blocks=132 * 8, adaptive_slots=132 * 4)


@pytest.mark.parametrize("segments, hint, grid", [
    (10_000, 10, 40),          # a thread per segment: 256 per block
    (10_000, 300, 1250),       # a warp per segment: 8 per block
    (10_000, 5000, 10_000),    # a block per segment
    (10_000, 0, 10_000),       # no hint: a block per segment
])
def test_cub_mapping_follows_the_hint(segments, hint, grid):
    assert slices_for(PLAN, segments, hint) == 1
    assert cub_grid(PLAN, segments, hint) == grid


@pytest.mark.parametrize("segments, hint, blocks", [
    (5_000, 300, 625),            # eight warps a block, one segment each
    (1 << 20, 256, 132 * 8),      # more segments than a full GPU of warps: the warps stride
    (3, 17, 1),
    (10_000, 16, 0),              # a thread per segment: CUB's kernel
    (10_000, 513, 0),             # past the warp tile: CUB's block per segment
    (10_000, 0, 0),
])
def test_warp_kernel_takes_the_hints_within_a_warp_tile(segments, hint, blocks):
    assert warp_grid(PLAN, segments, hint) == blocks


def test_warp_kernel_is_built_and_exported(shared_cache):
    obj = _make()
    loaded_names = obj._builds.source(90).name_expressions
    assert loaded_names[3].startswith("cuprims::segmented_reduce::warp_kernel<")
    assert obj._builds.result(90).meta["warp_threads"] == 256


def test_few_segments_are_sliced_over_the_whole_gpu():
    assert slices_for(PLAN, 1, 0) == PLAN.block_slots                 # one huge segment, no hint
    assert slices_for(PLAN, 1, 1 << 28) == PLAN.block_slots           # a hint larger than the GPU
    assert slices_for(PLAN, 4, 10 * 4096) == 10                        # no more slices than tiles
    assert slices_for(PLAN, 4, 4 * 4096) == 1                          # short enough for one block
    assert slices_for(PLAN, PLAN.block_slots, 0) == 1                  # enough segments to fill the GPU
    assert slices_for(PLAN, 0, 0) == 1


def _frame_bytes(cubin: bytes, lowered: str) -> int:
    """Stack frame of one kernel of ``cubin``: its EIATTR_FRAME_SIZE record (0: the kernel
    keeps every value in registers, spills none)."""
    import struct

    headers = elfmeta._section_headers(cubin)
    symtab = next(h for h in headers if h[1] == 2)
    strtab = headers[symtab[6]]
    index = None
    for j in range(symtab[5] // 24):
        name_at = strtab[4] + struct.unpack_from("<I", cubin, symtab[4] + j * 24)[0]
        if cubin[name_at:cubin.index(b"\0", name_at)] == lowered.encode():
            index = j
    assert index is not None, lowered
    info = elfmeta.sections(cubin)[".nv.info"]
    frames = [struct.unpack_from("<II", info, at) for attr, at in elfmeta._sval_records(info)
              if attr == elfmeta._EIATTR_FRAME_SIZE]
    return dict(frames).get(index, 0)


@pytest.mark.parametrize("case", ["f4_plus", "f8_max_i4_offsets", "i1_into_i4_iterator_offsets",
                                  "pair_python_op_u4_offsets", "counting_input_python_op"])
def test_adaptive_kernel_is_built_for_each_kind_of_segment_source(shared_cache, case):
    pair = cuprims.gpu_struct({"lo": np.float32, "hi": np.float32})

    def widest(a, b):
        return pair(min(a.lo, b.lo), max(a.hi, b.hi))

    starts, ends = _fixed_offsets(300)
    over = {
        "f4_plus": {},
        "f8_max_i4_offsets": dict(d_in=P(np.float64), d_out=P(np.float64), start_offsets_in=P(i4),
                                  end_offsets_in=P(i4), op=OpKind.MAXIMUM, h_init=V(np.float64)),
        # items of another type than the sums: read one at a time, CUB's items per thread ahead
        "i1_into_i4_iterator_offsets": dict(d_in=P(np.int8), d_out=P(i4), start_offsets_in=starts,
                                            end_offsets_in=ends, h_init=V(i4)),
        # a struct aligned to less than its size: vectors only where its items fall on them
        "pair_python_op_u4_offsets": dict(d_in=P(pair.dtype), d_out=P(pair.dtype), start_offsets_in=P(np.uint32),
                                          end_offsets_in=P(np.uint32), op=widest, h_init=pair(np.inf, -np.inf)),
        "counting_input_python_op": dict(d_in=CountingIterator(i8(0)), d_out=P(i8), op=lambda a, b: a + b,
                                         h_init=V(i8)),
    }[case]
    obj = _make(**over)
    check_kernel_params(obj, 90)
    source, result = obj._builds.source(90), obj._builds.result(90)
    adaptive = source.name_expressions[4]
    assert adaptive.startswith("cuprims::segmented_reduce::adaptive_kernel<cuprims_selector_t, ")
    if case in ("f4_plus", "f8_max_i4_offsets"):
        # the next group's offsets stay in registers while a group is reduced (a spill
        # would wait for them at once); so do the warp kernel's
        assert _frame_bytes(result.cubin, result.kernels[adaptive]) == 0
        assert _frame_bytes(result.cubin, result.kernels[source.name_expressions[3]]) == 0


@pytest.mark.parametrize("segments, blocks, parts", [
    (9, 16, 8),                                   # few groups of eight: a block per segment
    (1000, 1000, 8),                              # a thousand long rows get a thousand blocks
    (5000, 4375, 7),                              # seven blocks share each group: 8 waves of blocks
    (1 << 15, 1 << 13, 2),
    (1 << 16, 1 << 13, 1),                        # 2^16 irregular segments: a block per group, below the cap
    (1 << 20, ADAPTIVE_WAVES * 132 * 4, 1),       # capped: the blocks stride over the groups
    ((1 << 31) - 1, ADAPTIVE_WAVES * 132 * 4, 1),
])
def test_adaptive_grid_spreads_few_groups_and_caps_many(segments, blocks, parts):
    assert adaptive_grid(PLAN, segments) == (blocks, parts)
    groups = -(-segments // 8)
    assert blocks == groups * parts if parts > 1 else blocks <= groups   # the kernel's mapping needs this
    assert blocks >= min(ADAPTIVE_SPREAD_WAVES * PLAN.adaptive_slots, segments)
