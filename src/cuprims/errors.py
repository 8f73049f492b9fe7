"""Exceptions raised by cuprims. Every one derives from :class:`CuprimsError`.

Example::

    import cuprims
    try:
        cuprims.reduce_into(d_in=x, d_out=y, op="plus", num_items=-1)
    except cuprims.errors.CuprimsError as exc:
        print(exc)
"""

from __future__ import annotations


def _rebuilt(cls: type, args: tuple, state: dict) -> BaseException:
    """An exception of ``cls`` with ``args`` and attributes ``state``, made without calling
    its ``__init__`` (whose parameters differ from ``args``): what unpickling calls."""
    exc = cls.__new__(cls, *args)
    exc.__dict__.update(state)
    return exc


class CuprimsError(Exception):
    """Root of every exception cuprims raises on purpose.

    Every one pickles, message and attributes kept, so one raised in another process (a
    Dask worker) reaches the caller as the same exception; an attribute that does not
    pickle (an unpicklable argument value) travels as its description."""

    def __reduce__(self) -> tuple:
        import pickle

        state = {}
        for name, value in self.__dict__.items():
            try:
                pickle.dumps(value)
                state[name] = value
            except Exception:  # noqa: BLE001 (any object may refuse to pickle, in any way)
                state[name] = _describe(value)
        return (_rebuilt, (type(self), self.args, state))


class ArgumentError(CuprimsError, ValueError):
    """A bad argument. The message names the argument, what was expected and what came.

    It is also a :class:`ValueError`, so code written against other libraries that
    catches ``ValueError`` or ``TypeError`` keeps working.
    """

    def __init__(self, name: str, expected: str, given: object):
        self.argument = name
        self.expected = expected
        self.given = given
        super().__init__(f"argument '{name}': expected {expected}, got {_describe(given)}")


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of the wrong kind (for example a host array where a device array is needed)."""


class DeviceMismatchError(ArgumentError):
    """An array or stream argument that belongs to another device than the current one.

    Raised before anything is launched (a kernel on the wrong device would read another
    GPU's memory or fail). Checked only in a process that sees more than one CUDA device.
    ``argument`` names the argument, ``current_device`` and ``device`` are the ordinals of
    the current device and of the argument's, ``what`` is ``"array"`` or ``"stream"``.
    """

    def __init__(self, name: str, current_device: int, device: int, what: str = "array"):
        self.current_device = current_device
        self.device = device
        self.what = what
        super().__init__(name, f"{'an' if what[0] in 'aeiou' else 'a'} {what} on the current device "
                         f"{current_device}", f"{what} on device {device}")
        self.args = (f"argument '{name}': the {what} is on device {device} but the current device is "
                     f"{current_device}; make device {device} current for this call (for example "
                     f"`with cupy.cuda.Device({device}):`) or pass {what}s of device {current_device}",)


def _describe(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    text = repr(value)
    if len(text) > 120:
        text = text[:117] + "..."
    kind = type(value).__module__ + "." + type(value).__qualname__
    if text.startswith("<"):
        return text
    return f"{text} (a {kind})"


class CompileError(CuprimsError):
    """NVRTC rejected generated source, or the C++ of a :meth:`~cuprims.RawOp.from_cpp`
    operator. Carries NVRTC's log, the options and where the source was written
    (``source_path``)."""

    def __init__(self, message: str, *, log: str = "", source_path: str | None = None,
                 options: tuple[str, ...] = ()):
        self.log = log
        self.source_path = source_path
        self.options = tuple(options)
        parts = [message]
        if source_path:
            parts.append(f"source written to: {source_path}")
        if options:
            parts.append("options: " + " ".join(self.options))
        if log:
            parts.append("compiler log:\n" + log.rstrip())
        super().__init__("\n".join(parts))


class LinkError(CuprimsError):
    """nvJitLink failed to link the kernel with the operator code."""

    def __init__(self, message: str, *, log: str = "", source_path: str | None = None):
        self.log = log
        self.source_path = source_path
        parts = [message]
        if source_path:
            parts.append(f"generated source written to: {source_path}")
        if log:
            parts.append("linker log:\n" + log.rstrip())
        super().__init__("\n".join(parts))


class OperatorCompileError(CuprimsError):
    """numba-cuda could not type or compile the user's operator.

    ``argument`` names the argument the operator was given as (``cond``, ``op``, or for
    an operator inside an iterator the argument holding the iterator, e.g. ``d_in``), when
    known; ``context`` says where in that argument it sits (``"the transform_op of a
    TransformIterator"``), else is empty. ``op_name`` is the operator's readable name,
    ``signature`` the types it was compiled for."""

    def __init__(self, op_name: str, signature: str, cause: BaseException, *, argument: str | None = None,
                 context: str = ""):
        self.op_name = op_name
        self.signature = signature
        self.cause = cause
        self.argument = argument
        self.context = context
        super().__init__(
            f"{_argument_prefix(argument)}could not compile {_operator_label(op_name, context)} for {signature}: "
            f"{type(cause).__name__}: {str(cause).strip()}"
        )


class OperatorResultError(OperatorCompileError):
    """An operator whose result cannot be used as its argument's kind of result: a
    predicate, comparator or equality that returns no truth value (a string, None, a tuple,
    a complex number, a struct, or nothing because it always raises), or a combining or
    element-wise operator whose result type numpy's ``same_kind`` rule does not convert to
    the accumulator's or output's type (a float result for an integer accumulator).
    ``result`` is the type the operator returns (as numba or the translation types it),
    ``expected`` what the argument needs (the rules: :mod:`cuprims.op`)."""

    def __init__(self, op_name: str, signature: str, result: str, expected: str, *, argument: str | None = None,
                 context: str = ""):
        self.result = result
        self.expected = expected
        cause = TypeError(f"it returns {result}; expected {expected}")
        super().__init__(op_name, signature, cause, argument=argument, context=context)
        self.args = (f"{_argument_prefix(argument)}{_operator_label(op_name, context)} for {signature} returns "
                     f"{result}; expected {expected}",)


def _argument_prefix(argument: str | None) -> str:
    return f"argument '{argument}': " if argument else ""


def _operator_label(op_name: str, context: str) -> str:
    """``operator 'f'``, with where it sits (``(the transform_op of a TransformIterator)``)."""
    return f"operator '{op_name}'" + (f" ({context})" if context else "")


class NoDeviceError(CuprimsError, RuntimeError):
    """A GPU was needed (to run, or to learn the compute capability) and none is usable."""


class CudaError(CuprimsError, RuntimeError):
    """A CUDA driver call failed."""

    def __init__(self, call: str, code: object, detail: str = ""):
        self.call = call
        self.code = code
        msg = f"{call} failed: {code}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class BlobError(CuprimsError, ValueError):
    """A serialized object that cannot be loaded (see :func:`cuprims.deserialize`): not a
    blob, damaged or truncated, of another format version, made by another cuprims build,
    with a header field that does not fit (``problem`` names it: ``field builds[0].cubin``),
    or built for other architectures than the device's. ``expected`` and ``found`` say
    what was expected and what the blob (or the device) holds."""

    def __init__(self, problem: str, expected: object, found: object):
        self.problem = problem
        self.expected = expected
        self.found = found
        super().__init__(f"cannot load this serialized object: {problem}: expected {expected}, found {found}")


class CacheError(CuprimsError):
    """The on-disk cache could not be used (reported only when it cannot be worked around)."""


class CoopError(CuprimsError, TypeError):
    """A cooperative primitive used where it cannot work: called on the host, a kernel
    compiled with no known block shape, a ``ThreadData`` whose element type cannot be
    inferred, an option that is not a compile-time constant. The message says what to do."""


__all__ = [
    "CuprimsError", "ArgumentError", "ArgumentTypeError", "DeviceMismatchError", "CompileError", "LinkError",
    "OperatorCompileError", "OperatorResultError", "NoDeviceError", "CudaError", "BlobError", "CacheError", "CoopError",
]


def __dir__() -> list[str]:
    """The public names only (the module's own imports and helpers are not for users)."""
    return sorted(__all__)
