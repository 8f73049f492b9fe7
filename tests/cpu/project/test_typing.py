"""The typed public surface: every algorithm function and algorithm object's call is
annotated with cuprims.typing's types (never ``Any``), each ``make_*`` function returns a
public class of ``cuprims``, and the protocols recognise what they describe."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import cuprims
import cuprims.typing as ct
from cuprims.algorithms.skeleton import Algorithm

MAKERS = sorted(name for name in cuprims.__all__ if name.startswith("make_"))
ONE_SHOTS = sorted(name.removeprefix("make_") for name in MAKERS if name.removeprefix("make_") in cuprims.__all__)
CLASSES = sorted(name for name in cuprims.__all__ if isinstance(getattr(cuprims, name), type)
                 and issubclass(getattr(cuprims, name), Algorithm))


def test_every_make_function_has_its_one_shot_and_a_class():
    assert len(MAKERS) == 28 and len(ONE_SHOTS) == 28, (MAKERS, ONE_SHOTS)
    assert len(CLASSES) == 25, CLASSES    # one Scan (and ScanByKey, SegmentedScan) for both directions


@pytest.mark.parametrize("name", MAKERS)
def test_a_make_function_returns_a_public_class(name):
    returned = inspect.signature(getattr(cuprims, name)).return_annotation
    assert returned in CLASSES, returned


@pytest.mark.parametrize("name", CLASSES)
def test_an_algorithm_class_is_named_as_a_blob_records_it(name):
    """A blob names the class ``cuprims.algorithms.<home>.api.<class>``: the public class
    is that one, under its public name."""
    cls = getattr(cuprims, name)
    assert not name.startswith("_") and cls.__qualname__ == name
    assert re.fullmatch(r"cuprims\.algorithms\.\w+\.api\.\w+", f"{cls.__module__}.{cls.__qualname__}")


def _typed_callables() -> list[tuple[str, object]]:
    found = [(name, getattr(cuprims, name)) for name in MAKERS + ONE_SHOTS]
    found += [(f"{name}.__call__", getattr(cuprims, name).__call__) for name in CLASSES]
    return found


@pytest.mark.parametrize("name,fn", _typed_callables(), ids=[n for n, _ in _typed_callables()])
def test_every_argument_is_typed_and_none_is_any(name, fn):
    sig = inspect.signature(fn)
    untyped = [p for p in sig.parameters.values() if p.name != "self" and p.annotation is p.empty]
    assert not untyped, untyped
    assert sig.return_annotation is not sig.empty
    loose = [p for p in sig.parameters.values() if re.search(r"\bAny\b", str(p.annotation))]
    assert not loose, loose


def test_the_protocols_recognise_arrays_and_streams_by_their_attributes():
    class CudaArray:
        __cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (0, False), "version": 3}

    class DLPackArray:
        def __dlpack__(self):
            return None

    class Stream:
        def __cuda_stream__(self):
            return (0, 0)

    assert isinstance(CudaArray(), ct.SupportsCudaArrayInterface)
    assert isinstance(DLPackArray(), ct.SupportsDLPack)
    assert isinstance(Stream(), ct.SupportsCudaStream)
    assert not isinstance(Stream(), ct.SupportsCudaArrayInterface)
    assert not isinstance(cuprims.ProxyArray(np.float32), (ct.SupportsCudaArrayInterface, ct.SupportsDLPack))


def test_the_module_lists_its_names():
    assert set(ct.__all__) <= set(vars(ct))
    assert dir(ct) == sorted(ct.__all__)
