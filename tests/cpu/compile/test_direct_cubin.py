"""Units with nothing to link (built-in operators only) are compiled by NVRTC straight to
a cubin, skipping nvJitLink (issue 10): the machine code must be what the LTO-IR + link
path makes, section by section, and units with a Python operator must still be linked."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import cuprims
from cuprims import OpKind, ProxyArray, SortOrder
from cuprims._build import build as jit_build
from cuprims._base import stats
from cuprims._compile.elfmeta import _section_headers, kernel_param_layout, read_meta, sections
from cuprims._compile.link import link_cubin
from cuprims._compile.nvrtc import compile_to_cubin, compile_to_ltoir

ARCH = 90
f4, f8, i4, u4, u8 = np.float32, np.float64, np.int32, np.uint32, np.uint64

BUILDS = {
    "reduce": lambda: cuprims.make_reduce_into(d_in=ProxyArray(f4), d_out=ProxyArray(f4), op=OpKind.PLUS,
                                               h_init=f4(0), compute_capability=ARCH),
    "scan": lambda: cuprims.make_exclusive_scan(d_in=ProxyArray(i4), d_out=ProxyArray(i4), op=OpKind.PLUS,
                                                init_value=i4(0), compute_capability=ARCH),
    "radix_sort": lambda: cuprims.make_radix_sort(d_in_keys=ProxyArray(u4), d_out_keys=ProxyArray(u4),
                                                  d_in_values=ProxyArray(f8), d_out_values=ProxyArray(f8),
                                                  order=SortOrder.DESCENDING, compute_capability=ARCH),
    "lower_bound": lambda: cuprims.make_lower_bound(d_data=ProxyArray(i4), d_values=ProxyArray(i4),
                                                    d_out=ProxyArray(u8), compute_capability=ARCH),
    "transform": lambda: cuprims.make_unary_transform(d_in=ProxyArray(f8), d_out=ProxyArray(f8),
                                                      op=OpKind.NEGATE, compute_capability=ARCH),
}


def _units(make, monkeypatch) -> list:
    """The generated units a build compiles (captured at the build stage)."""
    seen = []
    real = jit_build._compile_and_link

    def spy(source, arch, ops, objs, disk):
        seen.append((source, tuple(ops)))
        return real(source, arch, ops, objs, disk)

    monkeypatch.setattr(jit_build, "_compile_and_link", spy)
    make()
    monkeypatch.setattr(jit_build, "_compile_and_link", real)
    return seen


def _layout(cubin: bytes) -> dict[str, tuple[int, bytes]]:
    """Every code, shared-memory, constant-bank and initialised-data section: (size, bytes;
    b"" where NOBITS)."""
    headers = _section_headers(cubin)
    (shstrndx,) = struct.unpack_from("<H", cubin, 0x3E)
    names = headers[shstrndx]
    content = sections(cubin)
    out = {}
    for sec in headers:
        start = names[4] + sec[0]
        name = cubin[start:cubin.index(b"\0", start)].decode()
        if name.startswith((".text.", ".nv.shared.", ".nv.constant0.")):
            out[name] = (sec[5], content[name])
        elif name == ".nv.global.init":
            # the same initialised globals, which the two linkers may lay out in another
            # order (the code reaches them through relocations the driver applies)
            out[name] = (sec[5], bytes(sorted(content[name])))
    return out


@pytest.mark.ci_sample(every=2)
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_a_unit_without_operators_to_link_compiles_to_the_code_the_lto_link_makes(name, monkeypatch):
    units = _units(BUILDS[name], monkeypatch)
    assert units and all(not ops and not source.extern_symbols for source, ops in units)
    assert cuprims.cache_info()["links"] == 0     # nvJitLink never ran
    for source, _ in units:
        direct, symbols = compile_to_cubin(source, ARCH)
        ltoir, lto_symbols = compile_to_ltoir(source, ARCH)
        linked = link_cubin(ltoir, [], ARCH)
        assert symbols == lto_symbols
        assert struct.unpack_from("<H", direct, 0x10)[0] == 2      # ET_EXEC: loadable as it is
        ours, theirs = _layout(direct), _layout(linked)
        assert any(k.startswith(".text.") for k in ours) and ours == theirs
        for lowered in symbols.values():
            assert kernel_param_layout(direct, lowered) == kernel_param_layout(linked, lowered)
        fields = source.meta_fields
        assert read_meta(direct, "cuprims_meta", fields) == read_meta(linked, "cuprims_meta", fields)


def _looped_sum(a, b):   # more than one expression: numba compiles it
    total = a
    for _ in range(1):
        total = total + b
    return total


def test_a_python_operator_numba_compiles_is_still_linked(monkeypatch):
    units = _units(lambda: cuprims.make_reduce_into(d_in=ProxyArray(f4), d_out=ProxyArray(f4),
                                                    op=_looped_sum, h_init=f4(0), compute_capability=ARCH),
                   monkeypatch)
    assert [len(ops) for _, ops in units] == [1]
    info = cuprims.cache_info()
    assert (info["links"], info["numba_compiles"]) == (1, 1)


def test_a_python_operator_translated_to_cpp_compiles_straight_to_a_cubin(monkeypatch):
    units = _units(lambda: cuprims.make_reduce_into(d_in=ProxyArray(f4), d_out=ProxyArray(f4),
                                                    op=lambda a, b: a + b, h_init=f4(0), compute_capability=ARCH),
                   monkeypatch)
    assert [len(ops) for _, ops in units] == [1] and jit_build.links_nothing(*units[0])
    info = cuprims.cache_info()
    assert (info["links"], info["numba_compiles"], info["nvrtc_compiles"]) == (0, 0, 1)


def test_a_unit_that_calls_an_operator_cannot_be_compiled_straight_to_a_cubin():
    from cuprims._compile.source import Source

    unit = Source(text='extern "C" __device__ void op(int*, int*, int*);\n', name_expressions=(),
                  extern_symbols=("op",), meta_fields=())
    with pytest.raises(ValueError, match="must be linked"):
        compile_to_cubin(unit, ARCH)


def test_the_direct_and_the_linked_build_of_one_unit_have_different_cache_keys(monkeypatch):
    units = _units(BUILDS["reduce"], monkeypatch)
    source, _ = units[0]
    assert jit_build.build_key(source, ARCH, ()) != jit_build.kernel_key(source, ARCH)
    # a second process reads the direct build back from disk and compiles nothing
    cuprims.clear_all_caches()
    stats.reset()
    BUILDS["reduce"]()
    info = cuprims.cache_info()
    assert (info["nvrtc_compiles"], info["links"], info["disk_hits"]) == (0, 0, 1)


def test_the_setting_off_links_every_unit_and_the_code_is_the_same():
    direct = BUILDS["scan"]().cubin()
    cuprims.clear_all_caches()
    stats.reset()
    with cuprims.settings.override(direct_cubin=False):
        linked = BUILDS["scan"]().cubin()
    info = cuprims.cache_info()
    assert (info["nvrtc_compiles"], info["links"]) == (1, 1)   # its own key: not served the direct build
    assert _layout(direct) == _layout(linked)
