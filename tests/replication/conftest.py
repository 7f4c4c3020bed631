"""Fixtures of the replication tests: clusters of `seglog serve` processes (helpers_replication.py)."""

from __future__ import annotations

import pytest

from helpers_replication import start_clusters, stop_clusters


@pytest.fixture
def two(tmp_path):
    clusters = start_clusters(tmp_path, "east", "west")
    yield clusters
    stop_clusters(clusters)


@pytest.fixture
def three(tmp_path):
    clusters = start_clusters(tmp_path, "east", "west", "north")
    yield clusters
    stop_clusters(clusters)
