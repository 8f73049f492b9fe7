"""``coop.this_block()`` and ``coop.this_warp()``: the groups Style 2 calls take first.

The block shape is never written by the user. The front-end rewrite (:mod:`.rewrite`)
replaces ``this_block()`` with ``_block_group(x, y, z)`` (literal ints), the shape found
by :func:`block_shape`:

* a compilation triggered by a launch (``kernel[grid, block](...)``): numba-cuda's
  ``current_launch_config().blockdim``; the kernel is then marked launch-config
  sensitive, so a launch with another configuration compiles it again (numba-cuda keys
  such kernels on grid, block and dynamic shared memory sizes);
* otherwise (``cuda.compile*``, an eager signature, the CPU tests): the shape of the
  enclosing ``coop.target(block=...)``;
* neither: :class:`~cuprims.errors.CoopError` saying so.

Under a launch only the kernel itself may call ``this_block()``: numba compiles a device
function once per argument types, so a device function that read the launch's shape
would keep the first one. Device functions take the group as an argument instead (its
type carries the shape, so they specialise on it).

Example::

    @cuda.jit
    def kernel(x, out):
        block = coop.this_block()
        total = coop.sum(block, x[cuda.threadIdx.x])
        if cuda.threadIdx.x == 0:
            out[0] = total

    kernel[1, 128](x, out)     # compiled for a block of 128 threads
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.cuda.extending import intrinsic

from cuprims.coop._spec import block_dims
from cuprims.coop._style2.nbtypes import BlockGroupType, Stub, WarpGroupType
from cuprims.coop._target import current_block
from cuprims.errors import CoopError

WARP_THREADS = 32


@Stub
def this_block():
    """The calling thread's block, as the first argument of block-wide calls
    (``coop.load(block, ...)``); its shape is the launch's (see :mod:`cuprims.coop._style2.groups`).

    Example::

        block = coop.this_block()
        coop.load(block, x[cuda.blockIdx.x * 512:], items)
    """


@Stub
def this_warp(threads=32):
    """The calling thread's logical warp of ``threads`` lanes (32: its hardware warp), as
    the first argument of warp-wide calls (``sum``, ``reduce``, the scans of one value per
    lane, ``merge_sort_keys``, ``merge_sort_pairs``, ``load`` and ``store`` of the warp's
    own tile): ``coop.sum(coop.this_warp(), value)`` is valid in the warp's first lane.
    ``threads`` is fixed when the kernel compiles; reductions and scans take any size from
    1 to 32, laid out as :mod:`cuprims.coop.warp` says, the other calls a power of two.

    Example::

        warp = coop.this_warp()
        s = coop.sum(warp, x[cuda.grid(1)])
        eighth = coop.sum(coop.this_warp(4), x[cuda.grid(1)])     # lanes 0-3, 4-7...
    """


@intrinsic
def _block_group(typingctx: Any, x: Any, y: Any, z: Any) -> Any:
    if not all(isinstance(d, types.IntegerLiteral) for d in (x, y, z)):
        return None
    group = BlockGroupType((x.literal_value, y.literal_value, z.literal_value))

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return context.get_constant_null(sig.return_type)

    return group(x, y, z), codegen


@intrinsic
def _warp_group(typingctx: Any, threads: Any) -> Any:
    if not isinstance(threads, types.IntegerLiteral):
        return None
    group = WarpGroupType(threads.literal_value)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return context.get_constant_null(sig.return_type)

    return group(threads), codegen


def block_shape(state: Any, where: str) -> tuple[int, int, int]:
    """The block shape the function ``state`` compiles is launched with (see the module)."""
    from numba.cuda import launchconfig

    config = launchconfig.current_launch_config()
    if config is not None:
        dispatcher = config.dispatcher
        if state.func_id.func is not getattr(dispatcher, "py_func", None):
            raise CoopError(
                f"coop.this_block() at {where} is in a device function compiled for a launch of kernel "
                f"{getattr(dispatcher, '__name__', dispatcher)!r}: numba compiles device functions once per "
                "argument types, so the block shape must come in an argument: call coop.this_block() in the "
                "kernel and pass the group to the device function")
        dispatcher.mark_launch_config_sensitive()   # another block shape compiles the kernel again
        return block_dims(tuple(config.blockdim), "the launch's block shape")
    dims = current_block()
    if dims is None:
        raise CoopError(
            f"coop.this_block() at {where}: no block shape. A kernel launched as kernel[grid, block](...) "
            "is compiled for its launch's block shape; a kernel compiled without a launch (cuda.compile*, "
            "an eager signature) needs `with cuprims.coop.target(block=(x, y, z)):` around its compilation")
    return dims
