"""A Spark application on this machine, ready to read and write seglog topics."""

from __future__ import annotations

import os
import sys

from pyspark_seglog.source import SeglogDataSource


def local_spark(master: str = "local[2]", config: dict[str, str] | None = None):
    """A SparkSession (`master` 'local[N]', or 'local[N,F]' to try a failed task F times) whose Python
    workers run this interpreter, where seglog is installed, with format("seglog") registered.

    For trying the connector, tests and benchmarks. On a cluster, install seglog[spark] where the Python
    workers run and call spark.dataSource.register(SeglogDataSource)."""
    from pyspark.sql import SparkSession
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no warning about a loopback host name
    builder = (SparkSession.builder.master(master)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               # filters on timestamp, partition, offset and topic narrow what is read (docs/SPARK.md)
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(SeglogDataSource)
    return session
