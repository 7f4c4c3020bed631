"""Builds seglog's native core: one Cython extension per kernel module, all linking the small C library
`_core/native.c` (CRC32C, murmur2, memory fences, page prefaulting), compiled once for all of them.

Cython translates the .pyx files when the extensions are built, not when this file is read: the other build
steps (the sdist, the metadata pip asks for first) then take seconds, and the sdist ships the .pyx sources,
not generated C. Translation and compilation each use every CPU this process may run on.

Switches (environment variables):
  SEGLOG_DEBUG=1      build without optimisation, with assertions and Cython's bounds checks
  SEGLOG_ANNOTATE=1   write Cython's HTML annotation next to each .pyx (to find Python calls on hot paths)
"""

import glob
import os
import platform
import tempfile

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext

DEBUG = os.environ.get("SEGLOG_DEBUG") == "1"
CORE = "src/seglog/_core"
KERNEL_MODULES = ["_format", "_writer", "_index", "_messages", "_accumulator", "_acks", "_mapping", "_arrow",
                  "_pulsar_wire", "_pulsar_send", "_compact"]


def compile_args() -> list[str]:
    args = ["-O0", "-g", "-UNDEBUG"] if DEBUG else ["-O3"]
    # The CRC32C hardware path is compiled per function with target attributes and chosen at run time,
    # so the wheel runs on CPUs without SSE4.2 or ARMv8 CRC; nothing here raises the baseline ISA.
    if platform.system() != "Windows":
        args += ["-std=c11", "-Wno-unused-function"]
    return args


# The AVX-512 CRC32C tier's code in the shape native.c uses it, to learn how this compiler takes 512-bit
# vectors in a function's target attribute: clang 18 to 21 want "evex512" named, other versions reject the name.
AVX512_FEATURES = "sse4.2,pclmul,avx2,avx512f,avx512vl,vpclmulqdq"
AVX512_PROBE = """
#include <immintrin.h>
__attribute__((target("%s"))) void probe(const void *in, void *out) {
    __m512i x = _mm512_loadu_si512(in);
    x = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, x, 0x00), _mm512_clmulepi64_epi128(x, x, 0x11), x, 0x96);
    _mm512_storeu_si512(out, x);
}
"""


def compiles(compiler, source: str) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe.c")
        with open(path, "w") as f:
            f.write(source)
        try:
            compiler.compile([path], output_dir=tmp, extra_postargs=["-Werror"])
        except Exception:  # CompileError, or the compiler missing an option
            return False
        return True


def avx512_macros(compiler) -> list[tuple[str, str]]:
    """SEGLOG_TARGET_EVEX512 where the target attribute needs "evex512", SEGLOG_NO_AVX512 where the
    compiler cannot build the tier at all (native.c then leaves it out)."""
    if platform.machine().lower() not in ("x86_64", "amd64") or compiler.compiler_type == "msvc":
        return []
    if compiles(compiler, AVX512_PROBE % AVX512_FEATURES):
        return []
    if compiles(compiler, AVX512_PROBE % (AVX512_FEATURES + ",evex512")):
        return [("SEGLOG_TARGET_EVEX512", "1")]
    return [("SEGLOG_NO_AVX512", "1")]


def usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):  # Linux: the CPUs this process may run on (a container's share)
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class BuildClib(build_clib):
    def build_libraries(self, libraries):
        for _, build_info in libraries:
            build_info["macros"] = build_info.get("macros", []) + avx512_macros(self.compiler)
        super().build_libraries(libraries)


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:  # `-j N` given to build_ext still wins
            self.parallel = usable_cpus()

    def build_extensions(self):
        translated = cythonize(
            self.extensions,
            nthreads=usable_cpus(),
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
        sources = {extension.name: extension.sources for extension in translated}
        for extension in self.extensions:  # the same objects: build_ext has set them up
            extension.sources = sources[extension.name]
        super().build_extensions()


# Compiled once into a static library (position-independent, as the extensions it goes into) that each
# extension links its own copy of, as when each compiled native.c itself.
NATIVE = ("seglog_native", {"sources": [f"{CORE}/native.c"], "include_dirs": [CORE], "cflags": compile_args(),
                            "obj_deps": {"": [f"{CORE}/native.h"]}})

# `depends`: a change to a header or a .pxd rebuilds the modules that use it, and the sdist ships them.
HEADERS = [f"{CORE}/native.h", *sorted(glob.glob(f"{CORE}/*.pxd"))]

extensions = [
    Extension(
        f"seglog._core.{name}",
        sources=[f"{CORE}/{name}.pyx"],
        depends=HEADERS,
        include_dirs=[CORE, np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=compile_args(),
    )
    for name in KERNEL_MODULES
]

setup(cmdclass={"build_clib": BuildClib, "build_ext": BuildExt}, libraries=[NATIVE], ext_modules=extensions)
