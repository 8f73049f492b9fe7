"""Which ``sm_<arch>`` a build is for: ``compute_capability=`` as the caller wrote it
(``90``, ``(9, 0)``, ``"9.0"``, ``"sm_90"`` or a list of them), checked against what this
NVRTC builds for before any compiler runs, else the current device's."""

from __future__ import annotations

from typing import Any

from cuprims.errors import ArgumentError, NoDeviceError


def parse_compute_capability(cc: Any, argument: str = "compute_capability") -> list[int] | None:
    """None, 90, (9, 0), "9.0", "sm_90" or a list of those -> [90, ...]."""
    if cc is None:
        return None
    if isinstance(cc, list):
        if not cc:
            raise ArgumentError(argument, "a compute capability or a non-empty list of them", cc)
        out: list[int] = []
        for item in cc:
            for arch in parse_compute_capability(item, argument) or ():
                if arch not in out:
                    out.append(arch)
        return out
    try:
        if isinstance(cc, bool):
            raise ValueError
        if isinstance(cc, int):
            arch = cc
        elif isinstance(cc, tuple) and len(cc) == 2:
            arch = int(cc[0]) * 10 + int(cc[1])
        elif isinstance(cc, str):
            text = cc.strip().lower().removeprefix("sm_").removeprefix("compute_")
            if "." in text:
                major, minor = text.split(".")
                arch = int(major) * 10 + int(minor)
            else:
                arch = int(text)
        else:
            raise ValueError
    except (ValueError, TypeError):
        raise ArgumentError(argument, "an int like 90, a tuple (9, 0), a string '9.0' or a list of them",
                            cc) from None
    check_arch(arch, argument, cc)
    return [arch]


def check_arch(arch: int, argument: str = "compute_capability", given: Any = None) -> None:
    """Raise ArgumentError unless this NVRTC builds for ``sm_<arch>``, before any compiler
    runs: outside 5.0..20.0 here, against NVRTC's own list here or, while NVRTC is not
    loaded, before the first compile for it (``toolchain.check_arch_supported``)."""
    from cuprims._compile.toolchain import check_arch_supported

    shown = arch if given is None else given
    if not 50 <= arch <= 200:
        raise ArgumentError(argument, "a compute capability between 5.0 and 20.0", shown)
    check_arch_supported(arch, argument, shown)


def current_arch() -> int:
    """The current device's ``major * 10 + minor`` (NoDeviceError where there is none)."""
    from cuprims._runtime import driver

    device = driver.current_device()
    major, minor = driver.compute_capability(device)
    arch = major * 10 + minor
    check_arch(arch, "the current device", f"sm_{arch}")
    return arch


def targets(compute_capability: Any) -> list[int]:
    """The architectures ``compute_capability=`` names, else the current device's."""
    archs = parse_compute_capability(compute_capability)
    if archs is not None:
        return archs
    try:
        return [current_arch()]
    except NoDeviceError as exc:
        raise NoDeviceError(f"{exc}. To build without a GPU, pass compute_capability= (for example 90) "
                            "with ProxyArray/ProxyValue placeholders") from None
