"""The type stubs of the Cython kernels (src/seglog/_core/*.pyi): they declare what each compiled module
defines, and mypy accepts them and the public API called as the README calls it (tests/typing)."""

import ast
import importlib
import importlib.machinery
import inspect
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import seglog._core

ROOT = Path(__file__).resolve().parent.parent
# The stubs beside the imported modules: in an installed wheel, this also checks that they ship in it.
CORE = Path(seglog._core.__file__).parent
KERNELS = sorted(path.name.split(".")[0] for path in CORE.iterdir()
                 if path.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)))
STUB_ONLY = {"_buffer"}  # types the stubs share; no module of that name exists at run time


def test_mypy_accepts_the_stubs_and_the_public_api():
    """Runs the [tool.mypy] check of pyproject.toml; without a cache, so nothing is written to the tree."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", os.devnull], cwd=ROOT,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"


def test_every_compiled_module_has_a_stub():
    assert KERNELS, f"no compiled modules found in {CORE}"
    assert {path.stem for path in CORE.glob("*.pyi")} == set(KERNELS) | STUB_ONLY


@pytest.mark.parametrize("name", KERNELS)
def test_stub_declares_what_the_module_defines(name):
    """The public names of the module and of each of its classes are the ones its stub declares, and the
    private names a stub declares (the hooks Producer overrides) exist."""
    module = importlib.import_module(f"seglog._core.{name}")
    stub = ast.parse((CORE / f"{name}.pyi").read_text(encoding="utf-8"))
    declared = _declared(stub.body)
    _same(f"{name}.pyi", _public(declared), _defined(module))
    for class_name, body in declared.items():
        if body is None:
            continue
        cls = getattr(module, class_name)
        members = _declared(body)
        _same(f"{name}.pyi, class {class_name}", _public(members), {n for n in vars(cls) if not n.startswith("_")})
        absent = {n for n in members if n.startswith("_") and not _dunder(n) and not hasattr(cls, n)}
        assert not absent, f"{name}.pyi, class {class_name}: declares {sorted(absent)}, which it does not have"


def _same(where: str, declared: set[str], defined: set[str]) -> None:
    assert declared == defined, (f"{where}: declares {sorted(declared - defined)} that do not exist, "
                                 f"misses {sorted(defined - declared)} that do")


def _defined(module: ModuleType) -> set[str]:
    """The module's public names that it defines: not modules, nor classes and functions it imported."""
    def own(value: object) -> bool:
        if inspect.ismodule(value):
            return False
        if inspect.isclass(value) or inspect.isroutine(value):
            return value.__module__ == module.__name__
        return True

    return {name for name, value in vars(module).items() if not name.startswith("_") and own(value)}


def _declared(body: list[ast.stmt]) -> dict[str, list[ast.stmt] | None]:
    """The names a stub's module or class body declares, each with its class body (None: not a class)."""
    names: dict[str, list[ast.stmt] | None] = {}
    for node in body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = node.body
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = None
        elif isinstance(node, ast.Assign):
            names.update((target.id, None) for target in node.targets if isinstance(target, ast.Name))
    return names


def _public(names: dict[str, list[ast.stmt] | None]) -> set[str]:
    return {name for name in names if not name.startswith("_")}


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")
