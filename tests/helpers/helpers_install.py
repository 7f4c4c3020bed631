"""Which seglog the tests run: the one pip installed.

.ci/run installs the wheel it built into a fresh virtual environment and runs the suite from the checkout,
where src/ and spark_connector/ hold the same packages, uncompiled or unpackaged. A PYTHONPATH or a pytest
`pythonpath` naming them would make the tests, or the processes they start (`python -m seglog`, `seglog
serve`, Spark's Python workers), import those instead and test code that was never packaged. With an
editable install the source tree is the install, on purpose, and there is nothing to check."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import site
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path

DISTRIBUTION = "seglog"
PACKAGES = ("seglog", "pyspark_seglog")  # the distribution's top-level packages
# Where a new interpreter would import each package from, without importing it (pyspark_seglog imports Spark)
FIND_PACKAGES = ("import importlib.util, json, sys; "
                 "print(json.dumps({name: importlib.util.find_spec(name).origin for name in sys.argv[1:]}))")
TIMEOUT_S = 60


def installed_files() -> dict[str, Path] | None:
    """Each package's __init__.py where pip installed it; None when the install holds no copy of the packages
    (an editable install: the source tree is the install)."""
    # Where pip installs, not sys.path: the checkout's seglog.egg-info (which building the sdist leaves) is on
    # sys.path as the working directory, and lists the source tree's files
    places = list(dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib"),
                                 site.getusersitepackages()]))
    distribution = next(iter(importlib.metadata.distributions(name=DISTRIBUTION, path=places)), None)
    if distribution is None:
        raise AssertionError(f"seglog is not installed for {sys.executable}: the tests run against an installed "
                             f"seglog (pip install '.[test]', or .ci/run)")
    recorded = {str(path) for path in distribution.files or ()}
    if not all(f"{name}/__init__.py" in recorded for name in PACKAGES):
        return None
    return {name: Path(distribution.locate_file(f"{name}/__init__.py")).resolve() for name in PACKAGES}


def files_found(environment: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Each package's __init__.py as a new interpreter with `environment` (None: this process's) finds it, in
    this process's working directory, as the tests' subprocesses do."""
    result = subprocess.run([sys.executable, "-c", FIND_PACKAGES, *PACKAGES], env=environment, capture_output=True,
                            text=True, timeout=TIMEOUT_S)
    if result.returncode != 0:
        raise AssertionError(f"a new interpreter could not find {', '.join(PACKAGES)}:\n{result.stderr}")
    return {name: Path(origin).resolve() for name, origin in json.loads(result.stdout).items()}


def files_here() -> dict[str, Path]:
    """Each package's __init__.py as this process imported it, or would."""
    files = {}
    for name in PACKAGES:
        module = sys.modules.get(name)
        files[name] = Path(module.__file__ if module else importlib.util.find_spec(name).origin).resolve()
    return files


def check_imported_from_the_install(environment: Mapping[str, str] | None = None) -> None:
    """Fail, naming each package and where it came from, unless this process and a new interpreter with
    `environment` (None: this process's) both import the installed packages."""
    installed = installed_files()
    if installed is None:
        return
    found = {"the test process": files_here(), "a process the tests start": files_found(environment)}
    problems = [f"{where} imports {name} from {files[name].parent}, not from the installed package in "
                f"{installed[name].parent}: remove what puts the source tree on the path (PYTHONPATH?)"
                for where, files in found.items() for name in PACKAGES if files[name] != installed[name]]
    if problems:
        raise AssertionError("\n".join(problems))
