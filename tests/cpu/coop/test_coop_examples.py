"""examples/coop/*.py compiled and linked for sm_90 with no GPU.

Each example's ``main()`` runs under test_coop_gpu_kernels_compile's ``no_launch``
patch: host-to-device copies become numpy arrays, and the kernel's launch compiles it
for the launch's argument types and links it (nvJitLink, LTO) with its ``link=`` files
into a cubin, then stops the example (``_Launched``) before any result is read. Every
example launches one kernel, so its whole device code is built here; the GPU test
(tests/gpu/project/test_examples_gpu.py) runs them for real.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

numba = pytest.importorskip("numba")
from numba import cuda  # noqa: E402

from test_coop_gpu_kernels_compile import _Launched, no_launch  # noqa: E402,F401  (no_launch: a fixture)

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples" / "coop").glob("*.py"))


def test_examples_are_found():
    assert len(EXAMPLES) >= 10, EXAMPLES


@pytest.fixture
def kernels(no_launch, monkeypatch):
    """The kernels an example defines (``no_launch``'s compile-only kernels), in order."""
    made = []
    compile_only_jit = cuda.jit

    def jit(*args, **kwargs):
        decorate = compile_only_jit(*args, **kwargs)
        if kwargs.get("device"):
            return decorate
        if args and callable(args[0]):     # a bare @cuda.jit (Style 2): already the kernel
            made.append(decorate)
            return decorate

        def record(fn):
            made.append(decorate(fn))
            return made[-1]
        return record

    monkeypatch.setattr(cuda, "jit", jit)
    return made


@pytest.mark.ci_sample(every=3)
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_kernel_compiles_and_links(kernels, path, capsys):
    spec = importlib.util.spec_from_file_location(f"_coop_example_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)          # defines, builds and launches nothing yet
    assert not kernels
    with pytest.raises(_Launched):           # raised by the launch, after the kernel linked
        module.main()
    # one kernel per example: the one just linked is all of its device code
    assert len(kernels) == 1, f"{path.name} defines {len(kernels)} kernels"
    assert "ok" not in capsys.readouterr().out
