"""The CLI tests' fixtures: a data directory under tmp_path and a CliRunner with a fixed environment."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner(env={"SEGLOG_DATA": None, "COLUMNS": "200", "NO_COLOR": "1"})

