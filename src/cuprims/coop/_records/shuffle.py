"""A logical warp's shuffles: each lane reads a value another lane of its logical warp
passed (CUB's ``ShuffleIndex``, ``ShuffleUp`` and ``ShuffleDown``, which move any type a
32-bit word at a time; xor through ``ShuffleIndex``).

CUB has these as functions, not a class: the record's type is a small class of ours
around them (``cuprims_warp_shuffle``, defined by the record's header text), so that the
provider is put together as every other one. ``spec.mode`` is the shuffle: index, up,
down or xor. Entry point: ``SYM(const T* in, T* out, int arg)`` (``arg``: the source lane,
the distance, or the lane mask).

Which lanes take part: the logical warp's, less those past the block's last thread (a
block whose size is not a multiple of 32 has a partial last warp).
"""

from __future__ import annotations

from typing import Any

from cuprims.coop._records._abi import Entry, count, thread_in, thread_out
from cuprims.coop._records._base import Call, Record, roles
from cuprims.coop._records._texts import dispatch
from cuprims.coop._spec import ProviderSpec
from cuprims.errors import ArgumentError

MODES = ("index", "up", "down", "xor")
# each shuffle's integer argument, as Style 1 and Style 2 name it
ARGUMENT = {"index": "src_lane", "up": "delta", "down": "delta", "xor": "lane_mask"}

_HEADER = """#include <cub/util_ptx.cuh>
template <typename T, int LANES>
struct cuprims_warp_shuffle
{
  struct TempStorage {};
  __device__ __forceinline__ explicit cuprims_warp_shuffle(TempStorage&) {}
  // the calling thread's index in the block, and its lane (warps are made of consecutive ones)
  static __device__ __forceinline__ unsigned tid()
  {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  }
  static __device__ __forceinline__ unsigned lane() { return tid() & 31u; }
  // the logical warp's lanes that exist
  static __device__ __forceinline__ unsigned members()
  {
    const unsigned own = LANES == 32 ? 0xffffffffu : (((1u << LANES) - 1u) << (LANES * (lane() / LANES)));
    const unsigned left = blockDim.x * blockDim.y * blockDim.z - (tid() & ~31u);
    return left >= 32u ? own : own & ((1u << left) - 1u);
  }
  __device__ __forceinline__ T index(const T& x, int src_lane) { return cub::ShuffleIndex<LANES>(x, src_lane, members()); }
  __device__ __forceinline__ T up(const T& x, int delta) { return cub::ShuffleUp<LANES>(x, delta, 0, members()); }
  __device__ __forceinline__ T down(const T& x, int delta)
  {
    return cub::ShuffleDown<LANES>(x, delta, LANES - 1, members());
  }
  __device__ __forceinline__ T xor_(const T& x, int lane_mask)
  {
    return cub::ShuffleIndex<LANES>(x, static_cast<int>(lane() % LANES) ^ lane_mask, members());
  }
};"""


def _entries(spec: ProviderSpec, s: str) -> list[Entry]:
    t = spec.vt.cpp
    method = "xor_" if spec.mode == "xor" else spec.mode
    return [Entry("", (thread_in(t, "in", one=True), thread_out(t, "out", one=True), count("arg")),
                  f"*out = prim.{method}(*in, arg);")]


def _style1(spec: ProviderSpec) -> str:
    """``prim(item, <src_lane | delta | lane_mask>, temp_storage=None) -> value``."""
    arg = ARGUMENT[spec.mode]
    return (f"def prim(item, {arg}, temp_storage=None):\n    inp = cuda.local.array(1, T)\n    inp[0] = item\n"
            "    out = cuda.local.array(1, T)\n" + dispatch("ext", f"__addr(inp), __addr(out), i32({arg})", None)
            + "    return out[0]\n")


def _plan(record: Record, o: Any, group: Any, value: Any, arg: Any, *_: Any) -> Any:
    from cuprims.coop._style2 import operands as s2

    vt, n, is_items = s2.value_of(value, "value")
    if is_items:
        raise ArgumentError("value", "one value a lane (a number, bool, complex or struct), not a coop.ThreadData",
                            value)
    mode = o.primitive[len("shuffle_"):]
    s2.integer(arg, ARGUMENT[mode])
    spec = ProviderSpec(record.kind, vt, s2.dims(group), 1, "", mode=mode)
    return s2.Plan(spec, None, s2.result_type(vt), "value_arg_out", (0, 1))


CALLS = tuple(Call(f"shuffle_{mode}", roles(("value", ARGUMENT[mode])), _plan) for mode in MODES)

WARP_SHUFFLE = Record("warp_shuffle", _HEADER, "cuprims_warp_shuffle<{t}, {x}>", _entries, _style1, CALLS,
                      warp=True, barrier=False)
