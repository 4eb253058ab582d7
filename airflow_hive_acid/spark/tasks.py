"""The Python tasks of a job: row i of a ``spark.range`` is task i, and the tasks themselves
travel in the task function's closure. Only the indices cross into the JVM; a DataFrame built
from Python rows would ship them through the JVM's unpickler first, a third of a second of the
first job's start."""
from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession


def task_frame(spark: SparkSession, tasks: int, slices: int | None = None) -> DataFrame:
    """Rows 0..tasks-1 (column ``id``) in ``slices`` partitions (default: one task each)."""
    return spark.range(0, tasks, 1, max(1, slices or tasks))


def task_indices(batches: Iterable[pa.RecordBatch]) -> Iterator[int]:
    """The task indices a task function of :func:`task_frame` receives."""
    for b in batches:
        yield from b.column(0).to_pylist()
