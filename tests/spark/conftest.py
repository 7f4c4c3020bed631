"""One local SparkSession for all the Spark tests (a JVM takes seconds to start).

Spark's Python workers run this interpreter (PYSPARK_PYTHON), where seglog and pyspark_seglog are
installed. `local[2,4]` runs two tasks at once and tries a failed task up to four times, as a cluster
would, so retried tasks are tested too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

SPARK_CONNECTOR = Path(__file__).resolve().parents[2] / "spark_connector"


def spark_environment() -> dict[str, str]:
    """The environment a Spark driver needs here; PYTHONPATH names the connector's folder, so PySpark's
    discovery of pyspark_* modules sees it whatever kind of install the test run has."""
    path = os.pathsep.join(filter(None, [str(SPARK_CONNECTOR), os.environ.get("PYTHONPATH")]))
    return {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": path}


@pytest.fixture(scope="session")
def spark():
    os.environ.update(spark_environment())
    from pyspark_seglog.local import local_spark
    session = local_spark("local[2,4]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    yield session
    session.stop()
