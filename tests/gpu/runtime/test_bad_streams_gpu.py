"""A bad stream is a TypeError naming ``stream`` on every call, the temporary-storage size
query included (an object without ``__cuda_stream__``, or whose ``__cuda_stream__`` is not
a (version, handle) pair), written as cuda.compute users write the two-phase call; a good
one (a ``__cuda_stream__`` object of CuPy's stream) runs."""

from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")

import cuprims  # noqa: E402
from cuprims import OpKind  # noqa: E402


class _Protocol:
    def __init__(self, value):
        self.value = value

    def __cuda_stream__(self):
        return self.value


@pytest.mark.parametrize("bad", [object(), _Protocol((0,)), _Protocol("stream"), _Protocol((0, -1))])
def test_the_size_query_and_the_run_refuse_a_bad_stream(bad):
    x, out = cp.arange(1000, dtype=np.float32), cp.empty(1, np.float32)
    reducer = cuprims.make_reduce_into(d_in=x, d_out=out, op=OpKind.PLUS, h_init=np.float32(0))
    with pytest.raises(TypeError, match="stream"):
        reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0), stream=bad)
    nbytes = reducer(temp_storage=None, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0))
    tmp = cp.empty(nbytes, np.uint8)
    with pytest.raises(TypeError, match="stream"):
        reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0), stream=bad)
    s = cp.cuda.Stream()
    reducer(temp_storage=tmp, d_in=x, d_out=out, num_items=x.size, h_init=np.float32(0),
            stream=_Protocol((0, s.ptr)))
    s.synchronize()
    assert float(out.get()[0]) == float(np.arange(1000).sum())
