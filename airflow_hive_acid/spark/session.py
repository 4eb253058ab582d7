"""The Spark a job runs in, with settings that suit ACID jobs."""
from __future__ import annotations

import sys
from collections.abc import Iterator

import pyarrow as pa
from py4j import protocol
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession
from pyspark.sql.types import NumpyArrayConverter, NumpyScalarConverter

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


class JobSpark:
    """The Spark of one job: its SparkContext from the start, its SQL session only once a step
    asks for it. Making the session takes about 0.6 s that a load, a bucket-by-bucket MERGE, a
    compaction or a clean never needs: their tasks run as RDD jobs (``tasks.run_tasks``)."""

    def __init__(self, app_name: str = "hive-acid", session: SparkSession | None = None):
        self.app_name = app_name
        self._session = session
        if session is not None:
            self.sc: SparkContext = session.sparkContext
        else:
            conf = SparkConf().setAppName(app_name)
            for k, v in DEFAULTS.items():
                conf.setIfMissing(k, v)
            self.sc = SparkContext.getOrCreate(conf)

    @property
    def session(self) -> SparkSession:
        """The SQL session, made on first use (on this job's SparkContext)."""
        if self._session is None:
            self._session = get_session(self.app_name)
        return self._session


class NumpyArrays(NumpyArrayConverter):
    """pyspark's converter of NumPy arrays, asking ``sys.modules`` whether NumPy is loaded."""

    def can_convert(self, obj: object) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.ndarray) and obj.ndim == 1


class NumpyScalars(NumpyScalarConverter):
    """pyspark's converter of NumPy scalars, asking ``sys.modules`` whether NumPy is loaded."""

    def can_convert(self, obj: object) -> bool:
        np = sys.modules.get("numpy")
        return np is not None and isinstance(obj, np.generic)


def cheap_numpy_converters() -> None:
    """pyspark's py4j converters of NumPy values ask, on the driver's first Java call with
    arguments, whether NumPy is installed by importing ``pyspark.testing.utils``, which imports
    pandas and protobuf modules: 0.4 s of a job's start. The same converters, asking
    ``sys.modules`` instead (a NumPy value means NumPy is imported), take their place."""
    cheap = {NumpyArrayConverter: NumpyArrays, NumpyScalarConverter: NumpyScalars}
    protocol.INPUT_CONVERTER[:] = [cheap[type(c)]() if type(c) in cheap else c for c in protocol.INPUT_CONVERTER]


def dumps_class_archive(sc: SparkContext) -> bool:
    """Whether this driver JVM writes the class archive later jobs start from
    (``jobs.launcher.FastJvm``: ``-XX:ArchiveClassesAtExit``)."""
    return "-XX:ArchiveClassesAtExit=" in (sc.getConf().get("spark.driver.extraJavaOptions") or "")


def load_sql_classes(spark: JobSpark) -> None:
    """A small Spark SQL job touching what the SQL-using jobs do (a Parquet read, Arrow
    exchange with Python, an SQL expression, a broadcast join, a shuffle), so that the class
    archive a load or a compaction dumps also serves reads, UPDATE and DELETE. The archive
    holds only the classes its driver loaded; without this, a job that never made the SQL
    session would leave them out and every later SQL job would load them from the jars (1.5-3 s)."""
    import tempfile

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    def same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    session = spark.session
    with tempfile.TemporaryDirectory(prefix="hive-acid-warm-") as tmp:
        pq.write_table(pa.table({"id": pa.array(range(4), pa.int64()), "v": ["a", "b", "c", "d"]}), f"{tmp}/w.parquet")
        source = session.read.parquet(f"{tmp}/w.parquet")
        rows = session.range(0, 4, 1, 2).mapInArrow(same, "id long").filter(F.expr("id >= 0 AND id % 1 = 0"))
        joined = rows.join(F.broadcast(source), "id", "left").repartition(2, "id")
        joined.mapInArrow(same, joined.schema).toArrow()
