"""Every cuprims exception pickles and unpickles as itself (type, message, attributes): one
raised in another process, a Dask worker's, reaches the caller as the same exception. An
attribute that cannot pickle travels as its description."""

from __future__ import annotations

import pickle
import threading

import pytest

from cuprims import errors

CASES = [
    errors.ArgumentError("h_init", "a value", None),
    errors.ArgumentTypeError("d_in", "a device array", [1, 2, 3]),
    errors.DeviceMismatchError("d_out", 0, 1),
    errors.CompileError("NVRTC failed", log="error: x", source_path="/tmp/unit.cu"),
    errors.LinkError("nvJitLink failed", log="undefined symbol"),
    errors.OperatorCompileError("op", "(int32, int32) -> int32", TypeError("bad"), argument="op"),
    errors.OperatorResultError("op", "(int32) -> bool", "float64", "a truth value", argument="cond"),
    errors.NoDeviceError("no GPU"),
    errors.CudaError("cuLaunchKernel", 700, "illegal address"),
    errors.BlobError("checksum", "abc", "abd"),
    errors.CacheError("disk full"),
    errors.CoopError("bad tile"),
]


@pytest.mark.parametrize("exc", CASES, ids=lambda e: type(e).__name__)
def test_round_trip(exc):
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc) and str(back) == str(exc) and back.args == exc.args
    same = {k: v for k, v in vars(exc).items() if not isinstance(v, BaseException)}
    assert {k: v for k, v in vars(back).items() if k in same} == same
    assert isinstance(back, errors.CuprimsError)


def test_an_unpicklable_argument_value_travels_as_its_description():
    exc = errors.ArgumentError("op", "an operator", threading.Lock())
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is errors.ArgumentError and back.argument == "op" and str(back) == str(exc)
    assert isinstance(back.given, str) and "lock" in back.given.lower()
