"""The CUDA runtime side: the driver (``driver``, the namespace callers use, over ``libcuda``,
``device_queries`` (current device, pointer and stream devices, attributes), ``modules``,
``params`` (parameter packing), ``launch`` and ``pools``), device arrays (``arrays``),
devices and their per-device state (``devices``), streams (``streams``), and the proxies
that stand for arrays and values in ahead-of-time builds (``proxy``).

May import: ``cuprims.errors``, ``cuprims.config``, ``cuprims.enums``, ``cuprims._base``,
``cuprims._value_types``. Nothing here generates or compiles code.
"""
