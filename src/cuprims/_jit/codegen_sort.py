"""Sorting: CUDA C++ source for device-wide radix sort and merge sort (pure string work).

Both generators instantiate CUB's own kernel templates (``kernel_radix_sort.cuh``,
``kernel_merge_sort.cuh``) with CUB's policy selectors and export, through
``cuprims_meta``, every policy value the Python host dispatch needs (block sizes, items
per thread, radix bits, virtual shared memory per block, type sizes). Agreements the
host relies on are pinned with ``static_assert`` in the generated unit.

Types:
* radix-sort keys are the real C++ arithmetic type (CUB's radix traits twiddle their
  bits), except floating-point keys: the kernels sort those as a twin type of the same
  bits whose traits order them as numpy does, NaN last (:func:`nan_last_radix_traits`;
  the policy is still chosen for the real type). Values are moved as opaque bytes: an
  unsigned integer of the same size where size == alignment (1, 2, 4, 8), else a
  storage struct of that size and alignment, so every value type of one shape shares
  one build;
* merge-sort keys are the real type for scalars (built-in comparisons need it) and a
  storage struct for structs; merge-sort values are opaque bytes like radix-sort values.
  Merge sort's inputs may be iterators (``cuprims::input_iterator`` over a generated
  state, ``kernels/cuprims_iterator.cuh``), which CUB's block-sort kernel reads natively:
  keys as items of the key type, values copied bit for bit into their opaque carrier
  (:func:`_values_as_bytes`). A sort of arrays generates the text it always did.

Merge sort's built-in comparators are those of :mod:`.functors` (the ones binary search
uses too): LESS is ascending with NaN after every number (numpy's ``np.sort`` order), a
strict weak order also when keys are NaN (plain ``a < b`` is not, and gave an arbitrary
order), GREATER its reverse (NaN first).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import ArgumentError
from ..op import OpSpec
from ..types import ValueType
from . import functors
from .codegen import Source, iterator_parts, meta_export, op_symbol, preamble, tuned_selector

_CUB = "CUB_NS_QUALIFIER"

_UNSIGNED_BY_SIZE = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}

RADIX_META = (
    "key_size", "value_size", "offset_size", "key_bits", "algorithm",
    "single_tile_threads", "single_tile_items",
    "histogram_threads", "exclusive_sum_threads",
    "onesweep_threads", "onesweep_items", "radix_bits",
)

MERGE_META = (
    "key_size", "value_size", "offset_size", "threads", "items", "block_sort_vsmem", "merge_vsmem",
    "partition_threads",
)

# DeviceMergeSortPartitionKernel has no launch bounds; CUB's host dispatch launches it
# with this many threads per block (a host-side constant of CUB's dispatch, mirrored here).
MERGE_PARTITION_THREADS = 256


def carrier_alignment(vt: ValueType) -> int:
    """Alignment of the opaque carrier of ``vt`` values: what numpy guarantees for an
    array of them (complex128 arrays are 8-aligned, though cuda::std::complex wants 16)."""
    return vt.alignment if vt.is_struct else vt.dtype.alignment


def bytes_type(vt: ValueType) -> tuple[str, str]:
    """(C++ type name, declaration or "") of an opaque carrier for values of ``vt``."""
    align = carrier_alignment(vt)
    if vt.size == align and vt.size in _UNSIGNED_BY_SIZE:
        return _UNSIGNED_BY_SIZE[vt.size], ""
    name = f"cuprims_bytes_{vt.size}_{align}"
    decl = (f"struct __align__({align}) {name} {{ unsigned char bytes[{vt.size}]; }};\n"
            f"static_assert(sizeof({name}) == {vt.size} && alignof({name}) == {align});\n")
    return name, decl


RADIX_KEY_KINDS = frozenset("biuf")


def check_radix_key(vt: ValueType, argument: str = "d_in_keys") -> None:
    if vt.is_struct or vt.kind not in RADIX_KEY_KINDS:
        raise ArgumentError(argument, "keys of a bool, integer or floating-point dtype (radix sort orders "
                            "keys by their bits; sort structs with merge_sort)", vt.dtype)


def radix_tuning(key: ValueType, value: ValueType | None, wide_offsets: bool, arch: int) -> dict[str, int]:
    """Where cuprims departs from CUB's radix-sort policy, and why (H200 measurements,
    bench/tune_probe.py, in bench/results/tune-*.md).

    sm_90, 4-byte integer keys alone with 32-bit offsets: CUB gives them 384 x 20 items
    per onesweep tile (its float keys and 64-bit offsets get 19); 384 x 19 sorts 2^28
    uint32 keys 16% faster (5.39 against 6.28 ms). Everything else stays CUB's.
    """
    if arch == 90 and value is None and not wide_offsets and key.size == 4 and key.kind in "iu":
        return {"onesweep.items_per_thread": 19}
    return {}


# Bits of each floating-point key type: (unsigned type, -inf, the canonical quiet NaN).
_FLOAT_BITS = {
    "f2": ("unsigned short", "0xfc00u", "0x7e00u"),
    "f4": ("unsigned int", "0xff800000u", "0x7fc00000u"),
    "f8": ("unsigned long long", "0xfff0000000000000ull", "0x7ff8000000000000ull"),
}

NAN_LAST_KEY = "cuprims_nan_last_key_t"


def nan_last_radix_traits(key: ValueType) -> str:
    """C++ declaring ``cuprims_nan_last_key_t``, a key type with ``key``'s bits that CUB's
    radix sort orders as numpy sorts: NaNs of either sign after +inf (ascending), before
    every number (descending), all NaNs tied (stable among themselves).

    CUB orders keys by "bit-ordered" words its ``NumericTraits<T>::TwiddleIn`` makes from
    their bits (``TwiddleOut`` turns them back). For floats it flips the sign bit of a
    positive key and every bit of a negative one, which puts NaNs with the sign bit set
    below -inf. ``NumericTraits`` may be specialised for one's own type (and
    ``cuda::is_floating_point_v`` with it, so that CUB's digit extractors still tie -0.0
    with +0.0); this type's traits make

    * every NaN the bit-ordered word ~0 (above +inf's), which leaves the sort as the
      canonical quiet NaN (float32 0x7fc00000, float64 0x7ff8000000000000, float16
      0x7e00): a NaN's sign and payload are not kept;
    * -inf the word 0, which leaves as -inf;
    * every other key the word CUB's own float twiddle makes.

    Why ~0 and 0: CUB pads the last tile with ``MAX_KEY`` (ascending) or ``LOWEST_KEY``
    (descending) and counts the padding in its digit histograms, so their words must be
    ~0 and 0, the top digit of every pass (after the inversion a descending sort applies).
    A NaN and -inf are the keys that may tie with that padding; they tie with it as the
    NaN 0x7fffffff already does in CUB's own float order, and the sort being stable puts
    the padding after them. Keeping every other word CUB's keeps -0.0 and +0.0 tied in
    both orders (CUB's tie relies on their words being complements) and the words of
    all other keys, so their output bits and ``begin_bit``/``end_bit`` ranges over them
    mean what they meant. NaNs cannot keep their bits: putting all of them above +inf
    with distinct words forces every number's word down by the count of negative NaN
    patterns, which breaks that complement. Cost: two compares and selects per key as it
    is loaded and stored, in kernels bound by memory traffic.
    """
    bits, neg_inf, nan = _FLOAT_BITS[key.code]
    name = NAN_LAST_KEY
    f = "static constexpr _CCCL_HOST_DEVICE _CCCL_FORCEINLINE UnsignedBits"
    return (
        "// floating-point keys in numpy's order (see cuprims/_jit/codegen_sort.py, nan_last_radix_traits)\n"
        f"struct __align__({key.size}) {name} {{ {bits} bits; }};\n"
        f"namespace cuda {{ template <> inline constexpr bool is_floating_point_v<{name}> = true; }}\n"
        "CUB_NAMESPACE_BEGIN\n"
        f"template <> struct NumericTraits<{name}> : NumericTraits<{key.cpp}>\n"
        "{\n"
        f"  static constexpr UnsignedBits NEGATIVE_INFINITY = {neg_inf}, QUIET_NAN = {nan};\n"
        "  static constexpr UnsignedBits ALL_ONES = UnsignedBits(~UnsignedBits(0));\n"
        "  static constexpr UnsignedBits LOWEST_KEY = NEGATIVE_INFINITY; // bit-ordered 0\n"
        "  static constexpr UnsignedBits MAX_KEY = QUIET_NAN; // bit-ordered ~0\n"
        f"  {f} TwiddleIn(UnsignedBits key)\n"
        "  {\n"
        "    return UnsignedBits(key & ~HIGH_BIT) > UnsignedBits(NEGATIVE_INFINITY & ~HIGH_BIT) ? ALL_ONES // NaN\n"
        "         : key == NEGATIVE_INFINITY ? UnsignedBits(0)\n"
        "         : UnsignedBits(key ^ ((key & HIGH_BIT) ? ALL_ONES : HIGH_BIT)); // CUB's float twiddle\n"
        "  }\n"
        f"  {f} TwiddleOut(UnsignedBits key)\n"
        "  {\n"
        "    return key == ALL_ONES ? QUIET_NAN\n"
        "         : key == UnsignedBits(0) ? NEGATIVE_INFINITY\n"
        "         : UnsignedBits(key ^ ((key & HIGH_BIT) ? HIGH_BIT : ALL_ONES));\n"
        "  }\n"
        "};\n"
        "CUB_NAMESPACE_END\n"
    )


def radix_sort_source(*, key: ValueType, value: ValueType | None, descending: bool, wide_offsets: bool,
                      arch: int, policy_overrides: Mapping[str, Any] | None = None) -> Source:
    """Source for CUB's onesweep radix sort of ``key`` keys (and ``value`` values, if given).

    Kernels, in this order (the host relies on it):
      0 single tile, 1 histogram, 2 exclusive sum, 3 zero-fill (counters, bins, look-back),
      4 onesweep pass.

    ``policy_overrides`` replaces members of CUB's policy (e.g.
    ``{"onesweep.items_per_thread": 19}``, see :func:`codegen.tuned_selector`); ``None``
    takes cuprims' measured tuning (:func:`radix_tuning`), ``{}`` CUB's policy as it is.
    """
    check_radix_key(key)
    if policy_overrides is None:
        policy_overrides = radix_tuning(key, value, wide_offsets, arch)
    offset_t = "unsigned long long" if wide_offsets else "unsigned int"
    if value is None:
        value_t, value_decl = f"{_CUB}::NullType", ""
    else:
        value_t, value_decl = bytes_type(value)
    order = "Descending" if descending else "Ascending"
    # the kernels sort floating-point keys as their NaN-last twin (same bits, same size);
    # the policy is still CUB's for the real type
    sorted_key = NAN_LAST_KEY if key.kind == "f" else "cuprims_key_t"
    text = (
        preamble((key,), arch)
        + "#include <cub/device/dispatch/kernels/kernel_radix_sort.cuh>\n\n"
        + value_decl
        + (nan_last_radix_traits(key) if key.kind == "f" else "")
        + f"using cuprims_key_t = {key.cpp};\n"
        + f"using cuprims_value_t = {value_t};\n"
        + f"using cuprims_offset_t = {offset_t};\n"
        + tuned_selector(_CUB + "::detail::radix_sort::policy_selector_from_types<cuprims_key_t, cuprims_value_t, "
                         "cuprims_offset_t>", policy_overrides)
        + "namespace cuprims_radix = " + _CUB + "::detail::radix_sort;\n"
        + "constexpr auto cuprims_policy = cuprims_selector_t{}(::cuda::compute_capability{"
        + f"{arch // 10}, {arch % 10}" + "});\n"
        # The onesweep pipeline computes every pass's digit histogram at once with one bit
        # width; the host walks the bit range in steps of that width.
        + "static_assert(cuprims_policy.histogram.radix_bits == cuprims_policy.onesweep.radix_bits &&\n"
        + "              cuprims_policy.exclusive_sum.radix_bits == cuprims_policy.onesweep.radix_bits,\n"
        + "              \"cuprims assumes one digit width across CUB's onesweep kernels\");\n"
        # the host sizes look-back flags and counters as int (CUB's PortionOffsetT)
        + "static_assert(sizeof(int) == 4, \"cuprims sizes onesweep look-back words as 4 bytes\");\n"
        + meta_export((
            ("key_size", "sizeof(cuprims_key_t)"),
            ("value_size", "0" if value is None else "sizeof(cuprims_value_t)"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("key_bits", "8 * sizeof(cuprims_key_t)"),
            ("algorithm", "static_cast<int>(cuprims_policy.algorithm)"),
            ("single_tile_threads", "cuprims_policy.single_tile.threads_per_block"),
            ("single_tile_items", "cuprims_policy.single_tile.items_per_thread"),
            ("histogram_threads", "cuprims_policy.histogram.threads_per_block"),
            ("exclusive_sum_threads", "cuprims_policy.exclusive_sum.threads_per_block"),
            ("onesweep_threads", "cuprims_policy.onesweep.threads_per_block"),
            ("onesweep_items", "cuprims_policy.onesweep.items_per_thread"),
            ("radix_bits", "cuprims_policy.onesweep.radix_bits"),
        ))
    )
    o = f"cub::SortOrder::{order}"
    k, v, off = sorted_key, "cuprims_value_t", "cuprims_offset_t"
    names = (
        f"cuprims_radix::DeviceRadixSortSingleTileKernel<cuprims_selector_t, {o}, {k}, {v}, {off}>",
        f"cuprims_radix::DeviceRadixSortHistogramKernel<cuprims_selector_t, {o}, {k}, {off}>",
        f"cuprims_radix::DeviceRadixSortExclusiveSumKernel<cuprims_selector_t, {off}>",
        f"cuprims_radix::DeviceRadixSortInitKernel<cuprims_selector_t, int, {off}>",
        f"cuprims_radix::DeviceRadixSortOnesweepKernel<cuprims_selector_t, {o}, {k}, {v}, {off}, int, int>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=(), meta_fields=RADIX_META)


# ------------------------------------------------------------------------ merge sort

def check_comparator_builtin(op: OpSpec, key: ValueType, argument: str = "op") -> None:
    """Raise ArgumentError unless built-in ``op`` orders ``key`` keys (LESS or GREATER; see
    :func:`.functors.check_comparator_builtin`)."""
    functors.check_comparator_builtin(op, key, argument)


def _values_as_bytes(values_in: Any, value: ValueType) -> str:
    """C++ reading a values iterator's items as the opaque carrier the sort moves
    (``cuprims_value_t``): its state struct wrapped in one whose items are the same bytes
    (a bitwise copy, never a numeric conversion), and ``cuprims_values_in_t``, the
    kernel parameter over it, laid out as ``values_in``'s own iterator."""
    state, own = values_in.unit.type_name, values_in.value.cpp
    name = "cuprims_values_bytes_t"
    adapted = f"cuprims::input_iterator<{name}, cuprims_value_t>"
    return (
        "// the values iterator's items, bit for bit, as the bytes the sort moves\n"
        f"struct {name}\n{{\n  {state} inner;\n"
        "  __device__ __forceinline__ cuprims_value_t operator[](long long i) const\n  {\n"
        f"    const {own} v = inner[i];\n    cuprims_value_t r;\n"
        "    ::cuda::std::memcpy(&r, &v, sizeof(r));\n    return r;\n  }\n};\n"
        f"static_assert(sizeof({own}) == sizeof(cuprims_value_t) && sizeof(cuprims_value_t) == {value.size}, "
        "\"values iterator items differ in size from the sorted values\");\n"
        f"using cuprims_values_in_t = {adapted};\n"
        f"static_assert(sizeof(cuprims_values_in_t) == {values_in.state_size} && alignof(cuprims_values_in_t) == "
        f"{values_in.state_alignment}, \"iterator layout differs from cuprims' packing\");\n"
    )


def merge_sort_source(*, key: ValueType, value: ValueType | None, op: OpSpec, wide_offsets: bool,
                      arch: int, keys_in: Any = None, values_in: Any = None) -> Source:
    """Source for CUB's merge sort of ``key`` keys (and ``value`` values) ordered by ``op``.

    ``keys_in``/``values_in`` (argument kinds, ``algorithms._arguments.ArgKind``; None or
    an array kind for arrays) give the C++ of iterator inputs: CUB's block-sort kernel
    reads them through iterators of items of ``key`` (converted as
    ``cuprims::input_iterator`` does) and of the values' opaque carrier (the iterator's
    items copied bitwise); every other kernel works on the output and scratch arrays.

    Kernels, in this order: 0 block sort, 1 partition, 2 merge.
    """
    if op.kind == "builtin":
        check_comparator_builtin(op, key)
    # merge sort's unit never zeroed the flag a linked comparator writes (its text, and so
    # every cache key, stays as it was)
    functor, externs = functors.comparator_functor("cuprims_compare_t", op, key, op_symbol(op, "cuprims_op_0"),
                                                   zero_flag=False)
    keys_in = keys_in if keys_in is not None and keys_in.unit is not None else None
    values_in = values_in if value is not None and values_in is not None and values_in.unit is not None else None
    iterator_text, iterator_types, iterator_symbols = iterator_parts((keys_in, values_in))
    externs += iterator_symbols
    offset_t = "unsigned long long" if wide_offsets else "unsigned int"
    if value is None:
        value_t, value_decl = f"{_CUB}::NullType", ""
    else:
        value_t, value_decl = bytes_type(value)
    # what the block-sort kernel reads: arrays as pointers (the text of a sort of arrays is
    # as it always was), iterators under the aliases declared below
    key_in_t = "cuprims_key_t*" if keys_in is None else "cuprims_keys_in_t"
    value_in_t = "cuprims_value_t*" if values_in is None else "cuprims_values_in_t"
    inputs = "" if keys_in is None else f"using cuprims_keys_in_t = {keys_in.cpp()};\n"
    if values_in is not None:
        inputs += _values_as_bytes(values_in, value)
    agents = (f"cuprims_merge::merge_sort_vsmem_helper_t<cuprims_policy_getter_t, {key_in_t}, {value_in_t}, "
              "cuprims_key_t*, cuprims_value_t*, cuprims_offset_t, cuprims_compare_t, cuprims_key_t, cuprims_value_t>")
    text = (
        preamble((key,) + iterator_types, arch)
        + "#include <cub/device/dispatch/kernels/kernel_merge_sort.cuh>\n"
        + ("#include <cuprims_iterator.cuh>\n" + iterator_text if iterator_text else "") + "\n"
        + value_decl
        + functor
        + f"using cuprims_key_t = {key.cpp};\n"
        + f"using cuprims_value_t = {value_t};\n"
        + f"using cuprims_offset_t = {offset_t};\n"
        + inputs
        + "using cuprims_selector_t = " + _CUB + "::detail::merge_sort::policy_selector_from_types<cuprims_key_t*>;\n"
        + "namespace cuprims_merge = " + _CUB + "::detail::merge_sort;\n"
        # the policy the kernels use on this arch, after CUB's fallback for large types
        + "using cuprims_policy_getter_t = " + _CUB + "::detail::device_policy_getter<cuprims_selector_t, "
        + f"{arch}>;\n"
        + f"using cuprims_agents_t = {agents};\n"
        + "constexpr auto cuprims_policy = cuprims_agents_t::policy;\n"
        + "using cuprims_block_sort_vsmem_t = " + _CUB
        + "::detail::vsmem_helper_impl<typename cuprims_agents_t::block_sort_agent_t>;\n"
        + "using cuprims_merge_vsmem_t = " + _CUB
        + "::detail::vsmem_helper_impl<typename cuprims_agents_t::merge_agent_t>;\n"
        + meta_export((
            ("key_size", "sizeof(cuprims_key_t)"),
            ("value_size", "0" if value is None else "sizeof(cuprims_value_t)"),
            ("offset_size", "sizeof(cuprims_offset_t)"),
            ("threads", "cuprims_policy.threads_per_block"),
            ("items", "cuprims_policy.items_per_thread"),
            ("block_sort_vsmem", "cuprims_block_sort_vsmem_t::vsmem_per_block"),
            ("merge_vsmem", "cuprims_merge_vsmem_t::vsmem_per_block"),
            ("partition_threads", str(MERGE_PARTITION_THREADS)),
        ))
    )
    # the merge kernel names the block sort's input types too (CUB sizes both agents' shared
    # memory together)
    args = (f"cuprims_selector_t, {key_in_t}, {value_in_t}, cuprims_key_t*, cuprims_value_t*, "
            "cuprims_offset_t, cuprims_compare_t, cuprims_key_t, cuprims_value_t")
    names = (
        f"cuprims_merge::DeviceMergeSortBlockSortKernel<{args}>",
        "cuprims_merge::DeviceMergeSortPartitionKernel<cuprims_key_t*, cuprims_offset_t, cuprims_compare_t, "
        "cuprims_key_t>",
        f"cuprims_merge::DeviceMergeSortMergeKernel<{args}>",
    )
    return Source(text=text, name_expressions=names, extern_symbols=externs, meta_fields=MERGE_META)
