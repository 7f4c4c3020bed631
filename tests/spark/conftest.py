"""One local SparkSession for all the Spark tests (a JVM takes seconds to start).

Spark's Python workers run this interpreter (PYSPARK_PYTHON), where seglog and pyspark_seglog are
installed. `local[2,4]` runs two tasks at once and tries a failed task up to four times, as a cluster
would, so retried tasks are tested too."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from helpers_install import check_imported_from_the_install

# The folder this interpreter imports pyspark_seglog from: site-packages for a wheel; spark_connector/ for an
# editable install, whose import hook PySpark's discovery of pyspark_* modules (a scan of sys.path) misses
CONNECTOR = Path(importlib.util.find_spec("pyspark_seglog").origin).parents[1]


def spark_environment() -> dict[str, str]:
    """The environment a Spark driver needs here; PYTHONPATH names the folder pyspark_seglog is installed in,
    so PySpark's discovery of pyspark_* modules sees it whatever kind of install the test run has."""
    path = os.pathsep.join(filter(None, [str(CONNECTOR), os.environ.get("PYTHONPATH")]))
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": path}


@pytest.fixture(scope="session")
def spark():
    os.environ.update(spark_environment())
    check_imported_from_the_install()  # as Spark's Python workers will, with that environment
    from pyspark_seglog.local import local_spark
    session = local_spark("local[2,4]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()


def secured_data(directory: Path, key_file: Path, messages: int) -> bytes:
    """A data directory for a server with token authentication: topic events (test_spark_read.make_topic with
    `messages`), which role reader may consume and role writer produce to; a new secret key in `key_file`. The key."""
    import seglog
    from seglog.server.auth import create_secret_key

    from .test_spark_read import make_topic
    make_topic(directory, messages=messages)
    with seglog.open(directory) as log:
        log.admin.namespaces.grant_permission("public/default", "reader", ["consume"])
        log.admin.namespaces.grant_permission("public/default", "writer", ["produce"])
    key = create_secret_key()
    key_file.write_bytes(key)
    return key
