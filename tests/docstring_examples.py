"""The literal examples of the public docstrings, collected for tests/cpu/project/test_docstring_examples.py
(ahead-of-time builds, no GPU) and tests/gpu/project/test_docstring_examples_gpu.py (every one, run).

An example is a literal block (the indented block after a paragraph ending in ``::``, as
``Example::``) in the docstring of a public module or of a public object: a name of a
public module's ``__all__`` (the algorithms and their objects, iterators, operators and
types, errors, settings, ``cuprims.typing``, and ``cuprims.coop``'s factories and
single-phase calls), and its methods. Its id is where a reader finds it: the public
name (``cuprims.make_reduce_into``, ``cuprims.coop.block.make_load``,
``cuprims.RadixSort.cubin``), with ``#2``, ``#3``... for a second, third block of one
docstring. An object reached under two names is collected once, under the first.

Collecting imports cuprims.coop's single-phase names, so numba-cuda (not CUDA).

An example may use names its docstring's text sets up (``x``, ``out``, a kernel's
``block`` and ``items``): :data:`SETUP` defines them, before the example, for both tests.
The CPU test stands placeholders (``ProxyArray``) in for CuPy's arrays; the GPU test runs
the code as written, and puts a kernel fragment into a kernel (its own table).
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import textwrap
from dataclasses import dataclass

_HOMES = ("reduce", "scan", "transform", "radix_sort", "merge_sort", "binary_search", "histogram", "segmented_reduce",
          "segmented_sort", "unique_by_key", "select", "three_way_partition")
PUBLIC_MODULES = (
    "cuprims", "cuprims.typing", "cuprims.op", "cuprims.struct", "cuprims.types", "cuprims.config", "cuprims.errors",
    "cuprims.enums", "cuprims.iterators", *(f"cuprims.algorithms.{home}.api" for home in _HOMES),
    "cuprims.coop", "cuprims.coop.block", "cuprims.coop.warp",
)


@dataclass(frozen=True)
class Example:
    """One literal block: its id, its code (dedented) and the object it documents."""

    id: str
    code: str
    intro: str          # the line that introduces it ("Example::")
    source: str         # the module that defines the documented object


def literal_blocks(doc: str) -> list[tuple[str, str]]:
    """(introducing line, dedented block) of each literal block of docstring ``doc``."""
    lines = inspect.cleandoc(doc).splitlines()
    found, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            i += 1
            continue
        indent = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        body = []
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
            body.append(lines[j])
            j += 1
        while body and not body[-1].strip():
            body.pop()
        if body:
            found.append((line.strip(), textwrap.dedent("\n".join(body)) + "\n"))
        i = j
    return found


def _members(cls: type) -> list[tuple[str, object]]:
    """The public methods and properties of a cuprims class (``__call__`` included), those
    it inherits from a cuprims base too, in the order ``dir`` gives."""
    found = []
    for name in dir(cls):
        if name.startswith("_") and name != "__call__":
            continue
        for base in cls.__mro__:
            if name in vars(base):
                member = vars(base)[name]
                break
        else:
            continue
        if not (base.__module__ or "").startswith("cuprims") or isinstance(member, enum.Enum):
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            found.append((name, member))
    return found


def _public_names(module: object) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_")
                 and getattr(v, "__module__", None) == module.__name__]
    return list(names)


def collect() -> list[Example]:
    """Every example of the public docstrings, in a fixed order (modules as listed, names
    as each module lists them)."""
    seen: set[int] = set()
    examples: list[Example] = []

    def add(path: str, obj: object, source: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, type):
            doc = vars(obj).get("__doc__")          # its own, not a base class's
        elif inspect.ismodule(obj) or inspect.isfunction(obj) or isinstance(obj, property):
            doc = obj.__doc__
        else:                                       # an instance: its own docstring only (settings has its class's)
            doc = getattr(obj, "__dict__", {}).get("__doc__")
        for k, (intro, code) in enumerate(literal_blocks(doc or "")):
            examples.append(Example(path if k == 0 else f"{path}#{k + 1}", code, intro, source))

    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        add(module_name, module, module_name)
        for name in _public_names(module):
            obj = getattr(module, name)
            if inspect.ismodule(obj) or not (getattr(obj, "__module__", None) or "").startswith("cuprims"):
                continue
            add(f"{module_name}.{name}", obj, obj.__module__)
            if isinstance(obj, type):
                for member_name, member in _members(obj):
                    add(f"{module_name}.{name}.{member_name}", member, obj.__module__)
    return examples


def is_python(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


# What an example takes from its surroundings, defined before it runs (``cp`` is CuPy on
# the GPU, placeholders on the CPU; ``ARCH`` the target: the device's, or 90).
_FLOATS = "import cupy as cp, numpy as np\nx = cp.arange(1000, dtype=np.float32); out = cp.empty(1, np.float32)\n"
SETUP: dict[str, str] = {
    "cuprims.OpKind": _FLOATS,
    "cuprims.op": _FLOATS,
    "cuprims.errors": _FLOATS + "y = cp.empty(1, np.float32)\n",
    "cuprims.RawOp": _FLOATS + """n = x.size
from cuda.core import Program, ProgramOptions
my_ltoir_bytes = bytes(Program(
    'extern "C" __device__ void my_add(const void* a, const void* b, void* r) '
    '{ *(float*)r = *(const float*)a + *(const float*)b; }', "c++",
    ProgramOptions(arch=f"sm_{ARCH}", std="c++17", relocatable_device_code=True, link_time_optimization=True),
).compile("ltoir").code)
""",
    "cuprims.struct#3": 'Pixel = cuprims.gpu_struct({"r": np.int32, "g": np.float32}, name="Pixel")\n',
    "cuprims.coop.target": """@cuda.jit
def kernel(x, out):
    total = coop.sum(coop.this_block(), x[cuda.threadIdx.x + 32 * cuda.threadIdx.y])
    if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0:
        out[0] = total
sig = numba.types.void(numba.float32[:], numba.float32[:])
""",
}

# Examples that delete the disk cache's entries: each runs with a cache directory of its own.
OWN_CACHE = frozenset({"cuprims.clear_all_caches"})


def uses_numba(code: str) -> bool:
    """Whether ``code`` names numba, numba.cuda or cuprims.coop (then the namespace has them)."""
    names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
    return bool(names & {"numba", "cuda", "coop"})


def namespace(cp: object, arch: int, code: str) -> dict[str, object]:
    """The globals an example runs in: what its docstring's module has at hand (numpy,
    cuprims; numba, ``cuda`` and ``coop`` where the code names them), ``cp`` and ``ARCH``."""
    import numpy

    import cuprims

    ns: dict[str, object] = {"__name__": "docstring_example", "np": numpy, "numpy": numpy, "cuprims": cuprims,
                             "cp": cp, "ARCH": arch}
    if uses_numba(code):
        import numba
        from numba import cuda

        from cuprims import coop

        ns.update(numba=numba, cuda=cuda, coop=coop)
    return ns


def source(example: Example) -> str:
    """The example with its setup before it."""
    return SETUP.get(example.id, "") + example.code


def compiled(code: str | ast.Module, filename: str, text: str) -> object:
    """``code`` compiled as from a file ``filename`` holding ``text``, which Python can then
    read back (``inspect.getsource``), as for a reader who saved the example to a file:
    cuprims rewrites an operator that captures device arrays from its source."""
    import linecache

    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    return compile(code, filename, "exec", dont_inherit=True)
