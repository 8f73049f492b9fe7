"""The public docstrings' examples (tests/docstring_examples.py), run with no GPU.

An example runs here in one of three ways (:data:`ON_CPU`), or is left to the GPU test
with its reason (:data:`GPU_ONLY`); between them the two tables name every example:

* ``run``: as written (host code, or a build ahead of time already);
* ``build``: ahead of time, as the documentation's "Building without a GPU" shows:
  CuPy's arrays become ``ProxyArray`` placeholders of their dtypes, a ``make_*`` call
  builds for ``compute_capability=90``, and a one-shot call builds (its ``make_*`` with
  the call's build arguments) instead of running. The example stops after its last
  build: what follows calls the object and reads results, which the GPU test does;
* ``coop``: as written, inside ``cuprims.coop.target((9, 0))`` (primitives built for
  sm_90; a kernel it defines is compiled at its launch, on the GPU).

The builds share one disk cache (``shared_cache``), so an example whose build another
one made reads it back.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from typing import Any

import numpy as np
import pytest

import cuprims
import docstring_examples  # tests/docstring_examples.py, on sys.path (tests/conftest.py)

EXAMPLES = {e.id: e for e in docstring_examples.collect()}
ARCH = 90

_ONE_SHOT_FORM = "the one-shot form of {}, whose example builds the same algorithm ahead of time"
_FACTORY = ("one factory call, building one primitive (an NVRTC compile, a second or two): tests/cpu/coop/{} "
            "builds this factory ahead of time, and this file keeps to its time budget with the examples that also "
            "define a kernel")
_FRAGMENT = ("a fragment of a kernel: it compiles inside one (numba-cuda, then NVRTC: seconds each), which the GPU "
             "test launches; cuprims.coop.target's example compiles a Style 2 kernel ahead of time here, and "
             "tests/cpu/coop/test_coop_style2*.py compile every call")

ON_CPU: dict[str, str] = {
    "cuprims": "build",
    "cuprims.ProxyArray": "run",
    "cuprims.ProxyValue": "run",
    "cuprims.RawOp": "build",
    "cuprims.RawOp.from_cpp": "run",
    "cuprims.cache_info": "run",
    "cuprims.clear_all_caches": "run",
    "cuprims.gpu_struct": "run",
    "cuprims.serialize": "run",
    "cuprims.Reduce.serialize": "run",
    "cuprims.make_reduce_into": "build",
    "cuprims.make_segmented_reduce": "build",
    "cuprims.make_inclusive_scan": "build",
    "cuprims.make_exclusive_scan": "build",
    "cuprims.make_unary_transform": "build",
    "cuprims.make_binary_transform": "build",
    "cuprims.make_lower_bound": "build",
    "cuprims.make_upper_bound": "build",
    "cuprims.make_radix_sort": "build",
    "cuprims.make_merge_sort": "build",
    "cuprims.make_unique_by_key": "build",
    "cuprims.make_reduce_by_key": "build",
    "cuprims.make_run_length_encode": "build",
    "cuprims.make_non_trivial_runs": "build",
    "cuprims.make_segmented_inclusive_scan": "build",
    "cuprims.make_segmented_exclusive_scan": "build",
    "cuprims.make_inclusive_scan_by_key": "build",
    "cuprims.make_exclusive_scan_by_key": "build",
    "cuprims.make_three_way_partition": "build",
    "cuprims.make_select": "build",
    "cuprims.make_adjacent_difference": "build",
    "cuprims.make_find_if": "build",
    "cuprims.make_for_each": "build",
    "cuprims.make_merge": "build",
    "cuprims.make_top_k": "build",
    "cuprims.make_segmented_top_k": "build",
    "cuprims.make_histogram_even": "build",
    "cuprims.CacheModifiedInputIterator": "run",
    "cuprims.ConstantIterator": "run",
    "cuprims.CountingIterator": "run",
    "cuprims.DiscardIterator": "build",
    "cuprims.PermutationIterator": "run",
    "cuprims.ReverseIterator": "run",
    "cuprims.ShuffleIterator": "run",
    "cuprims.TransformIterator": "run",
    "cuprims.TransformOutputIterator": "build",
    "cuprims.ZipIterator": "build",
    "cuprims.typing": "run",
    "cuprims.types": "run",
    "cuprims.types.struct": "run",
    "cuprims.types.from_numpy_dtype": "run",
    "cuprims.op": "build",
    "cuprims.struct": "run",
    "cuprims.struct#2": "run",
    "cuprims.struct#3": "run",
    "cuprims.config.Settings": "run",
    "cuprims.coop": "coop",
    "cuprims.coop.target": "run",
    "cuprims.coop.block": "coop",
    "cuprims.coop.block.make_scan": "coop",
    "cuprims.coop.block.make_merge_sort_keys": "coop",
    "cuprims.coop.block.make_radix_sort_keys": "coop",
    "cuprims.coop.block.PrefixCallback": "coop",
    "cuprims.coop.warp": "coop",
}

GPU_ONLY: dict[str, str] = {
    "cuprims.OpKind": "builds what cuprims.op's example builds (a float32 reduction by OpKind.MAXIMUM)",
    "cuprims.errors": "shows the error a call raises (num_items=-1): only a call raises it",
    "cuprims.DoubleBuffer": ("builds the radix sort of cuprims.make_radix_sort's example (of int32 keys); what a "
                             "DoubleBuffer changes happens in the call"),
    **{f"cuprims.{name}": _ONE_SHOT_FORM.format(f"cuprims.make_{name}") for name in (
        "reduce_into", "segmented_reduce", "inclusive_scan", "exclusive_scan", "unary_transform", "binary_transform",
        "lower_bound", "upper_bound", "radix_sort", "merge_sort", "segmented_sort", "unique_by_key",
        "three_way_partition", "select", "histogram_even", "reduce_by_key",
        "run_length_encode", "non_trivial_runs", "segmented_inclusive_scan",
        "segmented_exclusive_scan", "inclusive_scan_by_key", "exclusive_scan_by_key", "adjacent_difference",
        "find_if", "for_each", "merge", "top_k", "segmented_top_k")},
    "cuprims.make_segmented_sort": ("its build (the segmented sort's six kernels) takes about 20 s of NVRTC, a "
                                    "third of this file's budget; tests/cpu/algorithms/test_segmented_sort.py builds "
                                    "the algorithm ahead of time"),
    "cuprims.coop.block.make_load": _FACTORY.format("test_coop_block.py"),
    "cuprims.coop.block.make_store": _FACTORY.format("test_coop_block.py"),
    "cuprims.coop.block.make_reduce": _FACTORY.format("test_coop_block.py"),
    "cuprims.coop.block.make_sum": _FACTORY.format("test_coop_block.py"),
    "cuprims.coop.block.make_scan#2": _FACTORY.format("test_coop_prefix.py"),
    "cuprims.coop.block.make_exclusive_sum": _FACTORY.format("test_coop_prefix.py"),
    "cuprims.coop.block.make_inclusive_sum": _FACTORY.format("test_coop_prefix.py"),
    "cuprims.coop.block.make_exclusive_scan": _FACTORY.format("test_coop_prefix.py"),
    "cuprims.coop.block.make_inclusive_scan": _FACTORY.format("test_coop_prefix.py"),
    "cuprims.coop.block.make_exchange": _FACTORY.format("test_coop_block_sort.py"),
    "cuprims.coop.block.make_radix_sort_keys_descending": _FACTORY.format("test_coop_block_sort.py"),
    "cuprims.coop.block.make_merge_sort_pairs": _FACTORY.format("test_coop_pairs.py"),
    "cuprims.coop.block.make_radix_sort_pairs": _FACTORY.format("test_coop_pairs.py"),
    "cuprims.coop.block.make_radix_sort_pairs_descending": _FACTORY.format("test_coop_pairs.py"),
    "cuprims.coop.block.make_discontinuity": _FACTORY.format("test_coop_neighbours.py"),
    "cuprims.coop.block.make_adjacent_difference": _FACTORY.format("test_coop_neighbours.py"),
    "cuprims.coop.block.make_histogram": _FACTORY.format("test_coop_histogram.py"),
    "cuprims.coop.block.make_shuffle": _FACTORY.format("test_coop_block_shuffle.py"),
    "cuprims.coop.block.make_run_length_decode": _FACTORY.format("test_coop_run_length.py"),
    "cuprims.coop.warp.make_reduce": _FACTORY.format("test_coop_warp.py"),
    "cuprims.coop.warp.make_sum": _FACTORY.format("test_coop_warp.py"),
    "cuprims.coop.warp.make_exclusive_sum": _FACTORY.format("test_coop_warp.py"),
    "cuprims.coop.warp.make_merge_sort_keys": _FACTORY.format("test_coop_merge_sort.py"),
    "cuprims.coop.warp.make_merge_sort_pairs": _FACTORY.format("test_coop_pairs.py"),
    "cuprims.coop.warp.make_load": _FACTORY.format("test_coop_warp_load_store.py"),
    "cuprims.coop.warp.make_store": _FACTORY.format("test_coop_warp_load_store.py"),
    "cuprims.coop.warp.make_exchange": _FACTORY.format("test_coop_warp_load_store.py"),
    **{f"cuprims.coop.warp.make_shuffle_{mode}": _FACTORY.format("test_coop_shuffle.py")
       for mode in ("index", "up", "down", "xor")},
    **{f"cuprims.coop.{name}": _FRAGMENT for name in (
        "this_block", "this_warp", "ThreadData", "load", "store", "exchange", "sum", "reduce", "inclusive_sum",
        "exclusive_sum", "inclusive_scan", "exclusive_scan", "merge_sort_keys", "radix_sort_keys", "merge_sort_pairs",
        "radix_sort_pairs", "flag_heads", "flag_tails", "flag_heads_and_tails", "subtract_left", "subtract_right",
        "histogram", "shuffle", "run_length_decode", "shuffle_index", "shuffle_up", "shuffle_down", "shuffle_xor")},
}


def test_the_tables_name_every_example_once():
    assert len(EXAMPLES) >= 100, sorted(EXAMPLES)     # an empty collection must not pass as "nothing failed"
    assert not set(ON_CPU) & set(GPU_ONLY), sorted(set(ON_CPU) & set(GPU_ONLY))
    assert sorted(set(ON_CPU) | set(GPU_ONLY)) == sorted(EXAMPLES)
    assert set(ON_CPU.values()) <= {"run", "build", "coop"}
    assert all(reason for reason in GPU_ONLY.values())


def test_every_example_is_python():
    """Each literal block of a public docstring is code (a block of anything else would need
    a reason to be one), and none is a ``>>>`` session."""
    bad = [i for i, e in EXAMPLES.items() if not docstring_examples.is_python(e.code) or ">>>" in e.code]
    assert not bad, bad


# --------------------------------------------------------------- ahead of time

class Placeholder(cuprims.ProxyArray):
    """A CuPy array's stand-in: a ``ProxyArray`` of its dtype that also has its shape (for
    ``x.size``, slices and ``cp.empty_like(x)``), from the host array it would hold."""

    def __init__(self, host: np.ndarray):
        super().__init__(host.dtype, max(host.ndim, 1))
        self.host = host

    @property
    def size(self) -> int:
        return self.host.size

    @property
    def shape(self) -> tuple[int, ...]:
        return self.host.shape

    def __len__(self) -> int:
        return len(self.host)

    def __getitem__(self, key: Any) -> "Placeholder":
        return Placeholder(np.asarray(self.host[key]))


class PlaceholderCupy:
    """``cupy`` for an example built ahead of time: its array functions (``arange``,
    ``empty``, ``asarray``...) make placeholders, of numpy's result for the same arguments."""

    def __getattr__(self, name: str) -> Any:
        make = getattr(np, name)

        def placeholder(*args: Any, **kwargs: Any) -> Placeholder:
            args = tuple(a.host if isinstance(a, Placeholder) else a for a in args)
            return Placeholder(np.asarray(make(*args, **kwargs)))

        return placeholder


_MAKERS = {name for name in cuprims.__all__ if name.startswith("make_")}
_ONE_SHOTS = {name.removeprefix("make_"): name for name in _MAKERS if name.removeprefix("make_") in cuprims.__all__}


class AheadOfTimeCuprims:
    """``cuprims`` for an example built ahead of time: a ``make_*`` call without a target
    builds for ``compute_capability=90``, and a one-shot call builds its ``make_*`` (the
    call's build arguments, defaults included) and runs nothing. ``built`` holds the objects."""

    def __init__(self) -> None:
        self.built: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(cuprims, name)
        if name in _MAKERS:
            return self._maker(name)
        if name in _ONE_SHOTS:
            return self._one_shot(name)
        return value

    def _maker(self, name: str) -> Any:
        make = getattr(cuprims, name)

        def build(**kwargs: Any) -> Any:
            kwargs.setdefault("compute_capability", ARCH)
            obj = make(**kwargs)
            self.built.append(obj)
            return obj

        return build

    def _one_shot(self, name: str) -> Any:
        call, make = getattr(cuprims, name), _ONE_SHOTS[name]
        takes = inspect.signature(getattr(cuprims, make)).parameters

        def build_instead(**kwargs: Any) -> Any:
            bound = inspect.signature(call).bind(**kwargs)
            bound.apply_defaults()
            args = {}
            for key, value in bound.arguments.items():
                key = key if key in takes else f"h_{key}"   # histogram_even's levels are make's h_ ones
                if key in takes:
                    args[key] = value
            return self._maker(make)(**args)

        return build_instead


def _stops_after_last_build(code: str) -> ast.Module:
    """``code`` up to its last top-level statement that builds (calls a ``make_*`` or a
    one-shot function)."""
    names = _MAKERS | set(_ONE_SHOTS)
    body = ast.parse(code).body

    def builds(stmt: ast.stmt) -> bool:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call):
                fn = node.func
                if (fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)) in names:
                    return True
        return False

    last = max((i for i, stmt in enumerate(body) if builds(stmt)), default=None)
    assert last is not None, "a 'build' example that builds nothing (make it 'run')"
    return ast.Module(body=body[:last + 1], type_ignores=[])


def _run(example_id: str) -> AheadOfTimeCuprims:
    example = EXAMPLES[example_id]
    mode = ON_CPU[example_id]
    code = docstring_examples.source(example)
    fake_cp, fake_cuprims = PlaceholderCupy(), AheadOfTimeCuprims()
    ns = docstring_examples.namespace(fake_cp, ARCH, code)
    ns["cuprims"] = fake_cuprims
    real_import = builtins.__import__

    def import_(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cupy":
            return fake_cp
        if name == "cuprims":
            return fake_cuprims
        return real_import(name, *args, **kwargs)

    ns["__builtins__"] = {**vars(builtins), "__import__": import_}
    tree = _stops_after_last_build(code) if mode == "build" else ast.parse(code)
    compiled = docstring_examples.compiled(tree, f"<{example_id}>", code)   # as its reader would run it
    if mode == "coop":
        with cuprims.coop.target((9, 0)):
            exec(compiled, ns)
    else:
        exec(compiled, ns)
    return fake_cuprims


@pytest.mark.parametrize("example_id", sorted(ON_CPU))
def test_example_runs_ahead_of_time(example_id, request, capsys):
    if example_id not in docstring_examples.OWN_CACHE:
        request.getfixturevalue("shared_cache")
    made = _run(example_id)
    if ON_CPU[example_id] == "build":
        assert made.built, "nothing was built"
        assert all(ARCH in obj.compute_capabilities for obj in made.built), made.built
