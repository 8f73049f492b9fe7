"""Algorithm objects rebuilt from a blob (:func:`cuprims.deserialize`): their builds come
from the blob and can grow no new one, so nothing is ever compiled for them."""

from __future__ import annotations

from typing import Any, Sequence

from cuprims._compile.source import Source
from cuprims.algorithms.common import Builds
from cuprims.errors import BlobError


def _archs(archs: Sequence[int]) -> str:
    return ", ".join(f"sm_{a}" for a in archs) or "none"


class FrozenBuilds(Builds):
    """The build results of one variant as a blob holds them, per architecture."""

    def __init__(self, results: dict[int, tuple[Any, tuple[str, ...]]]):
        super().__init__(self._no_source, ())
        for arch, (result, names) in results.items():
            self._by_arch[arch] = result
            # what loading needs of a source: the kernels' order (the text is not kept)
            self._sources[arch] = Source(text="", name_expressions=names, extern_symbols=(),
                                         meta_fields=tuple(result.meta))

    def _no_source(self, arch: int) -> Source:
        raise BlobError("no compiled code for this architecture", f"one of {_archs(self.archs)}", f"sm_{arch}")

    def build_for(self, archs: Sequence[int], objs: Sequence[Any]) -> None:
        missing = [a for a in archs if a not in self._by_arch]
        if missing:
            self._no_source(missing[0])

    def _build_missing(self, arch: int, device: int, objs: Sequence[Any] | None) -> None:
        raise BlobError("no compiled code for this device", f"a device of {_archs(self.archs)} (built ones)",
                        f"device {device}, sm_{arch}")


def frozen_object(cls: Any, desc: Any, results: dict[int, dict[int, Any]]) -> Any:
    """An object of algorithm class ``cls`` for ``desc`` whose builds are ``results``
    (variant -> arch -> (BuildResult, kernel name expressions))."""
    obj = cls.__new__(cls)
    obj._frozen = True
    obj._adopt(desc, {variant: FrozenBuilds(per_arch) for variant, per_arch in results.items()})
    return obj
