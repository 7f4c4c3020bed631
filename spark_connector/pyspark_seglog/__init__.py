"""seglog topics as Spark batch and streaming sources and sinks, through PySpark's Python Data Source API.

    from pyspark_seglog import SeglogDataSource
    spark.dataSource.register(SeglogDataSource)
    spark.read.format("seglog").option("path", DIR).option("topic", NAME).load()

PySpark also finds this module by itself (a top-level `pyspark_*` module defining `DefaultSource`), at the
first `spark.read.format(...)` of a session whose Python workers can import it. Options follow Spark's
Kafka source (options.py); the rows are Arrow batches over the segments' memory (arrow_rows.py)."""

from pyspark_seglog.source import SeglogDataSource

DefaultSource = SeglogDataSource

__all__ = ["DefaultSource", "SeglogDataSource"]
