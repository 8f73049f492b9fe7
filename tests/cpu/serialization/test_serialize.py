"""Serialized algorithm objects on the CPU: every algorithm round-trips (its description,
kernels and cubins for each architecture and variant), a fresh process deserializes with
no compile and no numba import, a deserialized object dispatches as the original does,
and a matrix of bad blobs each raises BlobError (a CuprimsError and a ValueError)."""

from __future__ import annotations

import hashlib
import json
import struct
from types import SimpleNamespace

import numpy as np
import pytest

import cuprims
from cpu_helpers import FakeArray, FakeMemory, FakePack, counters, delta, last_json, run_python
from cuprims import (CountingIterator, DiscardIterator, OpKind, ProxyArray as P, ProxyValue as V, SortOrder,
                     TransformIterator)
from cuprims._runtime import driver
from cuprims._serialization.blobs import FORMAT_VERSION, MAGIC
from cuprims.errors import BlobError, CuprimsError

i4, i8, f4 = np.int32, np.int64, np.float32
PAIR = cuprims.gpu_struct({"lo": np.float32, "hi": np.int64})


def _add(a, b):
    return a + b


def _even(v):
    return v % 2 == 0


def _each_noop(i):
    return i   # for_each drops it: the build, not the effect, is what travels


def _widest(a, b):
    return PAIR(min(a.lo, b.lo), max(a.hi, b.hi))


BUILDS = {
    "reduce, two archs": lambda: cuprims.make_reduce_into(d_in=P(f4), d_out=P(f4), op=OpKind.PLUS, h_init=V(f4),
                                                          compute_capability=[80, 90]),
    "reduce, Python op over an iterator": lambda: cuprims.make_reduce_into(
        d_in=TransformIterator(CountingIterator(i8(0)), lambda i: i * 2), d_out=P(i8), op=_add, h_init=V(i8),
        compute_capability=90),
    "reduce, struct op": lambda: cuprims.make_reduce_into(d_in=P(PAIR.dtype), d_out=P(PAIR.dtype), op=_widest,
                                                         h_init=V(PAIR.dtype), compute_capability=90),
    "inclusive scan": lambda: cuprims.make_inclusive_scan(d_in=P(i4), d_out=P(i4), op=OpKind.PLUS,
                                                          compute_capability=90),
    "unary transform": lambda: cuprims.make_unary_transform(d_in=P(f4), d_out=P(f4), op=lambda x: x * 2,
                                                            compute_capability=90),
    "radix sort pairs": lambda: cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32),
                                                        d_in_values=P(i4), d_out_values=P(i4),
                                                        order=SortOrder.DESCENDING, compute_capability=90),
    "merge sort": lambda: cuprims.make_merge_sort(d_in_keys=P(i8), d_out_keys=P(i8), op=OpKind.LESS,
                                                  compute_capability=90),
    "merge pairs": lambda: cuprims.make_merge(d_in_keys1=P(f4), d_in_values1=P(i4), d_in_keys2=P(f4),
                                              d_in_values2=P(i4), d_out_keys=P(f4), d_out_values=P(i4),
                                              op=OpKind.LESS, compute_capability=90),
    "lower bound": lambda: cuprims.make_lower_bound(d_data=P(f4), d_values=P(f4), d_out=P(np.uintp),
                                                    compute_capability=90),
    # the search takes an iterator's bare state (no position): its layout must travel too
    "lower bound, values from an iterator": lambda: cuprims.make_lower_bound(
        d_data=P(i4), d_values=CountingIterator(i4(0)), d_out=P(i8), compute_capability=90),
    "segmented reduce": lambda: cuprims.make_segmented_reduce(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i8),
                                                              end_offsets_in=P(i8), op=OpKind.PLUS, h_init=V(f4),
                                                              compute_capability=90),
    "segmented sort": lambda: cuprims.make_segmented_sort(d_in_keys=P(i4), d_out_keys=P(i4), start_offsets_in=P(i4),
                                                          end_offsets_in=P(i4), order=SortOrder.ASCENDING,
                                                          compute_capability=90),
    "segmented top-k": lambda: cuprims.make_segmented_top_k(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4),
                                                            d_out_values=P(i4), start_offsets_in=P(i8),
                                                            end_offsets_in=P(i8), compute_capability=90),
    "select": lambda: cuprims.make_select(d_in=P(i4), d_out=P(i4), d_num_selected_out=P(i8), cond=_even,
                                          compute_capability=90),
    "three-way partition": lambda: cuprims.make_three_way_partition(
        d_in=P(i4), d_first_part_out=P(i4), d_second_part_out=P(i4), d_unselected_out=DiscardIterator(P(i4)),
        d_num_selected_out=P(i8), select_first_part_op=_even, select_second_part_op=lambda v: v > 5,
        compute_capability=90),
    "unique by key": lambda: cuprims.make_unique_by_key(d_in_keys=P(i4), d_in_items=P(f4), d_out_keys=P(i4),
                                                        d_out_items=P(f4), d_out_num_selected=P(i8),
                                                        op=OpKind.EQUAL_TO, compute_capability=90),
    "reduce by key": lambda: cuprims.make_reduce_by_key(d_in_keys=P(i4), d_in_values=P(f4), d_out_unique_keys=P(i4),
                                                        d_out_aggregates=P(f4), d_out_num_runs=P(i8),
                                                        reduction_op=OpKind.PLUS, compute_capability=90),
    "non-trivial runs": lambda: cuprims.make_non_trivial_runs(d_in=P(f4), d_out_offsets=P(i8), d_out_lengths=P(i4),
                                                              d_out_num_runs=P(i8), compute_capability=90),
    "segmented scan": lambda: cuprims.make_segmented_inclusive_scan(d_in=P(f4), d_out=P(f4), start_offsets_in=P(i4),
                                                                    end_offsets_in=P(i4), op=OpKind.MAXIMUM,
                                                                    compute_capability=90),
    "scan by key": lambda: cuprims.make_exclusive_scan_by_key(d_in_keys=P(i4), d_in_values=P(f4), d_out=P(f4),
                                                              scan_op=OpKind.PLUS, init_value=f4(1),
                                                              compute_capability=90),
    "run-length encoding": lambda: cuprims.make_run_length_encode(d_in=P(i4), d_out_unique=P(i4),
                                                                  d_out_counts=P(i8), d_out_num_runs=P(i8),
                                                                  compute_capability=90),
    "adjacent difference": lambda: cuprims.make_adjacent_difference(d_in=P(f4), d_out=P(f4), op=OpKind.MINUS,
                                                                    direction="right", compute_capability=90),
    "find if": lambda: cuprims.make_find_if(d_in=P(i4), d_out_index=P(i8), cond=_even, compute_capability=90),
    "for each": lambda: cuprims.make_for_each(d_in=CountingIterator(i4(0)), op=_each_noop, compute_capability=90),
    "top k pairs, sorted": lambda: cuprims.make_top_k(d_in_keys=P(f4), d_out_keys=P(f4), d_in_values=P(i4),
                                                      d_out_values=P(i4), order=SortOrder.ASCENDING, sorted=True,
                                                      compute_capability=90),
    "histogram": lambda: cuprims.make_histogram_even(d_samples=P(np.uint8), d_histogram=P(i4),
                                                     h_num_output_levels=np.array([257]), h_lower_level=np.int32(0),
                                                     h_upper_level=np.int32(256), num_samples=1 << 20,
                                                     compute_capability=90),
}


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("case", sorted(BUILDS))
def test_every_algorithm_round_trips(shared_cache, case):
    obj = BUILDS[case]()
    blob = cuprims.serialize(obj)
    before = counters()
    again = cuprims.deserialize(blob)
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}
    assert type(again) is type(obj) and again.desc == obj.desc and again is not obj
    assert again.compute_capabilities == obj.compute_capabilities
    for arch in obj.compute_capabilities:
        assert again.cubin(arch) == obj.cubin(arch)
        assert again._builds.result(arch).meta == obj._builds.result(arch).meta
        assert again._builds.source(arch).name_expressions == obj._builds.source(arch).name_expressions
    assert cuprims.serialize(again) == blob   # a deserialized object serializes to the same bytes
    assert obj.serialize() == blob and again.serialize() == blob   # cuda.compute's obj.serialize()
    assert [p._struct.format for p in again._packs] == [p._struct.format for p in obj._packs]


def test_built_variants_travel_and_missing_ones_are_refused(shared_cache):
    obj = cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32), d_in_values=None,
                                  d_out_values=None, order=SortOrder.ASCENDING, compute_capability=90)
    alone = cuprims.deserialize(cuprims.serialize(obj))
    with pytest.raises(BlobError) as info:
        alone._builds_of(1)
    assert "variant 1" in str(info.value.found)
    obj.cubin(90, wide_offsets=True)   # builds the 64-bit-offset variant
    both = cuprims.deserialize(cuprims.serialize(obj))
    assert both._builds_of(1).result(90).cubin == obj._builds_of(1).result(90).cubin


def test_a_fresh_process_loads_with_no_compile_and_no_numba(shared_cache, tmp_path):
    path = tmp_path / "reduce.blob"
    path.write_bytes(cuprims.serialize(BUILDS["reduce, Python op over an iterator"]()))
    out = run_python(f"""
        import json, sys, time
        t0 = time.perf_counter()
        import cuprims
        obj = cuprims.deserialize(open({str(path)!r}, "rb").read())
        took = time.perf_counter() - t0
        heavy = [m for m in ("cuprims._build.build", "cuprims._compile.nvrtc", "cuda.bindings.driver", "cuda.core",
                             "cuda.pathfinder") if m in sys.modules]
        info = cuprims.cache_info()
        print(json.dumps({{"numba": "numba" in sys.modules, "compiles": info["nvrtc_compiles"] + info["links"]
                          + info["numba_compiles"], "archs": obj.compute_capabilities, "seconds": took,
                          "heavy": heavy}}))
    """, env={"CUPRIMS_CACHE_DIR": str(tmp_path / "empty-cache")})
    got = last_json(out.stdout)
    assert got["numba"] is False and got["compiles"] == 0 and got["archs"] == [90]
    # the first call's budget (50 ms on the H200, deserialize included) has no room for the
    # compiler side or cuda.bindings (whose import brings cuda.pathfinder: tens of ms)
    assert got["heavy"] == [], got


def test_a_deserialized_object_dispatches_as_the_original(monkeypatch, shared_cache):
    monkeypatch.setattr(driver, "ParamPack", FakePack)
    launches = []
    monkeypatch.setattr(driver, "launch", lambda k, grid, block, stream, params, shared=0:
                        launches.append((k, grid, block, params)))
    mem = FakeMemory()
    monkeypatch.setattr(driver, "alloc_async", lambda nbytes, stream, device=-1: mem.alloc(nbytes))
    monkeypatch.setattr(driver, "free_async", lambda ptr, stream: mem.free(ptr))
    runs = []
    for obj in (BUILDS["select"](),) * 1 + (cuprims.deserialize(cuprims.serialize(BUILDS["select"]())),):
        obj._packs = tuple(FakePack(k) for k in obj.desc.kernel_params())
        obj._setup()
        meta, names = obj._builds.result(90).meta, obj._builds.source(90).name_expressions
        obj._plans[0] = SimpleNamespace(device=0, temp_align=1, threads=meta["threads"],
                                        tile_items=meta["threads"] * meta["items"], init=names[0], sweep=names[1],
                                        padding=meta["tile_padding"], word_bytes=meta["tile_word_bytes"])
        launches.clear()
        n = 50_000
        x, out, count = FakeArray(mem, np.zeros(n, i4)), FakeArray.empty(mem, n, i4), FakeArray.empty(mem, 1, i8)
        temp = FakeArray(mem, np.zeros(obj(temp_storage=None, d_in=x, d_out=out, d_num_selected_out=count,
                                           num_items=n), np.uint8))
        obj(temp_storage=temp, d_in=x, d_out=out, d_num_selected_out=count, num_items=n)
        runs.append([(k, g, b, p[4:]) for k, g, b, p in launches])   # (pointers differ per run)
    assert runs[0] == runs[1] and len(runs[0]) == 2


def test_a_device_of_another_architecture_is_named(monkeypatch, shared_cache):
    obj = cuprims.deserialize(cuprims.serialize(BUILDS["reduce, two archs"]()))
    monkeypatch.setattr(driver, "compute_capability", lambda device: (8, 6))
    with pytest.raises(BlobError) as info:
        obj._builds.loaded(0)
    assert "sm_80, sm_90" in str(info.value.expected) and "sm_86" in str(info.value.found)
    assert isinstance(info.value, ValueError) and isinstance(info.value, CuprimsError)


def _reframe(header: dict, cubins: bytes, version: int = FORMAT_VERSION, magic: bytes = MAGIC) -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    rest = struct.pack("<Q", len(head)) + head + cubins
    return struct.pack("<8sII32sQ", magic, version, 0, hashlib.sha256(rest).digest(), len(head)) + head + cubins


def _parts(blob: bytes) -> tuple[dict, bytes]:
    hlen = struct.unpack_from("<Q", blob, 48)[0]
    return json.loads(blob[56:56 + hlen]), blob[56 + hlen:]


def _edited(blob: bytes, edit) -> bytes:
    header, cubins = _parts(blob)
    edit(header)
    return _reframe(header, cubins)


BAD = {
    "not bytes": lambda b: "a string",
    "empty": lambda b: b"",
    "short": lambda b: b[:20],
    "bad magic": lambda b: b"NOTCUPRM" + b[8:],
    "future format": lambda b: b[:8] + struct.pack("<I", FORMAT_VERSION + 1) + b[12:],
    "truncated": lambda b: b[:-100],
    "flipped byte in a cubin": lambda b: b[:-50] + bytes([b[-50] ^ 1]) + b[-49:],
    "header length past the end": lambda b: b[:48] + struct.pack("<Q", len(b)) + b[56:],
    "header not JSON": lambda b: _reframe_raw(b, b"{not json"),
    "header a list": lambda b: _reframe_raw(b, b"[1, 2]"),
    "another cuprims build": lambda b: _edited(b, lambda h: h["contract"].update(own="0" * 24)),
    "unknown algorithm": lambda b: _edited(b, lambda h: h.update(algorithm="os.system")),
    "description of another algorithm": lambda b: _edited(b, lambda h: h.update(
        algorithm="cuprims.algorithms.select.api.Select")),
    "unknown description class": lambda b: _edited(b, lambda h: h["description"].update(c="Popen")),
    "unknown record tag": lambda b: _edited(b, lambda h: h["description"]["v"].update(op={"t": "eval", "v": 1})),
    "field the class has not": lambda b: _edited(b, lambda h: h["description"]["v"].update(extra=1)),
    "dtype that is not one": lambda b: _edited(b, lambda h: h["description"]["v"]["d_in"]["v"]["value"].update(
        v="object")),
    "no builds": lambda b: _edited(b, lambda h: h.update(builds=[])),
    "cubin range outside": lambda b: _edited(b, lambda h: h["builds"][0].update(cubin=[0, 10 ** 9])),
    "kernel names missing": lambda b: _edited(b, lambda h: h["builds"][0].update(names=[])),
    "not an ELF cubin": lambda b: _edited(b, lambda h: h["builds"][0].update(cubin=[1, 100])),
    "only variant 1": lambda b: _edited(b, lambda h: [x.update(variant=1) for x in h["builds"]]),
    "deep nesting": lambda b: _edited(b, lambda h: h.update(description=_deep(100))),
}


def _reframe_raw(blob: bytes, head: bytes) -> bytes:
    _, cubins = _parts(blob)
    rest = struct.pack("<Q", len(head)) + head + cubins
    return struct.pack("<8sII32sQ", MAGIC, FORMAT_VERSION, 0, hashlib.sha256(rest).digest(), len(head)) + head + cubins


def _deep(n: int) -> dict:
    node: dict = {"t": "tuple", "v": []}
    for _ in range(n):
        node = {"t": "tuple", "v": [node]}
    return node


@pytest.fixture(scope="module")
def good_blob(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUPRIMS_CACHE_DIR", str(tmp_path_factory.mktemp("blob-cache")))
        return cuprims.serialize(BUILDS["reduce, two archs"]())


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_blobs_raise_blob_errors(good_blob, case):
    bad = BAD[case](good_blob)
    with pytest.raises(BlobError) as info:
        cuprims.deserialize(bad)
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, CuprimsError)
    assert err.problem and err.expected is not None and str(err.expected) in str(err)


def test_serialize_names_a_bad_argument():
    with pytest.raises(cuprims.errors.ArgumentError) as info:
        cuprims.serialize(object())
    assert info.value.argument == "obj" and isinstance(info.value, TypeError)
