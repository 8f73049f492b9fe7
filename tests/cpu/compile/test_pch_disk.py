"""Persistent NVRTC precompiled headers (issue 10): a PCH made by one process is a disk-cache
entry that a later process with no compiled kernels uses for its first compile; damaged,
stale, oversized or unplaceable ones are never used. Real NVRTC throughout; each process
builds with CUPRIMS_PCH_DISK=1 (the suite's default keeps PCHs within the process)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import textwrap
import zlib
from pathlib import Path

import pytest

import cuprims
from cpu_helpers import last_json, make_f4, run_python
from cuprims._compile import pch, pch_codec, pch_heap, pch_store
from cuprims._base import stats
from cuprims._cache.lifecycle import SIDECAR
from cuprims._cache.disk import DiskCache

# Builds the algorithms named on the command line (the reductions "f4+", "f8max", "i4min",
# an int32 inclusive scan "scan", a uint32 radix sort "sort"; optionally "@80" for sm_80)
# and prints their cubins' digests with the counters and how many memory files holding a
# PCH the process has open.
_BUILD = """
    import hashlib, json, os, sys, numpy as np, cuprims
    from cuprims import OpKind, ProxyArray as P, SortOrder
    def reduction(dt, op):
        return lambda cc: cuprims.make_reduce_into(d_in=P(dt), d_out=P(dt), op=op, h_init=dt(0), compute_capability=cc)
    BUILDS = {"f4+": reduction(np.float32, OpKind.PLUS), "f8max": reduction(np.float64, OpKind.MAXIMUM),
              "i4min": reduction(np.int32, OpKind.MINIMUM),
              "scan": lambda cc: cuprims.make_inclusive_scan(d_in=P(np.int32), d_out=P(np.int32), op=OpKind.PLUS,
                                                             compute_capability=cc),
              "sort": lambda cc: cuprims.make_radix_sort(d_in_keys=P(np.uint32), d_out_keys=P(np.uint32),
                                                         d_in_values=None, d_out_values=None,
                                                         order=SortOrder.ASCENDING, compute_capability=cc)}
    out = {"cubins": []}
    for spec in sys.argv[1:]:
        name, _, cc = spec.partition("@")
        cubin = BUILDS[name](int(cc or 90)).cubin()
        assert cubin[:4] == b"\\x7fELF"
        out["cubins"].append(hashlib.sha256(cubin).hexdigest())
    info = cuprims.cache_info()
    out.update({k: v for k, v in info.items() if k.startswith("pch") or k.startswith("disk") or k == "nvrtc_compiles"})
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    out["memory_files"] = sum(link.startswith("/memfd:cuprims-pch") for link in links)
    print(json.dumps(out))
"""


def _result(proc, cache: Path) -> dict:
    """A build process's JSON, led by what explains a PCH not made or not used (an assertion
    message shows a dict's first items only): where the heap lies, the free disk, the
    process's warnings (a disk cache it could not write)."""
    got = last_json(proc.stdout)
    root = next(p for p in (cache, *cache.parents) if p.exists())
    lead = {"pch_heap": got.pop("pch_heap", None), "free_disk_mb": shutil.disk_usage(root).free >> 20,
            "warnings": proc.stderr[-300:]}
    return {**lead, **got}


def _build(cache: Path, *specs: str, env: dict | None = None, prefix: tuple[str, ...] = (), pre: str = "") -> dict:
    code = pre + textwrap.dedent(_BUILD)
    full = {"CUPRIMS_CACHE_DIR": str(cache), "CUPRIMS_DISK_CACHE": "1", "CUPRIMS_PCH_DISK": "1", **(env or {})}
    proc = run_python(code.replace("sys.argv[1:]", repr(list(specs))), env=full, prefix=prefix)
    return _result(proc, cache)


def _pch_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "v2" / "pch").glob("*/*") if not p.name.startswith("."))


def _entry(root: Path) -> Path:
    (data,) = [p for p in _pch_files(root) if not p.name.endswith(SIDECAR)]
    return data


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A cache directory where one process compiled ``f4+`` from empty: its PCH entry."""
    root = tmp_path_factory.mktemp("pch-made") / "cache"
    result = _build(root, "f4+")
    yield root, result
    shutil.rmtree(root, ignore_errors=True)   # ~150 MB: not kept for pytest's retained runs


@pytest.fixture
def copy_of(tmp_path):
    """Copies of the made cache directory, removed after the test."""
    copies = []

    def copy(source: Path) -> Path:
        target = tmp_path / f"copy{len(copies)}"
        shutil.copytree(source, target, copy_function=shutil.copy2)
        copies.append(target)
        return target

    yield copy
    for c in copies:
        shutil.rmtree(c, ignore_errors=True)


def test_a_fresh_process_compiles_its_first_unit_with_the_pch_another_one_made(made, copy_of, tmp_path):
    root, first = made
    assert first["pch_heap"].startswith("placed at 0x200000000000"), first["pch_heap"]
    assert (first["pch_builds"], first["pch_writes"], first["pch_uses"]) == (1, 1, 0)
    data = _entry(root)
    side = data.with_name(data.name + SIDECAR)
    for f in (data, side):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert 50 << 20 < _sidecar_meta(data)["bytes"] < 400 << 20       # the PCH NVRTC wrote
    assert 5 << 20 < data.stat().st_size < _sidecar_meta(data)["bytes"] // 5   # its entry, packed
    summary = DiskCache(root).summary()
    assert summary["kinds"]["pch"]["entries"] == 1 and summary["kinds"]["pch"]["bytes"] == data.stat().st_size

    cache = copy_of(root)
    used = _build(cache, "f8max")   # another reduction: no kernel or cubin entry to hit, same header prefix
    assert used["nvrtc_compiles"] == 1 and used["disk_hits"] == 0
    assert (used["pch_loads"], used["pch_uses"], used["pch_hits"], used["pch_rejects"]) == (1, 1, 1, 0), used
    assert (used["pch_builds"], used["pch_writes"]) == (0, 0)
    plain = _build(tmp_path / "plain", "f8max", env={"CUPRIMS_PCH": "0"})
    assert plain["pch_uses"] == 0
    assert used["cubins"] == plain["cubins"]   # a PCH changes how fast, never what
    assert DiskCache(cache).summary()["kinds"]["pch"]["hits"] == 1
    info = json.loads(run_python("import sys; from cuprims._cache.cli import main; sys.exit(main(['cache', 'info', "
                                 "'--json']))", env={"CUPRIMS_CACHE_DIR": str(cache)}).stdout)
    assert info["kinds"]["pch"]["entries"] == 1


def test_a_damaged_pch_is_caught_by_its_checksum_deleted_and_made_again(made, copy_of):
    root, _ = made
    cache = copy_of(root)
    data = _entry(cache)
    with open(data, "r+b") as f:   # in place: what a bad disk or a stray writer would do
        f.seek(data.stat().st_size // 2)
        f.write(b"\xff" * 4096)
    got = _build(cache, "f8max")   # NVRTC would crash on this file (SIGSEGV), had it been handed it
    assert got["disk_corrupt_discarded"] == 1 and got["pch_loads"] == 0 and got["pch_hits"] == 0
    assert (got["pch_builds"], got["pch_writes"]) == (1, 1)   # made again, as part of this compile
    fresh = _entry(cache)
    assert zlib.crc32(fresh.read_bytes()) == _sidecar_meta(fresh)["crc32"]
    assert sum(_sidecar_meta(fresh)["frames"]) == fresh.stat().st_size


def _sidecar_meta(data: Path) -> dict:
    from cuprims._cache.entries import decode_entry

    return decode_entry(data.with_name(data.name + SIDECAR).read_bytes(), kind="pch", key=data.name)[0]


@pytest.fixture(scope="module")
def plain_f8max(tmp_path_factory):
    """The cubin of ``f8max`` built without any PCH."""
    root = tmp_path_factory.mktemp("pch-plain")
    got = _build(root, "f8max", env={"CUPRIMS_PCH": "0"})
    assert got["pch_uses"] == 0
    return got["cubins"][0]


@pytest.mark.ci_sample(every=4)
@pytest.mark.parametrize("damage", ["frame flipped", "frames cut elsewhere", "truncated", "size in sidecar"])
def test_a_damaged_packed_entry_never_reaches_nvrtc_and_is_made_again(made, copy_of, plain_f8max, damage):
    """NVRTC crashes on a damaged PCH (SIGSEGV): a packed entry whose bytes, frames or size
    disagree with its sidecar is refused before anything is unpacked for NVRTC, deleted, and
    made again by the compile; the build's output is unchanged."""
    root, _ = made
    cache = copy_of(root)
    data = _entry(cache)
    frames = _sidecar_meta(data)["frames"]
    assert len(frames) >= 4
    if damage == "frame flipped":
        with open(data, "r+b") as f:   # in place, in the third frame: what a bad disk would do
            f.seek(frames[0] + frames[1] + frames[2] // 2)
            f.write(b"\x55" * 64)
    elif damage == "frames cut elsewhere":   # a sidecar validly framed, its frame sizes wrong
        _resign(data, frames=[frames[0] + 100, frames[1] - 100] + frames[2:])
    elif damage == "truncated":
        os.truncate(data, data.stat().st_size // 2)
    else:
        _resign(data, bytes=_sidecar_meta(data)["bytes"] + 1)
    got = _build(cache, "f8max")
    assert got["disk_corrupt_discarded"] == 1 and got["pch_loads"] == 0 and got["pch_hits"] == 0, got
    assert (got["pch_builds"], got["pch_writes"]) == (1, 1)   # made again, as part of this compile
    assert got["cubins"] == [plain_f8max]
    fresh = _entry(cache)
    meta = _sidecar_meta(fresh)
    assert zlib.crc32(fresh.read_bytes()) == meta["crc32"] and sum(meta["frames"]) == fresh.stat().st_size
    again = _build(cache, "i4min")   # and the new entry serves the next process
    assert (again["pch_loads"], again["pch_hits"], again["disk_corrupt_discarded"]) == (1, 1, 0), again


def test_cache_info_shows_precompiled_headers_apart_from_compiled_code(made, copy_of):
    root, _ = made
    cache = copy_of(root)
    pch_bytes = _entry(cache).stat().st_size
    cubin_bytes = sum(p.stat().st_size for p in (cache / "v2" / "cubin").glob("*/*"))
    assert cubin_bytes > 0
    cli = "import sys; from cuprims._cache.cli import main; sys.exit(main(['cache', 'info'{}]))"
    info = json.loads(run_python(cli.format(", '--json'"), env={"CUPRIMS_CACHE_DIR": str(cache)}).stdout)
    assert info["precompiled_headers"] == {"entries": 1, "bytes": pch_bytes, "hits": 0}
    assert info["compiled_code"] == {"entries": 1, "bytes": cubin_bytes, "hits": 0}
    assert info["kinds"]["pch"]["label"].startswith("precompiled headers")
    assert info["kinds"]["cubin"]["label"].startswith("compiled code")
    lines = run_python(cli.format(""), env={"CUPRIMS_CACHE_DIR": str(cache)}).stdout.splitlines()
    assert any("bytes on disk" in line for line in lines)
    (pch_row,) = [line for line in lines if line.startswith("pch ")]
    assert "precompiled headers" in pch_row and f"{pch_bytes / 2**20:.1f} MiB" in pch_row
    (headers,) = [line for line in lines if line.startswith("precompiled headers:")]
    (code,) = [line for line in lines if line.startswith("compiled code:")]
    assert f"{pch_bytes / 2**20:.1f} MiB on disk" in headers and "1 entries" in headers
    assert f"{cubin_bytes / 2**10:.1f} KiB on disk" in code


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """A cache where one process built a reduction, a scan and a radix sort from empty: one
    PCH of each family."""
    root = tmp_path_factory.mktemp("pch-families") / "cache"
    result = _build(root, "f4+", "scan", "sort")
    yield root, result
    shutil.rmtree(root, ignore_errors=True)


def test_three_families_keep_the_cache_under_a_tenth_of_their_pchs(families):
    root, got = families
    assert (got["pch_builds"], got["pch_writes"]) == (3, 3), got
    entries = [p for p in _pch_files(root) if not p.name.endswith(SIDECAR)]
    assert len(entries) == 3
    unpacked = sum(_sidecar_meta(p)["bytes"] for p in entries)
    on_disk = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert unpacked > 300 << 20      # what the cache held when PCHs were stored as NVRTC wrote them
    assert on_disk < 60 << 20, on_disk
    assert got["memory_files"] == 3  # each made PCH kept for the process's later compiles


def test_a_process_keeps_its_unpacked_pchs_within_a_memory_budget(families, copy_of):
    """Unpacked PCHs are memory, not page cache: past ``RESIDENT_BYTES`` the least recently
    used is closed, and unpacked again from the disk cache when a compile needs it."""
    root, _ = families
    sequence = ("f8max", "scan", "i4min")   # reduce's PCH, scan's, reduce's again
    roomy = copy_of(root)
    shutil.rmtree(roomy / "v2" / "cubin")
    got = _build(roomy, *sequence)
    assert (got["pch_loads"], got["pch_hits"], got["pch_builds"], got["memory_files"]) == (2, 3, 0, 2), got
    tight = copy_of(root)
    shutil.rmtree(tight / "v2" / "cubin")
    got = _build(tight, *sequence,
                 pre="import cuprims._compile.pch_resident as _resident\n_resident.RESIDENT_BYTES = 1\n")
    assert (got["pch_loads"], got["pch_hits"], got["pch_builds"], got["memory_files"]) == (3, 3, 0, 1), got
    assert got["disk_corrupt_discarded"] == 0 and len(_pch_files(tight)) == 6


def test_a_heap_that_cannot_be_placed_falls_back_to_pchs_within_the_process(made, copy_of):
    root, _ = made
    cache = copy_of(root)
    # something else holds the address first (as a CUDA context or a sanitizer might)
    taken = ("import ctypes\n"
             "_libc = ctypes.CDLL(None); _libc.mmap.restype = ctypes.c_void_p\n"
             "_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,"
             " ctypes.c_long]\n"
             "assert _libc.mmap(0x200000000000, 1 << 20, 0, 0x22 | 0x4000 | 0x100000, -1, 0) == 0x200000000000\n")
    got = _build(cache, "f8max", "i4min", pre=taken)
    assert "could not be placed" in got["pch_heap"] and "taken" in got["pch_heap"], got["pch_heap"]
    assert (got["pch_loads"], got["pch_writes"], got["pch_rejects"]) == (0, 0, 0)
    assert got["pch_builds"] == 1   # the old behaviour: the second compile of the prefix makes one in the process
    # the bottom-up layout of an unlimited stack: every mmap goes elsewhere
    cache = copy_of(root)
    got = _build(cache, "f8max", prefix=("bash", "-c", 'ulimit -s unlimited && exec "$@"', "bash"))
    assert got["pch_heap"].startswith("within the process only"), got["pch_heap"]
    assert (got["pch_loads"], got["pch_uses"], got["pch_rejects"]) == (0, 0, 0)
    assert len(_pch_files(cache)) == 2   # the entry is still there for processes that can use it


def test_a_pch_nvrtc_refuses_is_deleted_and_not_offered_again_in_the_process(made, copy_of, tmp_path):
    root, _ = made
    cache = copy_of(root)
    key = _entry(cache).name
    # a stale entry: the key of every unit is made to name the sm_90 PCH, and the units are
    # sm_80 ones (other options and directives): NVRTC must refuse it (#629/#630)
    stale = f"import cuprims._compile.pch_store as _s\n_s.pch_key = lambda *a, **k: {key!r}\n"
    got = _build(cache, "f8max@80", "i4min@80", pre=stale)
    assert got["pch_loads"] == 1 and got["pch_uses"] == 1 and got["pch_rejects"] == 1 and got["pch_hits"] == 0, got
    assert got["nvrtc_compiles"] == 2   # both built; the second was not offered the refused PCH
    assert _pch_files(cache) == []      # and the stale file is gone
    plain = _build(tmp_path / "plain", "f8max@80", env={"CUPRIMS_PCH": "0"})
    assert got["cubins"][0] == plain["cubins"][0]


def test_a_small_cap_never_writes_a_pch(monkeypatch, fresh_caches):
    monkeypatch.setenv("CUPRIMS_PCH_DISK", "1")
    monkeypatch.setenv("CUPRIMS_CACHE_MAX_BYTES", "20M")
    assert not pch_store.wanted(20 << 20) and not pch_store.wanted(1000 << 20) and pch_store.wanted(1 << 30)
    assert not pch._persistence_wanted()
    make_f4(cuprims.OpKind.PLUS)
    make_f4(cuprims.OpKind.MAXIMUM)
    assert stats.snapshot()["pch_writes"] == 0
    assert not (fresh_caches / "v2" / "pch").exists()
    # built-in operators: straight to cubin entries (no kernel entry), and no PCH entry
    assert {e.kind for e in DiskCache(fresh_caches).scan()[0]} == {"cubin"}


def test_the_key_covers_prefix_options_arch_and_heap_address():
    options = {"arch": "sm_90", "include_path": ["/a", "/b"], "std": "c++17", "relocatable_device_code": True}
    key = pch_store.pch_key("#include <x>\n", options, 0x200000000000, 1 << 30)
    assert key == pch_store.pch_key("#include <x>\n", dict(reversed(list(options.items()))), 0x200000000000, 1 << 30)
    others = [
        pch_store.pch_key("#include <y>\n", options, 0x200000000000, 1 << 30),
        pch_store.pch_key("#define A 1\n#include <x>\n", options, 0x200000000000, 1 << 30),
        pch_store.pch_key("#include <x>\n", {**options, "arch": "sm_80"}, 0x200000000000, 1 << 30),
        pch_store.pch_key("#include <x>\n", {**options, "include_path": ["/b", "/a"]}, 0x200000000000, 1 << 30),
        pch_store.pch_key("#include <x>\n", {**options, "define_macro": "FOO"}, 0x200000000000, 1 << 30),
        pch_store.pch_key("#include <x>\n", {**options, "default_device": True}, 0x200000000000, 1 << 30),
        pch_store.pch_key("#include <x>\n", options, 0x300000000000, 1 << 30),
    ]
    assert len({key, *others}) == 1 + len(others)
    assert "libnvrtc" in pch_store.nvrtc_identity()


def test_nvrtc_logs_are_read_for_use_and_refusal():
    assert pch.pch_verdict('"default_program": using precompiled header file "/proc/self/fd/7"\n') is None
    assert pch.pch_verdict("Warning #20282-D: incompatible precompiled header (PCH) heap allocation address") \
        == "#20282"
    assert pch.pch_verdict("Warning #629-D: the command line options do not match") == "#629"
    assert pch.pch_verdict("") == "no PCH message"


# ---------------------------------------------------------------- the store itself, no NVRTC

def _stored(root: Path, key: str, payload: bytes) -> pch_store.PchStore:
    store = pch_store.PchStore(DiskCache(root, 4 << 30))
    pending = store.begin(key)
    fd = os.open(pending.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=pending.leaf)  # as NVRTC would
    os.write(fd, payload)
    os.close(fd)
    got, stored = store.publish(pending, {"heap": "0x0"})
    assert stored and got is not None
    os.close(got)
    return store


def _resign(data: Path, **changes) -> None:
    """Rewrite the sidecar of ``data`` with ``changes`` to its fields, validly framed and
    checksummed (as a writer with a bug would): only the checks of the fields can tell."""
    from cuprims._cache.entries import encode_entry

    side = data.with_name(data.name + SIDECAR)
    meta = {**_sidecar_meta(data), **changes}
    side.write_bytes(encode_entry(meta, {}, kind="pch", key=data.name))


@pytest.mark.parametrize("damage", ["flip", "truncate", "grow", "sidecar", "no sidecar", "symlink", "frames",
                                    "format"])
def test_the_store_serves_only_intact_files(tmp_path, monkeypatch, damage):
    monkeypatch.setattr(pch_codec, "PART_BYTES", 1 << 20)   # three frames
    key, payload = "ab" * 32, os.urandom(3 << 20)
    store = _stored(tmp_path, key, payload)
    data = tmp_path / "v2" / "pch" / key[:2] / key
    side = data.with_name(key + SIDECAR)
    assert stat.S_IMODE(data.stat().st_mode) == 0o600 and _sidecar_meta(data)["bytes"] == len(payload)
    fd, _ = store.load(key)
    assert os.read(fd, len(payload) + 1) == payload
    os.close(fd)
    before = stats.snapshot()["disk_corrupt_discarded"]
    if damage == "flip":
        with open(data, "r+b") as f:
            f.seek(len(payload) // 3)
            f.write(bytes(b ^ 0xFF for b in payload[len(payload) // 3:len(payload) // 3 + 16]))
    elif damage == "truncate":
        os.truncate(data, len(payload) - 1)
    elif damage == "grow":
        with open(data, "ab") as f:
            f.write(b"\0")
    elif damage == "sidecar":
        raw = bytearray(side.read_bytes())
        raw[-3] ^= 0x01
        side.write_bytes(bytes(raw))
    elif damage == "no sidecar":
        side.unlink()
    elif damage == "frames":   # the same bytes cut into frames elsewhere
        frames = _sidecar_meta(data)["frames"]
        assert len(frames) == 3
        _resign(data, frames=[frames[0] + 1, frames[1] - 1, frames[2]])
    elif damage == "format":   # an entry of the raw layout before: never read as a packed one
        _resign(data, format=2)
    else:
        data.unlink()
        data.symlink_to(tmp_path / "elsewhere")
        (tmp_path / "elsewhere").write_bytes(payload)
    assert store.load(key) is None
    if damage == "no sidecar":
        assert data.exists()   # without its sidecar a file is just never used (made again over it)
        return
    assert stats.snapshot()["disk_corrupt_discarded"] == before + 1
    assert not data.exists() and not side.exists() and not os.path.islink(data)


@pytest.mark.parametrize("memfd", [True, False])
def test_a_loaded_pch_is_a_file_of_this_process_alone_apart_from_the_entry(tmp_path, monkeypatch, memfd):
    """NVRTC reads the unpacked PCH from a file nothing else names: a sealed memory file (no
    one can write or truncate it under NVRTC), or where memory files are missing a file in
    the entry's private directory, unlinked at once."""
    key, payload = "cd" * 32, os.urandom(3 << 20)
    store = _stored(tmp_path, key, payload)
    leaf = tmp_path / "v2" / "pch" / key[:2]
    entry = os.stat(leaf / key)
    if not memfd:
        monkeypatch.delattr(os, "memfd_create")
    fd, ident = store.load(key)
    try:
        assert ident == (entry.st_dev, entry.st_ino) != (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        assert os.pread(fd, len(payload) + 1, 0) == payload
        link = os.readlink(f"/proc/self/fd/{fd}")
        assert sorted(os.listdir(leaf)) == [key, key + SIDECAR]
        if memfd:
            assert link.startswith("/memfd:cuprims-pch")
            for change in (lambda: os.ftruncate(fd, 1), lambda: os.pwrite(fd, b"x", 0),
                           lambda: os.truncate(f"/proc/self/fd/{fd}", 1)):
                with pytest.raises(PermissionError):
                    change()
        else:
            assert link.startswith(str(leaf) + "/.pch.") and link.endswith(" (deleted)")
            assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
    finally:
        os.close(fd)


def test_pch_entries_are_evicted_with_their_sidecars_and_keep_to_their_share(tmp_path):
    keys = [f"{i:02x}" * 32 for i in range(1, 5)]
    for k in keys:
        _stored(tmp_path, k, os.urandom(1 << 20))
    cache = DiskCache(tmp_path, 4 << 30)
    assert cache.enforce_kind_cap("pch", (1 << 20) + (1 << 19)) == 3   # down to 90% of 1.5 MiB: one left
    left = [e.key for e in cache.scan()[0]]
    assert len(left) == 1
    sidecars = sorted(p.name for p in (tmp_path / "v2" / "pch").glob(f"*/*{SIDECAR}"))
    assert sidecars == [left[0] + SIDECAR]


# ---------------------------------------------------------------- placing the heap, no NVRTC

def test_decoys_and_gaps_leave_no_free_range_for_the_heap_but_the_hole():
    from cuprims._compile import pch_heap

    gib = 1 << 30
    gaps = [(10 * gib, 30 * gib), (40 * gib, 40 * gib + (1 << 20))]
    decoys = pch_heap._decoys(gaps, 508 << 20)
    assert len(decoys) == pch_heap.DECOYS and all(b - a == 508 << 20 for a, b in decoys)
    assert all(d1[1] + pch_heap.GUARD == d2[0] for d1, d2 in zip(decoys, decoys[1:]))
    rest = pch_heap._minus(gaps, decoys)
    assert rest[-1] == (40 * gib, 40 * gib + (1 << 20)) and rest[0] == (10 * gib, 10 * gib + pch_heap.GUARD)
    assert sum(b - a for a, b in rest) + sum(b - a for a, b in decoys) == sum(b - a for a, b in gaps)


def test_the_heap_lands_at_the_target_while_another_thread_maps_memory():
    import ctypes
    import mmap
    import threading

    from cuprims._compile import pch_heap

    libc = pch_heap._libc()
    size, got = 1 << 30, []
    stop = threading.Event()

    def churn():   # arenas and buffers of another thread, mapped and unmapped throughout
        keep = []
        while not stop.is_set():
            m = mmap.mmap(-1, 64 << 20)
            m[0:1] = b"x"
            keep.append(m)
            if len(keep) > 8:
                keep.pop(0).close()
        for m in keep:
            m.close()

    def trigger():   # what NVRTC does: an anonymous mapping wherever the kernel puts it
        got.append(libc.mmap(None, size, 3, 0x22 | 0x4000, -1, 0))

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        address, why = pch_heap.place_heap(size, trigger, targets=(0x280000000000,))
    finally:
        stop.set()
        thread.join()
        for a in got:
            libc.munmap(ctypes.c_void_p(a), size)
    assert (address, why) == (0x280000000000, ""), why
    assert got == [0x280000000000]


_COOP_BUILD = """
    import hashlib, json, sys, numba, cuprims
    from numba import cuda, types
    from cuprims import coop
    from cuprims._compile.link import link_cubin
    from cuprims._operators.numba_device import target_capability
    threads = int(sys.argv[1])
    with coop.target((9, 0)):
        block_sum = coop.block.make_sum(numba.float32, threads)

        def kernel(x, out):
            s = block_sum(x[cuda.threadIdx.x])
            if cuda.threadIdx.x == 0:
                out[0] = s
        f4a = types.Array(types.float32, 1, "C")
        with target_capability((9, 0)):
            codes, _ = cuda.compile_all(kernel, types.void(f4a, f4a), device=False, cc=(9, 0), output="ltoir",
                                        abi="numba")
        cubin = link_cubin(bytes(codes[0]), [bytes(c) for c in codes[1:]] + [bytes(f.data) for f in block_sum.files],
                           90)
    from cuprims._compile.elfmeta import sections
    info = cuprims.cache_info()
    out = {k: v for k, v in info.items() if k.startswith("pch") or k == "nvrtc_compiles"}
    # the machine code: numba's kernel name (in the symbols) and the LTO-IR differ run to run
    code = b"".join(v for k, v in sorted(sections(bytes(cubin)).items()) if k.startswith(".text."))
    out["code"] = [hashlib.sha256(code).hexdigest(), len(code)]
    print(json.dumps(out))
"""


def _coop_build(cache: Path, threads: int, env: dict | None = None) -> dict:
    full = {"CUPRIMS_CACHE_DIR": str(cache), "CUPRIMS_DISK_CACHE": "1", "CUPRIMS_PCH_DISK": "1", **(env or {})}
    code = textwrap.dedent(_COOP_BUILD).replace("sys.argv[1]", repr(str(threads)))
    return _result(run_python(code, env=full), cache)


def test_a_coop_provider_of_another_block_size_uses_the_pch_an_earlier_process_made(tmp_path):
    cache = tmp_path / "cache"
    first = _coop_build(cache, 256)
    assert (first["pch_builds"], first["pch_writes"]) == (1, 1), first
    second = _coop_build(cache, 128)   # another provider, the same headers: no PCH of its own
    assert second["nvrtc_compiles"] == 1, second
    assert (second["pch_builds"], second["pch_writes"], second["pch_hits"], second["pch_rejects"]) == (0, 0, 1, 0)
    assert len(_pch_files(cache)) == 2   # one entry and its sidecar
    plain = _coop_build(tmp_path / "plain", 128, env={"CUPRIMS_PCH": "0"})
    assert plain["code"][1] > 0
    assert plain["pch_uses"] == 0 and second["code"] == plain["code"]   # a PCH changes how fast, never what
    shutil.rmtree(cache, ignore_errors=True)


def test_the_maps_read_through_libc_are_the_kernels_own_text():
    with open("/proc/self/maps") as f:
        expected = [line.split()[0] for line in f]
    got = pch_heap._maps_text().splitlines()
    # the two reads lie a few allocations apart: compare the bulk, and every parsed field
    ranges = {line.split()[0] for line in got}
    assert abs(len(got) - len(expected)) <= 4 and len(ranges & set(expected)) > len(expected) - 8
    maps = pch_heap.mappings()
    assert maps == sorted(maps) and all(lo < hi for lo, hi, _, _ in maps)
    assert any(name == "[stack]" for _, _, _, name in maps)


def _pch_like(size: int) -> bytes:
    """Mostly zeros, the rest scattered random bytes: the shape of a PCH."""
    import numpy as np

    rng = np.random.default_rng(size)
    values = rng.integers(0, 256, size, dtype=np.uint8)
    return (values * (rng.random(size) < 0.2)).astype(np.uint8).tobytes()


def _memory_copy(tmp_path: Path, data: bytes) -> int:
    dir_fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fd = pch_codec.memory_file(len(data), dir_fd)
    finally:
        os.close(dir_fd)
    os.pwrite(fd, data, 0)
    return fd


@pytest.mark.parametrize("size", [1, 5 << 20, pch_codec.PART_BYTES * 2 + 7])
def test_packing_gives_one_frame_per_part_and_unpacking_restores_every_byte(tmp_path, size):
    import zstandard

    data = _pch_like(size)
    source = _memory_copy(tmp_path, data)
    copy = _memory_copy(tmp_path, bytes(size))
    out = _memory_copy(tmp_path, bytes(size))
    try:
        frames = pch_codec.pack(source, size, copy_to=copy)
        assert [zstandard.frame_content_size(f) for f in frames] == pch_codec.part_sizes(size)
        assert len(frames) == -(-size // pch_codec.PART_BYTES)
        assert os.pread(copy, size + 1, 0) == data   # the process's own copy, written on the way
        if size > 1 << 20:
            assert sum(map(len, frames)) < size // 2
        pch_codec.unpack(b"".join(frames), [len(f) for f in frames], size, out)
        assert os.pread(out, size + 1, 0) == data
    finally:
        for fd in (source, copy, out):
            os.close(fd)


@pytest.mark.parametrize("wrong", ["frames shifted", "size short", "size long", "frame cut", "frame extended"])
def test_unpacking_refuses_frames_that_do_not_hold_exactly_their_parts(tmp_path, wrong):
    size = pch_codec.PART_BYTES + (3 << 20)
    data = _pch_like(size)
    source = _memory_copy(tmp_path, data)
    try:
        frames = pch_codec.pack(source, size)
    finally:
        os.close(source)
    packed, lengths = b"".join(frames), [len(f) for f in frames]
    if wrong == "frames shifted":
        lengths = [lengths[0] + 1, lengths[1] - 1]
    elif wrong == "size short":
        size -= 1
    elif wrong == "size long":
        size += 1
    elif wrong == "frame cut":
        packed, lengths = packed[:-1], [lengths[0], lengths[1] - 1]
    else:
        packed, lengths = packed + frames[1][-4:], [lengths[0], lengths[1] + 4]
    out = _memory_copy(tmp_path, bytes(size))
    try:
        with pytest.raises(pch_codec.Damaged):
            pch_codec.unpack(packed, lengths, size, out)
    finally:
        os.close(out)
