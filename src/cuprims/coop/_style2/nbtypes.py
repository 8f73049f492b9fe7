"""The numba types of Style 2 (single-phase calls), and how numba sees our host objects.

* :class:`Stub` is what ``coop.load``, ``coop.this_block``... are on the host. Their
  calls never run: the front-end rewrite (:mod:`.rewrite`) replaces each call in a
  kernel before type inference. numba still types every global a kernel names, so a
  stub is typeable (:class:`StubType`); calling one that was not rewritten is a clear
  error instead of numba's "untyped global".
* :class:`Static` carries a compile-time value (a call's options, an element type) into
  the typed IR as an argument whose *type* holds the value (:class:`StaticType`).
* :class:`BlockGroupType` / :class:`WarpGroupType`: ``coop.this_block()`` and
  ``coop.this_warp()``; the block type carries the block shape, so everything the
  group is passed to (device functions included) specialises on it.
* :class:`ThreadDataType`: a thread's items (``coop.ThreadData(n)``), a 1-D C array
  whose type also carries ``n``, which CUB's templates need at compile time.

Example::

    # inside a kernel; the rewrite turns these into calls of typed intrinsics
    block = coop.this_block()          # BlockGroupType((128, 1, 1)) for a 128-thread launch
    items = coop.ThreadData(4)         # ThreadDataType(float32, 4), dtype from its load
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from numba import types
from numba.cuda.core.imputils import lower_constant
from numba.cuda.datamodel import models
from numba.cuda.descriptor import cuda_target
from numba.cuda.extending import register_model, typeof_impl

from cuprims.errors import CoopError


class Stub:
    """A Style 2 name (``coop.load``...): documented and bound like a Python function,
    callable only inside a ``@cuda.jit`` kernel."""

    def __init__(self, fn: Callable[..., Any]):
        functools.update_wrapper(self, fn)
        self.signature = inspect.signature(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise CoopError(f"coop.{self.__name__}() is a cooperative primitive: call it inside a @cuda.jit kernel")

    def __repr__(self) -> str:
        return f"<cuprims.coop.{self.__name__}>"


class StubType(types.Callable):
    """A stub's type. Its call is typed only when the front-end rewrite did not run for
    the kernel (its compilation began before the rewrite was registered)."""

    def __init__(self, name: str):
        self.stub_name = name
        super().__init__(name=f"coop.{name}")

    @property
    def key(self) -> Any:
        return self.stub_name

    def get_call_type(self, context: Any, args: Any, kws: Any) -> Any:
        raise not_rewritten(self.stub_name)

    def get_call_signatures(self) -> Any:
        return [], False

    def get_impl_key(self, sig: Any) -> Any:
        return self


class Static:
    """A compile-time value; ``key`` (hashable, stable while the value lives) names it."""

    def __init__(self, key: Any, value: Any):
        self.key, self.value = key, value


class StaticType(types.Dummy):
    def __init__(self, holder: Static):
        self.holder = holder     # the first holder of this key (types are interned by key)
        super().__init__(name=f"coop.static({holder.key!r})"[:400])

    @property
    def key(self) -> Any:
        return self.holder.key

    @property
    def value(self) -> Any:
        return self.holder.value


class BlockGroupType(types.Dummy):
    """``coop.this_block()``: the thread block, of shape ``dims`` (x, y, z)."""

    def __init__(self, dims: tuple[int, int, int]):
        self.dims = dims
        super().__init__(name="coop.block(%d, %d, %d)" % dims)

    @property
    def key(self) -> Any:
        return self.dims


class WarpGroupType(types.Dummy):
    """``coop.this_warp()``: the calling thread's warp (``threads`` lanes)."""

    def __init__(self, threads: int):
        self.threads = threads
        super().__init__(name=f"coop.warp({threads})")

    @property
    def key(self) -> Any:
        return self.threads


class ThreadDataType(types.Array):
    """A thread's ``count`` items of ``dtype``: a 1-D C array (every array operation
    works on it) whose type knows its length."""

    def __init__(self, dtype: Any, count: int):
        self.count = count
        super().__init__(dtype, 1, "C", name=f"coop.ThreadData({dtype} x {count})")

    @property
    def key(self) -> Any:
        return super().key + (self.count,)

    @property
    def mangling_args(self) -> Any:
        return "ThreadData", [self.dtype, self.count]


for _t in (StubType, StaticType, BlockGroupType, WarpGroupType):
    register_model(_t)(models.OpaqueModel)
# the same layout as numba's own arrays (the model class is looked up by exact type)
register_model(ThreadDataType)(type(cuda_target.target_context.data_model_manager.lookup(types.int32[::1])))


@typeof_impl.register(Stub)
def _typeof_stub(value: Stub, c: Any) -> StubType:
    return StubType(value.__name__)


@typeof_impl.register(Static)
def _typeof_static(value: Static, c: Any) -> StaticType:
    return StaticType(value)


@lower_constant(StubType)
@lower_constant(StaticType)
def _lower_opaque(context: Any, builder: Any, ty: Any, pyval: Any) -> Any:
    return context.get_constant_null(ty)


def not_rewritten(name: str) -> CoopError:
    return CoopError(
        f"coop.{name}() was typed without cuprims' numba-cuda extension: it registers itself when "
        "cuprims.coop is imported after numba.cuda, when a Style 2 name (coop.this_block, coop.load...) "
        "is first used on the host, or through the numba_cuda_extensions entry point of an installed "
        "cuprims; this compilation started before that: compile again, or import numba.cuda first")
