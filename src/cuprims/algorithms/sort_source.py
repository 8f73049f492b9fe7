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
  state, ``iterators/cuprims_iterator.cuh``), which CUB's block-sort kernel reads natively:
  keys as items of the key type, values copied bit for bit into their opaque carrier
  (:func:`_values_as_bytes`). A sort of arrays generates the text it always did.

Merge sort's built-in comparators are those of :mod:`.builtin_ops` (the ones binary search
uses too): LESS is ascending with NaN after every number (numpy's ``np.sort`` order), a
strict weak order also when keys are NaN (plain ``a < b`` is not, and gave an arbitrary
order), GREATER its reverse (NaN first).
"""

from __future__ import annotations

from cuprims._codegen import builtin_ops
from cuprims._value_types import ValueType
from cuprims.errors import ArgumentError
from cuprims.op import OpSpec

CUB = "CUB_NS_QUALIFIER"

_UNSIGNED_BY_SIZE = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}

RADIX_META = (
    "key_size", "value_size", "offset_size", "key_bits", "algorithm",
    "single_tile_threads", "single_tile_items",
    "histogram_threads", "exclusive_sum_threads",
    "onesweep_threads", "onesweep_items", "radix_bits",
)


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
FLOAT_BITS = {
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
    bits, neg_inf, nan = FLOAT_BITS[key.code]
    name = NAN_LAST_KEY
    f = "static constexpr _CCCL_HOST_DEVICE _CCCL_FORCEINLINE UnsignedBits"
    return (
        "// floating-point keys in numpy's order (see cuprims/algorithms/sort_source.py, nan_last_radix_traits)\n"
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


# ------------------------------------------------------------------------ merge sort

def check_comparator_builtin(op: OpSpec, key: ValueType, argument: str = "op") -> None:
    """Raise ArgumentError unless built-in ``op`` orders ``key`` keys (LESS or GREATER; see
    :func:`.builtin_ops.check_comparator_builtin`)."""
    builtin_ops.check_comparator_builtin(op, key, argument)


