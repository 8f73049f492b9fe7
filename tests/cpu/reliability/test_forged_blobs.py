"""Serialized objects forged by someone who recomputes the checksum (it finds damage, not
forgery): every header field edited on its own, and hundreds of seeded random edits.

Each forgery is one declaration, a function that edits the decoded header (and the
cubins behind it); the blob is framed again with its checksum recomputed. Loading must
raise BlobError naming the forged field -- never a bare exception, never a load of
something else. A random edit may also load, but then exactly as the original blob does
(same description, same cubins, kernels and metadata)."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import cuprims
from cuprims import CountingIterator, OpKind, ProxyArray as P, ProxyValue as V, SortOrder
from cuprims._serialization import blobs as serialization
from cuprims._serialization.codec import decode, encode
from cuprims.errors import BlobError, CuprimsError


@dataclass(frozen=True)
class Blobs:
    reduce: bytes     # a float32 sum with an initial value, for sm_80 and sm_90
    sort: bytes       # a radix sort of uint32 keys, for sm_90
    counting: bytes   # an int64 sum over a CountingIterator (C++ a blob does not record), for sm_90


@pytest.fixture(scope="session")
def blobs(tmp_path_factory) -> Blobs:
    """The blobs every forgery starts from, built once (builds take seconds)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPRIMS_CACHE_DIR", str(tmp_path_factory.mktemp("forged-blobs-cache")))
        cuprims.clear_all_caches()
        reduce = cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=OpKind.PLUS,
                                          h_init=V(np.float32), compute_capability=[80, 90])
        sort = cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32), d_in_values=None,
                                       d_out_values=None, order=SortOrder.ASCENDING, compute_capability=90)
        counting = cuprims.make_reduce_into(d_in=CountingIterator(np.int64(0)), d_out=P(np.int64), op=OpKind.PLUS,
                                            h_init=V(np.int64), compute_capability=90)
        made = Blobs(cuprims.serialize(reduce), cuprims.serialize(sort), cuprims.serialize(counting))
        cuprims.clear_all_caches()
    for blob in (made.reduce, made.sort, made.counting):   # framed again here, untouched, a blob loads as it is
        assert cuprims.serialize(cuprims.deserialize(forged(blob, lambda header, cubins: None))) == blob
    return made


# ----------------------------------------------------------------------------- the frame

def parts(blob: bytes) -> tuple[dict, bytes]:
    """(header, cubins) of a blob: ``MAGIC | version | reserved | sha256 | u64 hlen | JSON | cubins``."""
    (hlen,) = struct.unpack_from("<Q", blob, 48)
    return json.loads(blob[56:56 + hlen]), blob[56 + hlen:]


def frame(head: bytes, cubins: bytes) -> bytes:
    """A blob around header bytes ``head`` and ``cubins``, its checksum recomputed."""
    rest = struct.pack("<Q", len(head)) + head + cubins
    return struct.pack("<8sII32sQ", serialization.MAGIC, serialization.FORMAT_VERSION, 0,
                       hashlib.sha256(rest).digest(), len(head)) + head + cubins


def forged(blob: bytes, edit: Callable[[dict, bytearray], Any]) -> bytes:
    """``blob`` with ``edit(header, cubins)`` applied (in place; a returned bytes replaces the cubins)."""
    header, cubins = parts(blob)
    cubins = bytearray(cubins)
    replaced = edit(header, cubins)
    if replaced is not None:
        cubins = replaced
    return frame(json.dumps(header, sort_keys=True).encode(), bytes(cubins))


# ----------------------------------------------------------------------------- edits

def at(header: dict, path: tuple) -> tuple[Any, Any]:
    """(container, key) of ``path`` in ``header``."""
    target = header
    for part in path[:-1]:
        target = target[part]
    return target, path[-1]


def set_to(*path: Any, value: Any) -> Callable:
    def edit(header, cubins):
        container, key = at(header, path)
        container[key] = value
    return edit


def drop(*path: Any) -> Callable:
    def edit(header, cubins):
        container, key = at(header, path)
        del container[key]
    return edit


def describe(path: tuple, value: Any) -> Callable:
    """Set a field of the description record (``("d_out", "value")``) to ``value``, a record."""
    def edit(header, cubins):
        record = header["description"]
        for part in path[:-1]:
            record = record["v"][part]
        record["v"][path[-1]] = value
    return edit


def description_field(*path: Any, value: Any) -> Callable:
    """Set a plain field inside the description (``("d_in", "alignment")``) to ``value``."""
    def edit(header, cubins):
        record = header["description"]
        for part in path:
            container, record = record["v"], record["v"][part]
        container[path[-1]] = value
    return edit


def dtype_of_d_in(dtype_record: Any) -> Callable:
    return describe(("d_in", "value"), {"t": "value", "v": dtype_record})


def cubin_byte(build: int, offset: int, value: bytes) -> Callable:
    """Bytes at ``offset`` of build ``build``'s cubin replaced by ``value``."""
    def edit(header, cubins):
        start = header["builds"][build]["cubin"][0] + offset
        cubins[start:start + len(value)] = value
    return edit


def meta_of(build: int, field: str, value: Any) -> Callable:
    return set_to("builds", build, "meta", field, value=value)


def swapped_cubins(header, cubins):
    """Build 0 records build 1's cubin and the other way round (each range inside the payload)."""
    b0, b1 = header["builds"]
    b0["cubin"], b1["cubin"] = b1["cubin"], b0["cubin"]


def duplicated_builds(count: int) -> Callable:
    def edit(header, cubins):
        header["builds"] = [dict(header["builds"][0]) for _ in range(count)]
    return edit


def twice_build_zero(header, cubins):
    header["builds"] = [header["builds"][0], dict(header["builds"][0]), header["builds"][1]]


def overlapping_ranges(header, cubins):
    """Build 1's range starts inside build 0's (its bytes still an ELF image of sm_90)."""
    b0, b1 = header["builds"]
    start, size = b1["cubin"]
    b1["cubin"] = [start - 8, size + 8]
    cubins[start - 8:start + size] = bytes(cubins[start:start + size]) + bytes(8)


def trailing_bytes(header, cubins):
    return bytes(cubins) + b"\0" * 64


def kernel_renamed(header, cubins):
    build = header["builds"][0]
    name = build["names"][0]
    build["kernels"][name] = "_Z6forgedv"


def names_dropped_one(header, cubins):
    header["builds"][0]["names"] = header["builds"][0]["names"][:1]


def name_of_another_kernel(header, cubins):
    build = header["builds"][0]
    old = build["names"][0]
    new = old.replace("const float*", "const double*")
    build["names"] = [new if n == old else n for n in build["names"]]
    build["kernels"] = {new if k == old else k: v for k, v in build["kernels"].items()}


def digests_recomputed(header):
    """The code digests recomputed from the (forged) description, as cuprims computes them."""
    desc = serialization._stood_in(decode(header["description"]))
    for build in header["builds"]:
        build["code"] = serialization._code_digest(desc.variant(build["variant"]).source(build["arch"]))


def op_with_state_digest_recomputed(header, cubins):
    """A stateful operator in the description, the code digests recomputed: only the
    kernels' parameter sizes in the cubin tell the lie."""
    header["description"]["v"]["op"]["v"]["state_size"] = 8
    header["description"]["v"]["op"]["v"]["state_alignment"] = 8
    digests_recomputed(header)


def iterator_state_digest_recomputed(header, cubins):
    header["description"]["v"]["d_in"]["v"]["state_size"] = 32
    digests_recomputed(header)


def keys_signed(header, cubins):
    """uint32 keys forged as int32: same names, sizes and parameters; other code."""
    describe(("d_in_keys", "value"), {"t": "value", "v": "<i4"})(header, cubins)
    describe(("d_out_keys", "value"), {"t": "value", "v": "<i4"})(header, cubins)


OVERLAPPING_STRUCT = {"names": ["a", "b"], "formats": ["<f4", "<f4"], "offsets": [0, 2], "itemsize": 8}
HUGE_ARRAY_FIELD = {"names": ["a"], "formats": [{"base": "<f4", "shape": [1 << 19, 1 << 19]}], "offsets": [0],
                    "itemsize": 4}


# (the blob it forges, the field the error must name, the edit)
FORGERIES: dict[str, tuple[str, str, Callable]] = {
    # -- the header's own fields
    "header field missing": ("reduce", "toolchain", drop("toolchain")),
    "header field unknown": ("reduce", "signed_by", set_to("signed_by", value="me")),
    "contract of another build": ("reduce", "contract", lambda h, c: h["contract"].update(own="0" * 24)),
    "cuprims version a number": ("reduce", "cuprims", set_to("cuprims", value=1)),
    "cuprims version 10,000 characters": ("reduce", "cuprims", set_to("cuprims", value="1" * 10_000)),
    "toolchain not a string": ("reduce", "toolchain", set_to("toolchain", value={"nvrtc": 13})),
    "algorithm outside cuprims": ("reduce", "algorithm", set_to("algorithm", value="os.system")),
    "algorithm a list": ("reduce", "algorithm", set_to("algorithm", value=["cuprims"])),
    "algorithm of another description": ("reduce", "description",
                                         set_to("algorithm", value="cuprims.algorithms.select.api.Select")),
    # -- the description
    "op record null": ("reduce", "description.op", describe(("op",), None)),
    "op kind unknown": ("reduce", "description.op.kind", description_field("op", "kind", value="eval")),
    "op state 10**30 bytes": ("reduce", "description.op.state_size",
                              description_field("op", "state_size", value=10 ** 30)),
    "op state alignment 3": ("reduce", "description.op.state_alignment",
                             description_field("op", "state_alignment", value=3)),
    "alignment negative": ("reduce", "description.d_in.alignment",
                           description_field("d_in", "alignment", value=-4)),
    "alignment 10**30": ("reduce", "description.d_in.alignment",
                         description_field("d_in", "alignment", value=10 ** 30)),
    "state size negative": ("reduce", "description.d_in.state_size",
                            description_field("d_in", "state_size", value=-8)),
    "argument name not an identifier": ("reduce", "description.d_in.name",
                                        description_field("d_in", "name", value="d in; rm")),
    "flag a number": ("reduce", "description.has_init", describe(("has_init",), 1)),
    "enum member unknown": ("reduce", "description.determinism.v",
                            describe(("determinism",), {"t": "enum", "c": "Determinism", "v": "SOMETIMES"})),
    "description field dropped": ("reduce", "description.has_init",
                                  lambda h, c: h["description"]["v"].pop("has_init")),
    "description field unknown": ("reduce", "description.extra", describe(("extra",), 1)),
    "record tag unknown": ("reduce", "description.op.t", describe(("op",), {"t": "eval", "v": "1"})),
    "dtype object": ("reduce", "description.d_in.value", dtype_of_d_in("|O")),
    "dtype big-endian": ("reduce", "description.d_in.value", dtype_of_d_in(">f4")),
    "struct with overlapping fields": ("reduce", "description.d_in.value.b", dtype_of_d_in(OVERLAPPING_STRUCT)),
    "struct of 10**9 bytes": ("reduce", "description.d_in.value.itemsize",
                              dtype_of_d_in(dict(OVERLAPPING_STRUCT, offsets=[0, 4], itemsize=10 ** 9))),
    "array field of huge shape": ("reduce", "description.d_in.value.a", dtype_of_d_in(HUGE_ARRAY_FIELD)),
    "output type float32 -> float64": ("reduce", "builds[0].names[0]",
                                       describe(("d_out", "value"), {"t": "value", "v": "<f8"})),
    "input type float32 -> int32": ("reduce", "builds[0].names[0]",
                                    describe(("d_in", "value"), {"t": "value", "v": "<i4"})),
    "initial value dropped": ("reduce", "builds[0].names[0]", describe(("has_init",), False)),
    "determinism changed (same kernel names)": ("reduce", "builds[0].code", describe(
        ("determinism",), {"t": "enum", "c": "Determinism", "v": "GPU_TO_GPU"})),
    "sort keys uint32 -> int32 (same names, sizes)": ("sort", "builds[0].code", keys_signed),
    "iterator's items int64 -> int32": ("counting", "builds[0].names[0]",
                                        describe(("d_in", "value"), {"t": "value", "v": "<i4"})),
    "iterator's state 16 -> 32 bytes": ("counting", "builds[0].code",
                                        description_field("d_in", "state_size", value=32)),
    "iterator's state, code digest recomputed": ("counting", "builds[0].kernels", iterator_state_digest_recomputed),
    "op state, code digest recomputed": ("reduce", "builds[0].kernels", op_with_state_digest_recomputed),
    # -- the build records
    "builds not a list": ("reduce", "builds", set_to("builds", value={"0": 1})),
    "builds empty": ("reduce", "builds", set_to("builds", value=[])),
    "10,000 duplicate build records": ("reduce", "builds", duplicated_builds(10_000)),
    "a build record twice": ("reduce", "builds[1]", twice_build_zero),
    "build field missing": ("reduce", "builds[0].code", drop("builds", 0, "code")),
    "build field unknown": ("reduce", "builds[0].signature", set_to("builds", 0, "signature", value="x")),
    "variant a string": ("reduce", "builds[0].variant", set_to("builds", 0, "variant", value="0")),
    "variant negative": ("reduce", "builds[0].variant", set_to("builds", 0, "variant", value=-1)),
    "variant the algorithm has not": ("reduce", "builds[0].variant", set_to("builds", 0, "variant", value=5)),
    "arch a float": ("reduce", "builds[0].arch", set_to("builds", 0, "arch", value=80.0)),
    "arch 10**30": ("reduce", "builds[0].arch", set_to("builds", 0, "arch", value=10 ** 30)),
    "arch other than the cubin's": ("reduce", "builds[0].cubin", set_to("builds", 0, "arch", value=86)),
    "names empty": ("reduce", "builds[0].names", set_to("builds", 0, "names", value=[])),
    "names one short": ("reduce", "builds[0].names", names_dropped_one),
    "name of another kernel": ("reduce", "builds[0].names[0]", name_of_another_kernel),
    "kernels empty": ("reduce", "builds[0].kernels", set_to("builds", 0, "kernels", value={})),
    "lowered name not a string": ("reduce", "builds[0].kernels",
                                  lambda h, c: h["builds"][0]["kernels"].update({h["builds"][0]["names"][0]: 7})),
    "lowered name not in the cubin": ("reduce", "builds[0].kernels", kernel_renamed),
    "metadata {}": ("reduce", "builds[0].meta", set_to("builds", 0, "meta", value={})),
    "metadata field missing": ("reduce", "builds[0].meta", drop("builds", 0, "meta", "items")),
    "metadata field unknown": ("reduce", "builds[0].meta", meta_of(0, "bogus", 1)),
    "metadata negative": ("reduce", "builds[0].meta.items", meta_of(0, "items", -16)),
    "metadata 10**30": ("reduce", "builds[0].meta.items", meta_of(0, "items", 10 ** 30)),
    "metadata a float": ("reduce", "builds[0].meta.threads", meta_of(0, "threads", 256.0)),
    "metadata threads past 1024": ("reduce", "builds[0].meta.threads", meta_of(0, "threads", 2048)),
    "metadata other than the cubin exports": ("reduce", "builds[0].meta", meta_of(0, "items", 32)),
    "code digest of other code": ("reduce", "builds[0].code", set_to("builds", 0, "code", value="0" * 64)),
    "code digest not hex": ("reduce", "builds[0].code", set_to("builds", 0, "code", value="z" * 64)),
    "cubin field a number": ("reduce", "builds[0].cubin", set_to("builds", 0, "cubin", value=5)),
    "cubin field null": ("reduce", "builds[0].cubin", set_to("builds", 0, "cubin", value=None)),
    "cubin range [0, -5]": ("reduce", "builds[0].cubin[1]", set_to("builds", 0, "cubin", value=[0, -5])),
    "cubin range of three numbers": ("reduce", "builds[0].cubin", set_to("builds", 0, "cubin", value=[0, 1, 2])),
    "cubin range past the end": ("reduce", "builds[1].cubin",
                                 lambda h, c: h["builds"][1]["cubin"].__setitem__(1, 10 ** 9)),
    "cubin ranges overlapping": ("reduce", "builds[1].cubin", overlapping_ranges),
    "cubins swapped between architectures": ("reduce", "builds[0].cubin", swapped_cubins),
    "bytes past the last cubin": ("reduce", "builds", trailing_bytes),
    # -- the cubins themselves
    "cubin not an ELF image": ("reduce", "builds[0].cubin", cubin_byte(0, 0, b"\0\0\0\0")),
    "cubin for another machine": ("reduce", "builds[0].cubin", cubin_byte(0, 0x12, (62).to_bytes(2, "little"))),
    "cubin for another SM": ("reduce", "builds[1].cubin", cubin_byte(1, 0x31, bytes([100]))),
    "cubin of an unknown ELF ABI": ("reduce", "builds[0].cubin", cubin_byte(0, 8, bytes([9]))),
    "cubin section table outside it": ("reduce", "builds[0].cubin", cubin_byte(0, 0x28, struct.pack("<Q", 1 << 40))),
}


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_each_forged_field_is_named(blobs, case):
    which, field, edit = FORGERIES[case]
    blob = forged(getattr(blobs, which), edit)
    with pytest.raises(BlobError) as info:
        cuprims.deserialize(blob)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, CuprimsError)
    assert f"field {field}" in str(err), f"the error does not name {field}: {err}"


# ----------------------------------------------------------------------------- random edits

def emit(value: Any, twice: tuple[int, str, Any] | None = None) -> str:
    """``value`` as JSON; ``twice`` = (id of an object in it, key, value) adds that key to
    that object a second time (json.dumps cannot write a key twice)."""
    if isinstance(value, dict):
        members = [f"{json.dumps(k)}: {emit(v, twice)}" for k, v in value.items()]
        if twice is not None and twice[0] == id(value):
            members.append(f"{json.dumps(twice[1])}: {emit(twice[2], twice)}")
        return "{" + ", ".join(members) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(emit(v, twice) for v in value) + "]"
    return json.dumps(value)


def nodes(value: Any, path: tuple = ()) -> list[tuple]:
    """The path of every value inside ``value`` (``()`` is ``value`` itself)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out += nodes(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += nodes(v, path + (i,))
    return out


def _other_type(value: Any, rng: random.Random) -> Any:
    choices = [None, True, False, 0, 1, -1, 2.5, "", "x", [], {}, [value], {"v": value}, str(value)[:40]]
    return rng.choice([c for c in choices if type(c) is not type(value)])


def _odd_number(value: int, rng: random.Random) -> Any:
    return rng.choice([-1, -value - 1, -(1 << 31), (1 << 31), (1 << 63), 10 ** 30, -(10 ** 30), value + 0.5])


def mutated(header: dict, seed: int) -> str:
    """The header's JSON with one seeded random edit: a value of another type, a number
    made huge or negative, a key dropped, or a key given twice; or, as a control that
    must load as the original does, an object's members in another order."""
    rng = random.Random(seed)
    header = json.loads(json.dumps(header))
    paths = [p for p in nodes(header) if p]
    while True:
        how = rng.choice(["type", "number", "drop", "twice", "reorder"])
        path = rng.choice(paths)
        container, key = at(header, path)
        value = container[key]
        if how == "reorder" and isinstance(value, dict) and len(value) > 1:
            members = list(value.items())
            rng.shuffle(members)
            container[key] = dict(members)
        elif how == "type":
            container[key] = _other_type(value, rng)
        elif how == "number" and type(value) is int:
            container[key] = _odd_number(value, rng)
        elif how == "drop" and isinstance(container, dict):
            del container[key]
        elif how == "twice" and isinstance(container, dict):
            again = value if rng.random() < 0.5 else _other_type(value, rng)
            return emit(header, (id(container), key, again))
        else:
            continue
        return emit(header)


@pytest.mark.parametrize("first_seed", range(0, 700, 100))
def test_random_header_edits_load_the_same_or_raise_blob_error(blobs, first_seed):
    original = cuprims.deserialize(blobs.reduce)
    header, cubins = parts(blobs.reduce)
    loaded = 0
    for seed in range(first_seed, first_seed + 100):
        blob = frame(mutated(header, seed).encode(), cubins)
        try:
            obj = cuprims.deserialize(blob)
        except BlobError as exc:
            assert "field " in str(exc) or "header" in str(exc), (seed, str(exc))
            continue
        loaded += 1
        assert type(obj) is type(original) and obj.desc == original.desc, seed
        assert obj.compute_capabilities == original.compute_capabilities, seed
        for arch in original.compute_capabilities:
            mine, theirs = obj._builds.result(arch), original._builds.result(arch)
            assert (mine.cubin, mine.kernels, mine.meta) == (theirs.cubin, theirs.kernels, theirs.meta), seed
            assert obj._builds.source(arch).name_expressions == original._builds.source(arch).name_expressions
        assert encode(obj.desc) == encode(original.desc), seed
    assert loaded, "no edit loaded: the reordered objects (controls) should"
