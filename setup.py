"""Builds seglog's native core: one Cython extension per kernel module, all sharing the small C file
`_core/native.c` (CRC32C, murmur2, memory fences, page prefaulting).

Switches (environment variables):
  SEGLOG_DEBUG=1      build without optimisation, with assertions and Cython's bounds checks
  SEGLOG_ANNOTATE=1   write Cython's HTML annotation next to each .pyx (to find Python calls on hot paths)
"""

import os
import platform

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("SEGLOG_DEBUG") == "1"
CORE = "src/seglog/_core"
KERNEL_MODULES = ["_format", "_writer", "_index", "_messages", "_accumulator", "_acks"]


def compile_args() -> list[str]:
    args = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3"]
    # The CRC32C hardware path is compiled per function with target attributes and chosen at run time,
    # so the wheel runs on CPUs without SSE4.2 or ARMv8 CRC; nothing here raises the baseline ISA.
    if platform.system() != "Windows":
        args += ["-std=c11", "-Wno-unused-function"]
    return args


extensions = [
    Extension(
        f"seglog._core.{name}",
        sources=[f"{CORE}/{name}.pyx", f"{CORE}/native.c"],
        include_dirs=[CORE, np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args(),
    )
    for name in KERNEL_MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        language_level=3,
        annotate=os.environ.get("SEGLOG_ANNOTATE") == "1",
        compiler_directives={
            "boundscheck": DEBUG,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": DEBUG,
            "embedsignature": True,
        },
    )
)
