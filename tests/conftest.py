import pytest

import seglog
from helpers_install import check_imported_from_the_install


def pytest_configure(config: pytest.Config) -> None:
    """Stop before the first test unless the tests, and the processes they start, import the installed seglog
    (helpers_install.py): a wheel's tests must not quietly run the source tree."""
    try:
        check_imported_from_the_install()
    except AssertionError as problem:
        raise pytest.UsageError(f"the tests would not run the installed seglog:\n{problem}") from None


@pytest.fixture
def clock() -> seglog.ManualClock:
    return seglog.ManualClock()


@pytest.fixture
def log(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as opened:
        yield opened
