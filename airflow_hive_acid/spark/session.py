"""The SparkSession a job runs in, with settings that suit ACID jobs."""
from __future__ import annotations

from pyspark.sql import SparkSession

DEFAULTS = {
    # Reader and writer tasks exchange Arrow batches with the JVM (mapInArrow).
    "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
}


def get_session(app_name: str = "hive-acid", conf: dict[str, str] | None = None) -> SparkSession:
    """The active session (spark-submit made one, or a test did), or a new one with our defaults."""
    builder = SparkSession.builder.appName(app_name)
    for k, v in {**DEFAULTS, **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    for k, v in DEFAULTS.items():
        if k.startswith("spark.sql."):
            spark.conf.set(k, v)
    return spark
