"""Block reduce with Python operators: each block's largest value, and its argmax
through a gpu_struct of (value, index).

``coop.block.make_reduce`` takes any Python function of two values; on a struct type
the operator sees records with the fields as attributes. A block's result is valid in
thread 0 only.
"""

import numpy as np
from numba import cuda, float32

import cuprims
from cuprims import coop

THREADS = 128
Pair = cuprims.gpu_struct({"value": np.float32, "index": np.int32}, name="Pair")


def larger(a, b):
    return a if a > b else b


def argmax(a, b):
    return a if a.value >= b.value else b      # ties: either one (the inputs here are distinct)


def main():
    block_max = coop.block.make_reduce(float32, THREADS, larger)
    block_argmax = coop.block.make_reduce(Pair, THREADS, argmax)

    @cuda.jit(link=block_max.files + block_argmax.files)
    def reduce_blocks(x, pairs, maxima, argmaxima):
        g = cuda.blockIdx.x * THREADS + cuda.threadIdx.x
        m = block_max(x[g])
        p = block_argmax(pairs[g])
        if cuda.threadIdx.x == 0:
            maxima[cuda.blockIdx.x] = m
            argmaxima[cuda.blockIdx.x] = p.index

    blocks = 8
    x = np.random.default_rng(2).permutation(blocks * THREADS).astype(np.float32)
    pairs = np.zeros(x.size, Pair.dtype)
    pairs["value"] = x
    pairs["index"] = np.arange(x.size)
    d_max, d_arg = cuda.device_array(blocks, dtype=np.float32), cuda.device_array(blocks, dtype=np.int32)
    reduce_blocks[blocks, THREADS](cuda.to_device(x), cuda.to_device(pairs), d_max, d_arg)

    tiles = x.reshape(blocks, THREADS)
    assert np.array_equal(d_max.copy_to_host(), tiles.max(axis=1))
    assert np.array_equal(d_arg.copy_to_host(), tiles.argmax(axis=1) + THREADS * np.arange(blocks))
    print("block_reduce: ok")


if __name__ == "__main__":
    main()
