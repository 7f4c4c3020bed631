"""The structure of the code, checked as CI checks its behaviour: the layer contract of docs/ARCHITECTURE.md
(import-linter, TYPE_CHECKING imports included) and the code style (ruff), both configured in
pyproject.toml."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="run from an installed wheel: no source tree")
def test_every_layer_imports_only_the_layers_below_it():
    # the checkout's packages, not the copy a wheel installed (CI tests the installed wheel)
    source = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "spark_connector")])}
    result = run(sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                                       "sys.exit(lint_imports_command())", "--no-cache", env=source)
    assert result.returncode == 0, f"import-linter found broken contracts:\n{result.stdout}{result.stderr}"


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="run from an installed wheel: no source tree")
def test_the_code_keeps_the_style_ruff_checks():
    result = run(sys.executable, "-m", "ruff", "check", "src", "tests", "bench", "spark_connector")
    assert result.returncode == 0, f"ruff found problems:\n{result.stdout}{result.stderr}"


@pytest.mark.skipif(not (ROOT / "pyproject.toml").is_file(), reason="run from an installed wheel: no source tree")
@pytest.mark.parametrize("package", ["server", "admin"])
def test_the_layer_table_names_every_module_of_the_package(package):
    table = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    row = next(line for line in table.splitlines() if f"| `{package}/` |" in line)
    modules = sorted(p.name for p in (ROOT / "src" / "seglog" / package).glob("*.py") if p.name != "__init__.py")
    assert [m for m in modules if f"`{m}`" not in row] == [], f"docs/ARCHITECTURE.md's {package}/ row misses them"


def test_every_test_file_has_a_name_of_its_own():
    """tests/ has no packages, so pytest imports each test file by its base name: two files of one name (in two
    folders) fail the whole collection with 'import file mismatch'."""
    names = [path.name for path in (ROOT / "tests").rglob("test_*.py")]
    assert sorted({name for name in names if names.count(name) > 1}) == []
