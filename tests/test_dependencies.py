"""seglog runs without Numba: it is not a dependency (bench/RESULTS.md, "Lookups, acks and the lifecycle pass":
the batch kernels did not earn a place, and stay in bench/ for the benchmarks only)."""

import subprocess
import sys

IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
sys.modules["numba"] = None  # any `import numba` now raises ImportError
import seglog
for module in pkgutil.walk_packages(seglog.__path__, "seglog."):
    if module.name != "seglog.__main__":
        importlib.import_module(module.name)
loaded = [name for name, module in sys.modules.items()
          if module is not None and name.split(".")[0] in ("numba", "llvmlite")]
assert not loaded, loaded
"""


def test_every_module_imports_without_numba():
    subprocess.run([sys.executable, "-c", IMPORT_EVERY_MODULE], check=True, capture_output=True, timeout=120)
