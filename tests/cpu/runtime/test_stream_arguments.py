"""Stream arguments are checked as cuda.compute users pass them: an object without
``__cuda_stream__`` (and not a CuPy, PyTorch or numba stream), or whose ``__cuda_stream__``
returns anything but a (version, handle) pair of integers, is a TypeError naming
``stream``; a valid one gives its handle. (The GPU tests check the same on a size query.)"""

from __future__ import annotations

import numpy as np
import pytest

from cuprims._runtime.streams import stream_handle
from cuprims.errors import ArgumentTypeError, CuprimsError


def _protocol(value):
    class Stream:
        def __cuda_stream__(self):
            return value
    return Stream()


@pytest.mark.parametrize("bad", [object(), "stream", 1.5, -1, _protocol((0,)), _protocol((0, 1, 2)),
                                 _protocol([0, 7]), _protocol(("0", 7)), _protocol((0, -5)), _protocol((0, None)),
                                 _protocol((True, 7)), _protocol(None)])
def test_a_bad_stream_is_a_type_error_naming_it(bad):
    with pytest.raises(ArgumentTypeError, match="argument 'stream'") as info:
        stream_handle(bad)
    assert isinstance(info.value, TypeError) and isinstance(info.value, CuprimsError)


@pytest.mark.parametrize("good,handle", [(None, 0), (0, 0), (7, 7), (_protocol((0, 12345)), 12345),
                                         (_protocol((0, np.int64(9))), 9)])
def test_a_good_stream_gives_its_handle(good, handle):
    assert stream_handle(good) == handle
