"""The disk cache's entries under a clumsy user and a hostile neighbour: damaged, foreign,
forged and malformed entries, and things at an entry path that are not entries at all.

Every case must end with the right build (the cubin, kernels and metadata of a correct
build), the bad entry counted and replaced by a good one -- never served for the wrong
key, never a bare exception, never a hang or a read of a huge file. The usual victim is
the prebuilt maximum reduction, which rebuilds from its kernel entry with one link."""

from __future__ import annotations

import hashlib
import os

import pytest

from cpu_helpers import ARCH, counters, delta, last_json, run_python
from cuprims._cache.disk import LAYOUT_VERSION
from fault_helpers import (CHILD_MAX_OP, ELF, clear_memory, entry_path, frame_raw, make_max, max_op_env,
                           reframe, unframe)

STAGES = ("numba_compiles", "nvrtc_compiles", "links", "disk_corrupt_discarded")


def _build_max_checked(cache):
    """Build the maximum reduction; assert it is exactly the correct build; return the counter deltas."""
    before = counters()
    result = make_max()._builds.result(ARCH)
    assert result.cubin[:4] == ELF
    assert result.cubin == cache.max.cubin, "served a cubin that is not this algorithm's"
    assert result.arch == ARCH
    assert result.kernels == cache.max.kernels
    assert result.meta == cache.max.meta
    return delta(before, STAGES)


def _assert_repaired(cache, kind: str):
    """The entry on disk is a good one again: a regular file holding the right payload, and
    a cold start is served from it without compiling."""
    key = cache.max.cubin_key if kind == "cubin" else cache.max.kernel_key
    path = entry_path(cache.root, kind, key)
    assert path.is_file() and not path.is_symlink(), f"{kind} entry not rewritten"
    header, blobs = unframe(path.read_bytes())
    if kind == "cubin":
        assert blobs["cubin"] == cache.max.cubin
        assert header["meta"]["arch"] == ARCH
    else:
        assert header["meta"]["symbols"] == cache.max.kernels and blobs["ltoir"]
    clear_memory()
    before = counters()
    assert make_max().cubin() == cache.max.cubin
    assert delta(before) == {"numba_compiles": 0, "nvrtc_compiles": 0, "links": 0}


def _drop_cubin(cache):
    entry_path(cache.root, "cubin", cache.max.cubin_key).unlink()


# ----------------------------------------------------------------------------- damage

def _truncate(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _flip(raw: bytes) -> bytes:
    data = bytearray(raw)
    data[len(data) // 3] ^= 0x10
    return bytes(data)


def _empty(raw: bytes) -> bytes:
    return b""


DAMAGE = {"truncated": _truncate, "bit flip": _flip, "empty": _empty}


@pytest.mark.ci_sample(every=4)
@pytest.mark.parametrize("kind", ["cubin", "kernel"])
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_damaged_entry_is_discarded_and_rebuilt(cache, how, kind):
    key = cache.max.cubin_key if kind == "cubin" else cache.max.kernel_key
    path = entry_path(cache.root, kind, key)
    path.write_bytes(DAMAGE[how](path.read_bytes()))
    if kind == "kernel":
        _drop_cubin(cache)  # otherwise the kernel entry is never consulted
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["links"] == 1 and d["numba_compiles"] == 0
    assert d["nvrtc_compiles"] == (1 if kind == "kernel" else 0)
    _assert_repaired(cache, kind)


# ----------------------------------------------------------------------------- foreign entries

@pytest.mark.parametrize("how", ["copy", "hardlink", "symlink"])
def test_foreign_cubin_entry_is_not_served(cache, how):
    """The sum's valid cubin entry put in place of the maximum's must not answer the maximum."""
    mine = entry_path(cache.root, "cubin", cache.max.cubin_key)
    foreign = entry_path(cache.root, "cubin", cache.sum.cubin_key)
    foreign_bytes = foreign.read_bytes()
    mine.unlink()
    if how == "copy":
        mine.write_bytes(foreign_bytes)
    elif how == "hardlink":
        os.link(foreign, mine)
    else:
        mine.symlink_to(foreign)
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["links"] == 1 and d["nvrtc_compiles"] == 0
    assert foreign.read_bytes() == foreign_bytes, "the other key's entry was modified"
    _assert_repaired(cache, "cubin")


def test_foreign_kernel_entry_does_not_spread_into_a_cubin(cache):
    """The sum's kernel entry in place of the maximum's: the cubin built must be the maximum's."""
    mine = entry_path(cache.root, "kernel", cache.max.kernel_key)
    mine.write_bytes(entry_path(cache.root, "kernel", cache.sum.kernel_key).read_bytes())
    _drop_cubin(cache)
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    _assert_repaired(cache, "kernel")
    _assert_repaired(cache, "cubin")


def _forged_from_other_key(cache):
    """The sum's cubin entry with its metadata edited and the checksum recomputed."""
    header, blobs = unframe(entry_path(cache.root, "cubin", cache.sum.cubin_key).read_bytes())
    header["meta"]["meta"]["threads"] = cache.max.meta["threads"]
    return reframe(header, blobs)


def _relabel(header: dict, kind: str, key: str) -> dict:
    """Claim another kind/key in the header, where the format records them."""
    if "kind" in header:
        header["kind"] = kind
    if "key" in header:
        header["key"] = key
    return header


def _forged_kernel_as_cubin(cache):
    """The maximum's own kernel entry relabelled as its cubin entry."""
    header, blobs = unframe(entry_path(cache.root, "kernel", cache.max.kernel_key).read_bytes())
    return reframe(_relabel(header, "cubin", cache.max.cubin_key), blobs)


FORGERIES = {"other key, checksum recomputed": _forged_from_other_key,
             "kernel relabelled as cubin": _forged_kernel_as_cubin}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_forged_cubin_entry_is_rejected(cache, forgery):
    entry_path(cache.root, "cubin", cache.max.cubin_key).write_bytes(FORGERIES[forgery](cache))
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["links"] == 1 and d["nvrtc_compiles"] == 0
    _assert_repaired(cache, "cubin")


def test_cubin_entry_at_the_kernel_path_is_rejected(cache):
    """The maximum's cubin entry, its key relabelled, where its kernel entry belongs."""
    header, blobs = unframe(entry_path(cache.root, "cubin", cache.max.cubin_key).read_bytes())
    entry_path(cache.root, "kernel", cache.max.kernel_key).write_bytes(
        reframe(_relabel(header, "cubin", cache.max.kernel_key), blobs))
    _drop_cubin(cache)
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    _assert_repaired(cache, "kernel")


# ----------------------------------------------------------------------------- malformed metadata

def _set(path, value):
    def edit(header, blobs):
        target = header
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
    return edit


def _pop(path):
    def edit(header, blobs):
        target = header
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]
    return edit


def _stringify_threads(header, blobs):
    header["meta"]["meta"]["threads"] = str(header["meta"]["meta"]["threads"])


def _kernels_as_list(header, blobs):
    header["meta"]["kernels"] = [list(kv) for kv in header["meta"]["kernels"].items()]


def _kernel_name_not_str(header, blobs):
    header["meta"]["kernels"] = {k: 7 for k in header["meta"]["kernels"]}


def _rename_blob(header, blobs):
    blobs["elf"] = blobs.pop("cubin")


def _blob_not_elf(header, blobs):
    blobs["cubin"] = b"\0" * 64


def _patched_cubin(offset: int, value: bytes):
    """The cubin with ``value`` written at ``offset`` of its ELF header."""
    def edit(header, blobs):
        cubin = bytes(blobs["cubin"])
        blobs["cubin"] = cubin[:offset] + value + cubin[offset + len(value):]
    return edit


def _cubin_for_sm80(header, blobs):
    """The ELF header's SM (e_flags' second byte under CUDA ELF ABI 8) set to 80."""
    cubin = bytes(blobs["cubin"])
    assert cubin[8] == 8, "a CUDA ELF image of ABI version 8 is expected here"
    _patched_cubin(0x31, bytes([80]))(header, blobs)


def _lowered_name(value):
    def edit(header, blobs):
        header["meta"]["kernels"] = {k: value for k in header["meta"]["kernels"]}
    return edit


CUBIN_META_EDITS = {
    "arch missing": _pop(("meta", "arch")),
    "arch a string": _set(("meta", "arch"), "90"),
    "arch of another target": _set(("meta", "arch"), 80),
    "kernels a list": _kernels_as_list,
    "kernel name not a string": _kernel_name_not_str,
    "meta missing": _pop(("meta", "meta")),
    "meta null": _set(("meta", "meta"), None),
    "meta value a string": _stringify_threads,
    "meta field missing": _pop(("meta", "meta", "threads")),
    "metadata a list": _set(("meta",), ["arch", 90]),
    "cubin blob renamed": _rename_blob,
    "cubin blob not ELF": _blob_not_elf,
    # fields of the right type whose values a forger chose (the checksum recomputed)
    "meta value negative": _set(("meta", "meta", "items"), -16),
    "meta value 10**30": _set(("meta", "meta", "items"), 10 ** 30),
    "meta threads past a block's 1024": _set(("meta", "meta", "threads"), 4096),
    "meta value other than the cubin exports": _set(("meta", "meta", "items"), 32),
    "cubin of another architecture": _cubin_for_sm80,
    "cubin of another machine": _patched_cubin(0x12, (62).to_bytes(2, "little")),
    "lowered name not a kernel of the cubin": _lowered_name("_Z6forgedv"),
    "lowered name empty": _lowered_name(""),
}

# Headers that are not even the right JSON, framed with a valid checksum.
RAW_HEADERS = {
    "header a list": b"[1, 2, 3]",
    "header a JSON string": b'"meta"',
    "header nested 200000 deep": b'{"meta": ' + b"[" * 200_000 + b"]" * 200_000 + b', "blobs": []}',
    "blob size a string": b'{"blobs": [["cubin", "64"]], "meta": {"arch": 90}}',
}


@pytest.mark.ci_sample(every=4)
@pytest.mark.parametrize("case", sorted(CUBIN_META_EDITS) + sorted(RAW_HEADERS))
def test_malformed_cubin_metadata_with_valid_checksum_is_rejected(cache, case):
    path = entry_path(cache.root, "cubin", cache.max.cubin_key)
    if case in RAW_HEADERS:
        path.write_bytes(frame_raw(RAW_HEADERS[case], b"\x7fELF" + b"\0" * 60))
    else:
        header, blobs = unframe(path.read_bytes())
        CUBIN_META_EDITS[case](header, blobs)
        path.write_bytes(reframe(header, blobs))
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["links"] == 1 and d["nvrtc_compiles"] == 0
    _assert_repaired(cache, "cubin")


def _symbols_as_list(header, blobs):
    header["meta"]["symbols"] = list(header["meta"]["symbols"].items())


def _ltoir_blob_missing(header, blobs):
    blobs["other"] = blobs.pop("ltoir")


def _symbols_to(value):
    def edit(header, blobs):
        header["meta"]["symbols"] = {k: value for k in header["meta"]["symbols"]}
    return edit


KERNEL_META_EDITS = {
    "symbols a list": _symbols_as_list,
    "symbols empty": _set(("meta", "symbols"), {}),
    "ltoir blob missing": _ltoir_blob_missing,
    "lowered symbol empty": _symbols_to(""),
    "lowered symbol not a symbol": _symbols_to("x; y"),
}


@pytest.mark.ci_sample(every=4)
@pytest.mark.parametrize("case", sorted(KERNEL_META_EDITS))
def test_malformed_kernel_metadata_with_valid_checksum_is_rejected(cache, case):
    path = entry_path(cache.root, "kernel", cache.max.kernel_key)
    header, blobs = unframe(path.read_bytes())
    KERNEL_META_EDITS[case](header, blobs)
    path.write_bytes(reframe(header, blobs))
    _drop_cubin(cache)
    d = _build_max_checked(cache)
    assert d["disk_corrupt_discarded"] == 1
    assert d["nvrtc_compiles"] == 1 and d["links"] == 1
    _assert_repaired(cache, "kernel")


# ----------------------------------------------------------------------------- coop entries

def _coop_layouts(index: int, value):
    """Every TempStorage layout's ``index`` (0: bytes, 1: alignment) set to ``value``."""
    def edit(header, blobs):
        for layout in header["meta"]["temp"].values():
            layout[index] = value
    return edit


COOP_META_EDITS = {
    "TempStorage of 10**30 bytes": _coop_layouts(0, 10 ** 30),
    "TempStorage alignment 10**30": _coop_layouts(1, 10 ** 30),
}


@pytest.mark.parametrize("case", sorted(COOP_META_EDITS))
def test_forged_coop_entry_is_rebuilt(fresh_caches, case):
    """A cooperative provider's entry with layouts out of range, the checksum recomputed."""
    numba = pytest.importorskip("numba")
    from cuprims import coop
    from cuprims._base import stats
    from cuprims.coop import _build

    with coop.target((9, 0)):
        first = coop.warp.make_sum(numba.int32)
        layout = (first.temp_storage_bytes, first.temp_storage_alignment)
        (path,) = (fresh_caches / LAYOUT_VERSION / "coop").glob("*/*")
        header, blobs = unframe(path.read_bytes())
        COOP_META_EDITS[case](header, blobs)
        path.write_bytes(reframe(header, blobs))
        _build.clear_memory()
        again = coop.warp.make_sum(numba.int32)
        assert (again.temp_storage_bytes, again.temp_storage_alignment) == layout
    counts = stats.snapshot()
    assert counts["disk_corrupt_discarded"] == 1 and counts["nvrtc_compiles"] == 2


# ----------------------------------------------------------------------------- not an entry at all

# Run in a child process: with no defence these cases hang (FIFO) or read without end
# (/dev/zero) or read gigabytes (sparse file). The child caps its address space at what
# it uses after import plus 3 GiB, reports its peak RSS growth, and has a deadline.
FILE_TYPE_SCRIPT = r"""
import hashlib, json, os, resource, time
import numpy as np, cuprims
from cuprims import ProxyArray, ProxyValue

with open("/proc/self/status") as fh:
    vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize"))
resource.setrlimit(resource.RLIMIT_AS, (vm + (3 << 30), resource.RLIM_INFINITY))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
obj = cuprims.make_reduce_into(d_in=ProxyArray(np.float32), d_out=ProxyArray(np.float32), op=CHILD_MAX_OP,
                               h_init=ProxyValue(np.float32), compute_capability=90)
info = cuprims.cache_info()
info.update(seconds=time.perf_counter() - t0, sha=hashlib.sha256(obj.cubin()).hexdigest(),
            rss_growth_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0)
print(json.dumps(info))
"""
FILE_TYPE_SCRIPT = FILE_TYPE_SCRIPT.replace("CHILD_MAX_OP", CHILD_MAX_OP)


def _plant_fifo(path):
    os.mkfifo(path)


def _plant_dev_zero(path):
    path.symlink_to("/dev/zero")


def _plant_sparse(path):
    with open(path, "wb") as fh:
        fh.truncate(2 << 30)


PLANTS = {"fifo": _plant_fifo, "symlink to /dev/zero": _plant_dev_zero, "2 GiB sparse file": _plant_sparse}


@pytest.mark.parametrize("what", sorted(PLANTS))
def test_non_entry_at_entry_path_is_rejected_without_reading(cache, what, tmp_path):
    path = entry_path(cache.root, "cubin", cache.max.cubin_key)
    path.unlink()
    PLANTS[what](path)
    proc = run_python(FILE_TYPE_SCRIPT, env={"CUPRIMS_CACHE_DIR": str(cache.root), **max_op_env(tmp_path)},
                      timeout=90)
    out = last_json(proc.stdout)
    assert out["sha"] == hashlib.sha256(cache.max.cubin).hexdigest()
    assert out["disk_corrupt_discarded"] == 1
    assert out["links"] == 1 and out["nvrtc_compiles"] == 0
    assert out["rss_growth_kib"] < (1 << 20), f"the entry was read into memory: {out['rss_growth_kib']} KiB"
    _assert_repaired(cache, "cubin")

