import pytest

import seglog


@pytest.fixture
def clock() -> seglog.ManualClock:
    return seglog.ManualClock()


@pytest.fixture
def log(tmp_path, clock):
    with seglog.open(tmp_path / "data", clock=clock) as opened:
        yield opened
