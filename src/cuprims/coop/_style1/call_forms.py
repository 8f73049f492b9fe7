"""How a kernel may call a Style 1 primitive: the established interface's forms beside ours.

A record's device function (``prim``) takes the thread's operands first and the caller's
storage as a trailing ``temp_storage=`` keyword. Kernels written for the established
two-phase interface pass the storage *first*, positionally, and an exchange's single
array in place::

    block_load(temp_storage, src, items)        # ours: block_load(src, items, temp_storage=...)
    block_exchange(temp_storage, items)         # ours: block_exchange(items, items, temp_storage=...)

:func:`front_type` gives what numba types the primitive's global as: an overload that
reads each call's argument types and picks the form, then calls ``prim`` with its
operands in order. A uint8 1-D array in front of operands that fill ``prim``'s parameters
is the storage; a storage of another dtype or rank is refused at typing time, naming it.
Only when both readings type (a ``uint8`` primitive whose operands are all arrays, such as
``exchange(a, b)``) the choice waits for the run: the first array is the storage when it
lies in shared memory and the second does not.

Example::

    load = coop.block.make_load(numba.int32, 128, 4)
    temp = cuda.shared.array(load.temp_storage_bytes, numba.uint8)
    load(temp, x, items)            # in the kernel: the same call as load(x, items, temp_storage=temp)
"""

from __future__ import annotations

import inspect
from typing import Any

# what each of prim's parameters takes: an array of the element type T, of the second type
# V (a sort's values, a discontinuity's flags), any array, or a value (a scalar or a struct)
T_ARRAYS = frozenset({"src", "dst", "items", "items_in", "items_out", "keys", "run_values", "decoded_items"})
V_ARRAYS = frozenset({"values", "head_flags", "tail_flags", "histogram", "run_lengths", "relative_offsets"})
ANY_ARRAYS = frozenset({"prefix_state"})
VALUE_PARAMS = frozenset({"item", "num_valid", "begin_bit", "end_bit", "oob_default", "tile_predecessor_item",
                          "tile_successor_item", "src_lane", "delta", "lane_mask", "distance", "window_offset"})


def _fits(params: tuple[str, ...], argtypes: list[Any], element: Any, value: Any) -> bool:
    """The positional ``argtypes`` may be ``params``' operands: arrays of the element type
    where a thread's items or a tile go, a value where a value goes."""
    from numba import types

    if len(argtypes) > len(params):
        return False
    for name, t in zip(params, argtypes):
        is_array = isinstance(t, types.Array)
        if name in T_ARRAYS and not (is_array and t.dtype == element):
            return False
        if name in V_ARRAYS and not (is_array and t.dtype == value):
            return False
        if name in ANY_ARRAYS and not is_array:
            return False
        if name in VALUE_PARAMS and is_array:
            return False
    return True


def _is_storage(t: Any) -> bool:
    from numba import types

    return isinstance(t, types.Array) and t.ndim == 1 and t.dtype == types.uint8


class _Forms:
    """The call forms of one ``prim``: its parameters, and the implementations made so far."""

    def __init__(self, name: str, prim: Any, py_func: Any):
        sig = inspect.signature(py_func)
        self.name = name
        self.prim = prim
        self.params = tuple(p for p in sig.parameters if p != "temp_storage")
        self.element, self.value = py_func.__globals__["T"], py_func.__globals__.get("V")
        self.required = sum(1 for p in sig.parameters.values() if p.default is inspect.Parameter.empty)
        # one slot more than a call may fill (the storage and every operand): a call that
        # fills it is refused here, instead of its last argument binding to a keyword
        self.slots = tuple(f"arg{i}" for i in range(len(self.params) + 2))
        # an exchange or scan given one thread array uses it as input and output
        self.in_place = self.params[:2] == ("items_in", "items_out") and "prefix_state" not in self.params
        self.header = ", ".join(f"{n}=None" for n in self.slots + self.params + ("temp_storage",))
        self._impls: dict[tuple, Any] = {}

    def choose(self, bound: dict[str, Any]) -> Any:
        """The implementation for the call whose argument types are ``bound`` (None: left out)."""
        from numba import types
        from numba.core.errors import TypingError

        # typing passes a left-out argument as its default (None), numba's inliner as Omitted
        bound = {k: None if isinstance(v, types.Omitted) else v for k, v in bound.items()}
        given = [bound[s] for s in self.slots if bound[s] is not None]
        keywords = tuple(p for p in self.params if bound[p] is not None)
        if len(given) == len(self.slots):
            raise TypingError(f"coop {self.name} takes at most {len(self.slots) - 1} arguments (temp_storage, "
                              f"{', '.join(self.params)}), got {len(given)}")
        if bound["temp_storage"] is not None and bound["temp_storage"] != types.none:
            return self._impl("plain", len(given), keywords + ("temp_storage",))
        if not given:
            return self._impl("plain", len(given), keywords)

        def fits(argtypes: list[Any]) -> bool:
            return _fits(self.params, argtypes, self.element, self.value)

        plain = fits(given)
        # the storage and, after it, every operand prim requires (some may come as keywords)
        required = [p for p in self.params[:self.required] if p not in keywords]
        if self.in_place:
            required = required[:1]
        storage_first = len(given) >= 2 and len(given) - 1 >= len(required) and fits(given[1:])
        if storage_first and _is_storage(given[0]):
            return self._impl("either" if plain else "storage", len(given), keywords)
        if storage_first and not plain:
            raise TypingError(f"coop {self.name}: its first argument, the caller's temp_storage, must be a 1-D "
                              f"uint8 array (cuda.shared.array(prim.temp_storage_bytes, numba.uint8)), got "
                              f"{given[0]}")
        return self._impl("plain", len(given), keywords)

    def _call(self, operands: list[str], keywords: tuple[str, ...], storage: str | None) -> str:
        if self.in_place and len(operands) == 1 and "items_out" not in keywords:
            operands = operands * 2
        args = operands + [f"{k}={k}" for k in keywords] + ([f"temp_storage={storage}"] if storage else [])
        return f"__prim({', '.join(args)})"

    def _impl(self, form: str, count: int, keywords: tuple[str, ...]) -> Any:
        key = (form, count, keywords)
        impl = self._impls.get(key)
        if impl is not None:
            return impl
        slots = list(self.slots[:count])
        plain = self._call(slots, keywords, None)
        if form == "plain":
            body = f"    return {plain}\n"
        else:
            storage_first = self._call(slots[1:], keywords, slots[0])
            body = f"    return {storage_first}\n"
            if form == "either":
                body = (f"    if __storage_first({slots[0]}, {slots[1]}):\n    {body}"
                        f"    return {plain}\n")
        from cuprims.coop._style1.intrinsics import storage_first

        namespace: dict[str, Any] = {"__prim": self.prim, "__storage_first": storage_first()}
        exec(compile(f"def impl({self.header}):\n{body}", f"<cuprims coop {self.name} call>", "exec"), namespace)
        impl = self._impls[key] = namespace["impl"]
        return impl


def front_type(name: str, prim: Any, inline: bool) -> Any:
    """The numba type a kernel sees for the primitive ``name`` whose device function is
    ``prim`` (a numba-cuda dispatcher): its calls take every form above. ``inline``: the
    call is inlined in numba's IR (a record result lives in the caller's frame)."""
    from numba.cuda.descriptor import cuda_target
    from numba.cuda.extending import overload

    forms = _Forms(name, prim, prim.py_func)
    namespace: dict[str, Any] = {"__forms": forms}
    names = forms.slots + forms.params + ("temp_storage",)
    text = (f"def front({forms.header}):\n    pass\n"
            f"def typer({forms.header}):\n    return __forms.choose(dict({', '.join(f'{n}={n}' for n in names)}))\n")
    exec(compile(text, f"<cuprims coop {name} forms>", "exec"), namespace)
    overload(namespace["front"], target="cuda", inline="always" if inline else "never")(namespace["typer"])
    context = cuda_target.typing_context
    context.refresh()
    return context.resolve_value_type(namespace["front"])


def add_method(front: Any, name: str, method: Any, inline: bool) -> None:
    """Let a kernel call ``prim.<name>(...)`` on the primitive typed ``front``: the call goes
    to the primitive ``method`` (a Primitive, typed by its own call forms) with the
    arguments as given."""
    from numba.core import types
    from numba.cuda.extending import overload_method

    slots = tuple(f"arg{i}" for i in range(8))
    header = ", ".join(f"{n}=None" for n in slots + ("temp_storage",))
    impls: dict[tuple[int, bool], Any] = {}

    def given(t: Any) -> bool:
        return t is not None and not isinstance(t, types.Omitted)

    def choose(bound: dict[str, Any]) -> Any:
        count = sum(1 for n in slots if given(bound[n]))
        storage = given(bound["temp_storage"]) and bound["temp_storage"] != types.none
        impl = impls.get((count, storage))
        if impl is None:
            args = list(slots[:count]) + (["temp_storage=temp_storage"] if storage else [])
            namespace: dict[str, Any] = {"__method": method}
            exec(compile(f"def impl(self, {header}):\n    return __method({', '.join(args)})\n",
                         f"<cuprims coop {method.name} method>", "exec"), namespace)
            impl = impls[(count, storage)] = namespace["impl"]
        return impl

    namespace: dict[str, Any] = {"__choose": choose}
    names = slots + ("temp_storage",)
    exec(compile(f"def typer(self, {header}):\n    return __choose(dict({', '.join(f'{n}={n}' for n in names)}))\n",
                 f"<cuprims coop {method.name} method forms>", "exec"), namespace)
    overload_method(front, name, target="cuda", inline="always" if inline else "never")(namespace["typer"])
