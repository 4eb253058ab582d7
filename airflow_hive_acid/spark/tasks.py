"""The Python tasks of a job. The tasks themselves travel in the task function's closure; only
their indices cross into the JVM.

Tasks whose results come back to the driver (they write files and report them) run as a plain
RDD job (:func:`run_tasks`): its first job starts in about 0.5 s, where a DataFrame's
(``mapInArrow``) takes 1.2 s of SQL planning and Arrow set-up. Tasks whose rows feed more
Spark (a scan, a join for Spark to finish) are the rows of a ``spark.range``
(:func:`task_frame`); a DataFrame built from Python rows would ship them through the JVM's
unpickler first, a third of a second of the first job's start.

A Python worker runs many tasks one after another, so every task that writes files hands the
memory it freed back to the OS when it ends (:func:`release_freed_memory`)."""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import pyarrow as pa
from pyspark import SparkContext, TaskContext
from pyspark.sql import DataFrame, SparkSession

T = TypeVar("T")


def run_tasks(sc: SparkContext, count: int, task: Callable[[int], Iterable[T]]) -> list[T]:
    """``task(i)`` for i in 0..count-1, each in its own Spark task (a retry calls it again with
    the same i); what they yield, collected on the driver in task order."""
    if count <= 0:
        return []

    def run(i: int) -> list[T]:
        try:
            return list(task(i))
        finally:
            release_freed_memory()

    return sc.parallelize(range(count), count).flatMap(run).collect()


def release_freed_memory() -> None:
    """Return to the OS the heap freed so far. glibc keeps what a finished task's ORC writers
    freed, and the next task in the same reused worker grows the heap past it, so a worker's peak
    would grow with the number of tasks it runs (two 10M-row load tasks in one process: 655 MiB
    peak, 514 MiB with this between them). It takes microseconds."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None                                      # not glibc: no such heap to trim


def task_context() -> TaskContext:
    """The running Spark task's context (``TaskContext.get()`` is None outside a task)."""
    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("no Spark task is running: this code runs only inside a Spark task")
    return ctx


def task_frame(spark: SparkSession, tasks: int, slices: int | None = None) -> DataFrame:
    """Rows 0..tasks-1 (column ``id``) in ``slices`` partitions (default: one task each)."""
    return spark.range(0, tasks, 1, max(1, slices or tasks))


def task_indices(batches: Iterable[pa.RecordBatch]) -> Iterator[int]:
    """The task indices a task function of :func:`task_frame` receives."""
    for b in batches:
        yield from b.column(0).to_pylist()
