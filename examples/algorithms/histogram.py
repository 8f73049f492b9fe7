"""Even-bin histograms: bytes into 256 bins, integers into 10 bins of 100, and floats."""

import cupy as cp
import numpy as np

import cuprims


def main():
    rng = np.random.default_rng(6)

    # uint8 samples, one bin per value: 257 levels over [0, 256)
    b = rng.integers(0, 256, 1 << 20).astype(np.uint8)
    hist = cp.empty(256, cp.int32)
    cuprims.histogram_even(d_samples=cp.asarray(b), d_histogram=hist, num_output_levels=257,
                           lower_level=np.int32(0), upper_level=np.int32(256), num_samples=b.size)
    assert (hist.get() == np.bincount(b, minlength=256)).all()

    # int32 samples into 10 bins of 100 over [0, 1000); samples outside are not counted
    s = rng.integers(-100, 1100, 100_000).astype(np.int32)
    counts = cp.empty(10, cp.int64)
    cuprims.histogram_even(d_samples=cp.asarray(s), d_histogram=counts, num_output_levels=11,
                           lower_level=np.int32(0), upper_level=np.int32(1000), num_samples=s.size)
    inside = s[(s >= 0) & (s < 1000)]
    assert (counts.get() == np.bincount(inside // 100, minlength=10)).all()

    # float samples (bin centres here, so no sample sits on an edge)
    f = ((rng.integers(0, 8, 10_000) + 0.5) / 8).astype(np.float32)
    fh = cp.empty(8, cp.uint32)
    cuprims.histogram_even(d_samples=cp.asarray(f), d_histogram=fh, num_output_levels=9,
                           lower_level=np.float32(0), upper_level=np.float32(1), num_samples=f.size)
    assert (fh.get() == np.histogram(f, bins=8, range=(0, 1))[0]).all()
    print("histogram: ok")


if __name__ == "__main__":
    main()
