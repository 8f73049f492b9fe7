"""Diagnostic: where a cold reduction build spends its NVRTC time on this machine."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CODE = r"""
import sys, time
import numpy as np
from cuda.core import Program, ProgramOptions
from cuprims.algorithms.reduce.source import reduce_source
from cuprims._compile.nvrtc import _include_dirs
from cuprims.op import op_spec, OpKind
from cuprims._value_types import value_type
f4 = value_type(np.float32)
src = reduce_source(in_type=f4, accum=f4, op=op_spec(OpKind.PLUS), has_init=True,
                    deterministic_across_gpus=False, arch=90)
variant, pch = sys.argv[1], sys.argv[2]
kw = {}
if variant == "syntax":
    kw = dict(fdevice_syntax_only=True)
elif variant == "create_pch":
    kw = dict(create_pch=pch)
elif variant == "use_pch":
    kw = dict(use_pch=pch)
opts = ProgramOptions(arch="sm_90", relocatable_device_code=True, link_time_optimization=True, std="c++17",
                      include_path=_include_dirs(), **kw)
t = time.perf_counter()
text = src.text
if variant in ("create_pch", "use_pch"):
    text = text  # same unit: the PCH covers its leading includes
Program(text, "c++", opts).compile("ltoir", name_expressions=list(src.name_expressions))
print(f"{variant:12s} {time.perf_counter() - t:.3f} s")
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        pch = os.path.join(d, "cub.pch")
        for variant in ["full", "full", "syntax", "create_pch", "use_pch", "use_pch"]:
            r = subprocess.run([sys.executable, "-c", CODE, variant, pch], capture_output=True, text=True)
            print((r.stdout or r.stderr[-800:]).strip())


if __name__ == "__main__":
    main()
