"""Errors at the edges a user meets first: a misspelt or missing keyword, a misspelt
stream=, a machine with no GPU, a setting or CUPRIMS_* variable it cannot take. Each is an
ArgumentError naming what the user wrote (a missing keyword also a TypeError), with the
closest valid keyword suggested for a typo, and none is ignored in silence."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import cuprims
from cuprims.errors import ArgumentError, ArgumentTypeError, NoDeviceError

PUBLIC_FUNCTIONS = sorted(n for n in cuprims.__all__ if n.startswith("make_")
                          or f"make_{n}" in cuprims.__all__ or n == "reduce_into")


def _keywords(name: str) -> list[str]:
    return list(inspect.signature(getattr(cuprims, name)).parameters)


def test_every_algorithm_function_is_covered():
    assert len(PUBLIC_FUNCTIONS) == 56 and "segmented_sort" in PUBLIC_FUNCTIONS


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_a_misspelt_keyword_is_named_and_the_closest_suggested(name):
    first = _keywords(name)[0]
    typo = first[:-1] + first[-1] * 2           # d_in -> d_inn, op -> opp
    with pytest.raises(ArgumentTypeError) as info:
        getattr(cuprims, name)(**{typo: None})
    err = info.value
    assert err.argument == typo, str(err)
    assert f"did you mean {first}=?" in str(err)
    assert isinstance(err, TypeError) and isinstance(err, ValueError)


@pytest.mark.parametrize("name", [n for n in PUBLIC_FUNCTIONS if "stream" in _keywords(n)])
def test_a_misspelt_stream_suggests_stream(name):
    with pytest.raises(ArgumentTypeError) as info:
        getattr(cuprims, name)(stram=None)
    assert info.value.argument == "stram" and "did you mean stream=?" in str(info.value)


@pytest.mark.parametrize("name", PUBLIC_FUNCTIONS)
def test_a_missing_keyword_is_an_argument_error_and_a_type_error(name):
    params = inspect.signature(getattr(cuprims, name)).parameters
    required = [p for p, v in params.items() if v.default is inspect.Parameter.empty]
    given = {p: None for p in required[:-1]}
    with pytest.raises(ArgumentTypeError) as info:
        getattr(cuprims, name)(**given)
    assert isinstance(info.value, TypeError)
    assert info.value.argument == required[-1]


def test_positional_arguments_are_named():
    with pytest.raises(ArgumentTypeError, match="keyword arguments only"):
        cuprims.segmented_sort(1, 2)


def test_a_built_objects_call_names_a_misspelt_keyword():
    """A built object's call is the per-call fast path: it has no wrapper of ours (~0.2 us),
    and Python's own TypeError names the keyword."""
    P, V = cuprims.ProxyArray, cuprims.ProxyValue
    reducer = cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=cuprims.OpKind.PLUS,
                                       h_init=V(np.float32), compute_capability=90)
    with pytest.raises(TypeError, match="'h_intt'"):
        reducer(temp_storage=None, d_in=None, d_out=None, num_items=3, h_intt=1)
    with pytest.raises(TypeError, match="'num_items'"):
        reducer(temp_storage=None, d_in=None, d_out=None)


def test_no_gpu_gives_its_advice_once(monkeypatch):
    from cuprims._runtime import libcuda

    def no_driver():
        raise NoDeviceError("no CUDA driver: libcuda.so.1 could not be loaded (test)")

    monkeypatch.setattr(libcuda, "load", no_driver)
    P, V = cuprims.ProxyArray, cuprims.ProxyValue
    with pytest.raises(NoDeviceError) as info:
        cuprims.make_reduce_into(d_in=P(np.float32), d_out=P(np.float32), op=cuprims.OpKind.PLUS,
                                 h_init=V(np.float32))
    text = str(info.value)
    assert text.count("compute_capability=") == 1 and text.count("ProxyArray") == 1, text


@pytest.mark.parametrize("setting,value,expected", [("memory_cache", "x", "an int"),
                                                    ("pdl", "yes", "a bool"),
                                                    ("cache_lock_timeout", "5", "a number"),
                                                    ("cache_dir", 5, "a path")])
def test_a_setting_of_the_wrong_type_says_what_it_takes(setting, value, expected):
    with pytest.raises(ArgumentTypeError) as info:
        setattr(cuprims.settings, setting, value)
    assert info.value.argument == f"settings.{setting}"
    assert f"expected {expected}" in str(info.value) and " a int" not in str(info.value)


@pytest.mark.parametrize("variable,setting,bad", [
    ("CUPRIMS_CACHE_MAX_BYTES", "cache_max_bytes", "lots"),
    ("CUPRIMS_CACHE_LOCK_TIMEOUT", "cache_lock_timeout", "soon"),
    ("CUPRIMS_MEMORY_CACHE", "memory_cache", "many"),
    ("CUPRIMS_MEMORY_CACHE", "memory_cache", "0"),
    ("CUPRIMS_DISK_CACHE", "disk_cache", "maybe"),
    ("CUPRIMS_PDL", "pdl", "2"),
    ("CUPRIMS_DIRECT_OPS", "direct_ops", "nope"),
])
def test_a_variable_the_setting_cannot_take_is_an_error_naming_it(monkeypatch, variable, setting, bad):
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ArgumentError) as info:
        getattr(cuprims.settings, setting)
    assert info.value.argument == variable
    assert f"settings.{setting}" in str(info.value) and repr(bad) in str(info.value)


@pytest.mark.parametrize("variable,setting,text,value", [
    ("CUPRIMS_CACHE_MAX_BYTES", "cache_max_bytes", "500M", 500 << 20),
    ("CUPRIMS_CACHE_MAX_BYTES", "cache_max_bytes", "", 2 << 30),
    ("CUPRIMS_PDL", "pdl", "off", False),
    ("CUPRIMS_PDL", "pdl", " ", True),
    ("CUPRIMS_MEMORY_CACHE", "memory_cache", "12", 12),
])
def test_good_and_empty_variables_still_read(monkeypatch, variable, setting, text, value):
    monkeypatch.setenv(variable, text)
    assert getattr(cuprims.settings, setting) == value


def test_the_command_line_names_a_variable_it_cannot_take(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, CUPRIMS_CACHE_DIR=str(tmp_path / "c"), CUPRIMS_CACHE_MAX_BYTES="lots")
    out = subprocess.run([sys.executable, "-m", "cuprims", "cache", "info"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "CUPRIMS_CACHE_MAX_BYTES" in lines[0] and "Traceback" not in out.stderr
