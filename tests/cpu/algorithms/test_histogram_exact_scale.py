"""The arithmetic of ``cuprims::histogram::exact_scale`` (``cuprims_histogram.cuh``) without a
GPU: the struct, cut from the header, compiled for the host with g++ beside a 128-bit
reference, bins every value of 8- and 16-bit samples and random and edge values of wider
ones exactly, ``floor((s - lower) * bins / (upper - lower))``, between random and edge
levels of both level types (int64, uint64), on both sides of its 32-bit arithmetic, for
every level range the host lets through (``(upper - lower) * bins`` below 2^64). Skipped
where no host C++20 compiler is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import cuprims

HEADER = Path(cuprims.__file__).parent / "algorithms" / "histogram" / "cuprims_histogram.cuh"

# what the struct takes from CUDA and CUB, on the host
PRELUDE = r"""
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
namespace cuda { namespace std { using namespace ::std; } }
namespace CUB_NS_QUALIFIER { enum CacheLoadModifier { LOAD_DEFAULT }; }
#define _CCCL_HOST_DEVICE
#define _CCCL_FORCEINLINE inline
"""

CHECKS = r"""
using i128 = __int128;
static long long checks = 0, narrow = 0, bad = 0;

template <class L, class S>
void check(i128 lo, i128 hi, int bins, i128 s) {
  exact_scale<L, S> op{};
  op.Init(bins + 1, static_cast<L>(hi), static_cast<L>(lo));
  int bin = -1;
  op.template BinSelect<CUB_NS_QUALIFIER::LOAD_DEFAULT>(static_cast<S>(s), bin, true);
  const int want = (s >= lo && s < hi) ? static_cast<int>((s - lo) * bins / (hi - lo)) : -1;
  ++checks;
  narrow += op.m_narrow;
  if (bin != want && ++bad < 10) {
    std::printf("sample %lld lower %lld upper %lld bins %d: %d, want %d\n", (long long)s, (long long)lo,
                (long long)hi, bins, bin, want);
  }
}

template <class L, class S>
void run(std::mt19937_64& rng, int trials) {
  const i128 smin = std::numeric_limits<S>::min(), smax = std::numeric_limits<S>::max();
  const i128 lmin = std::numeric_limits<L>::min(), lmax = std::numeric_limits<L>::max();
  const int choices[] = {1, 2, 3, 7, 62, 255, 256, 257, 1000, 65535, 65536, 65537, 1 << 20, 2147483646};
  for (int t = 0; t < trials; ++t) {
    i128 lo, hi;
    switch (rng() % 4) {
      case 0: lo = smin - 32 + i128(rng() % 64); hi = smax - 31 + i128(rng() % 64); break;
      case 1: lo = smin + i128(rng() >> 1) % (smax - smin + 1); hi = lo + 1 + i128(rng() % 1000); break;
      case 2: lo = -i128(rng() >> 1); hi = lo + 1 + i128(rng() >> (rng() % 60)); break;
      default: lo = smin; hi = smax + 1;
    }
    lo = lo < lmin ? lmin : lo;
    hi = hi > lmax ? lmax : hi;
    const int bins = choices[rng() % 14];
    if (lo >= hi || (hi - lo) * bins >= (i128(1) << 64)) {
      continue;  // refused on the host
    }
    if (sizeof(S) <= 2) {
      for (i128 v = smin; v <= smax; ++v) check<L, S>(lo, hi, bins, v);
      continue;
    }
    const i128 edges[] = {lo - 1, lo, lo + 1, hi - 2, hi - 1, hi, hi + 1, smin, smax};
    for (i128 e : edges) {
      if (e >= smin && e <= smax) check<L, S>(lo, hi, bins, e);
    }
    for (int k = 0; k < 300; ++k) {
      const i128 v = lo + i128(rng() >> 1) % (hi - lo);  // inside the levels
      if (v >= smin && v <= smax) check<L, S>(lo, hi, bins, v);
      const i128 w = S(rng());                         // anywhere
      check<L, S>(lo, hi, bins, w);
    }
  }
}

int main() {
  std::mt19937_64 rng(20240601);
  run<long long, unsigned char>(rng, 200);
  run<long long, signed char>(rng, 200);
  run<long long, short>(rng, 24);
  run<long long, unsigned short>(rng, 24);
  run<long long, int>(rng, 2000);
  run<long long, unsigned int>(rng, 2000);
  run<long long, long long>(rng, 2000);
  run<long long, unsigned long long>(rng, 2000);
  run<unsigned long long, unsigned long long>(rng, 2000);
  run<unsigned long long, long long>(rng, 2000);
  run<unsigned long long, int>(rng, 2000);
  std::printf("%lld %lld %lld\n", checks, narrow, bad);
  return 0;
}
"""


def _struct(text: str) -> str:
    start = text.index("template <class LevelT, class SampleT>\nstruct exact_scale")
    return text[start:text.index("\n};\n", start) + 4]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_exact_scale_bins_exactly(tmp_path):
    source = tmp_path / "exact_scale.cpp"
    source.write_text(PRELUDE + _struct(HEADER.read_text()) + CHECKS)
    binary = tmp_path / "exact_scale"
    built = subprocess.run(["g++", "-std=c++20", "-O1", "-o", str(binary), str(source)], capture_output=True,
                           text=True, timeout=300)
    if built.returncode and "c++20" in built.stderr:
        pytest.skip("g++ without C++20")
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    checks, narrow, bad = map(int, ran.stdout.split()[-3:])
    assert bad == 0, ran.stdout
    assert checks > 1_000_000 and 0 < narrow < checks   # both arithmetic widths were exercised
