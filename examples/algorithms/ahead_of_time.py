"""Ahead of time, with no GPU: build a reduction for sm_80 and sm_90 from placeholders,
read its cubin, and save it as a blob that loads without a compiler."""

import numpy as np

import cuprims


def main():
    reducer = cuprims.make_reduce_into(d_in=cuprims.ProxyArray(np.float32), d_out=cuprims.ProxyArray(np.float32),
                                       op=lambda a, b: a + b, h_init=cuprims.ProxyValue(np.float32),
                                       compute_capability=[80, 90])
    assert reducer.compute_capabilities == [80, 90]
    assert reducer.cubin(90)[:4] == b"\x7fELF"         # the sm_90 code (it is in the disk cache too)

    blob = cuprims.serialize(reducer)                  # data only: description and cubins
    again = cuprims.deserialize(blob)                  # compiles nothing, imports no numba
    assert again.compute_capabilities == [80, 90]
    print("ahead_of_time: ok")


if __name__ == "__main__":
    main()
