"""INSERT of Parquet or ORC files without Spark's readers: each task reads its share of the row
groups (stripes) with pyarrow, conforms the rows to the table, and writes them as its own
statement's delta files (:class:`~.write.TaskFiles`, PER_TASK placement) in the same pass.
The rows never cross into the JVM and are never shuffled.

The driver plans the splits and checks the source schema against the table the way
``dml.conform_source`` does for a DataFrame (same names, same assignability); other sources
(CSV, JSON, another table, directories Spark would discover partitions in, reader options)
take the DataFrame path.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pyarrow.parquet as pq
from pyspark import SparkContext

from ..acid import fs as afs
from ..acid.bucket_codec import MAX_BUCKET_ID
from ..jobs.manifest import PartitionStats
from ..jobs.spec import SourceSpec
from .dml import DmlError, check_source_files, source_columns
from .scan import Table
from .tasks import run_tasks
from .write import (
    Placement,
    Stage,
    Statement,
    TaskFiles,
    _no_stage,
    publish,
    written_rows,
)

TARGET_TASK_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Split:
    path: str
    format: str
    pieces: tuple[int, ...]        # row groups (Parquet) or stripes (ORC)
    size: int


@dataclass(frozen=True)
class Conform:
    """How a source batch becomes table rows: table column -> source column (or a static
    partition value), and the Arrow type each is cast to."""

    columns: tuple[tuple[str, str | None, str | None], ...]   # (table column, source column, static value)


def load_splits(source: SourceSpec) -> list[Split] | None:
    """The row groups / stripes of a Parquet or ORC source, or None if the source is not one
    this path reads exactly as Spark would."""
    if source.table is not None or not source.path or source.options or source.format_name not in ("parquet", "orc"):
        return None
    fmt = source.format_name
    fs, root = afs.filesystem_for(source.path)
    files = check_source_files(source.path, fmt)
    if any("/" in f.path[len(root):].strip("/") for f in files):
        return None                      # files in subdirectories: Spark discovers partitions there
    splits = []
    for f in sorted(files, key=lambda f: f.path):
        uri = f.path if "://" not in source.path else source.path.split("://", 1)[0] + "://" + f.path
        try:
            with fs.open_input_file(f.path) as handle:
                if fmt == "parquet":
                    meta = pq.ParquetFile(handle).metadata
                    sizes = [sum(meta.row_group(i).column(c).total_compressed_size
                                 for c in range(meta.num_columns)) for i in range(meta.num_row_groups)]
                else:
                    orc = po.ORCFile(handle)
                    sizes = [max(1, f.size // max(1, orc.nstripes))] * orc.nstripes
        except pa.ArrowInvalid as exc:
            raise DmlError(f"source file {f.path} is not a readable {fmt.upper()} file: {exc}") from None
        except OSError as exc:           # gone since it was listed, or a failed read: not bad input
            raise afs.AcidFileError(f"cannot read source file {f.path}: {exc}") from None
        splits += [Split(uri, fmt, (i,), s) for i, s in enumerate(sizes)]
    return splits


def source_schema(split: Split) -> pa.Schema:
    fs, path = afs.filesystem_for(split.path)
    with fs.open_input_file(path) as handle:
        return pq.ParquetFile(handle).schema_arrow if split.format == "parquet" else po.ORCFile(handle).schema


def conform_plan(table: Table, schema: pa.Schema, static: dict[str, str]) -> Conform:
    """Check the source schema against the table as ``dml.conform_source`` does and say where
    each table column comes from."""
    from pyspark.sql.pandas.types import from_arrow_type  # driver only: it imports pandas

    have = {f.name.lower(): (f.name, from_arrow_type(f.type)) for f in schema}
    return Conform(tuple(source_columns(table, have, static)))


def conform_batch(table: Table, plan: Conform, batch: pa.RecordBatch) -> pa.RecordBatch:
    arrays = []
    for (name, src, static), col in zip(plan.columns, table.spec.all_columns):
        target = col.type.to_arrow()
        if src is None:
            arrays.append(pa.array([static] * batch.num_rows, pa.string()).cast(target))
            continue
        arr = batch.column(batch.schema.get_field_index(src))
        if not arr.type.equals(target):
            try:
                arr = arr.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise DmlError(f"source: column {name!r} cannot be stored as {col.type}: {exc}") from None
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=[c.name for c in table.spec.all_columns])


def task_splits(sc: SparkContext, splits: list[Split], max_tasks: int) -> list[list[Split]]:
    """Splits packed into tasks of about equal bytes: enough to use every core and to keep a
    task near ``TARGET_TASK_BYTES``, never more than ``max_tasks``."""
    total = sum(s.size for s in splits)
    cores = sc.defaultParallelism
    n = -(-max(1, -(-total // TARGET_TASK_BYTES)) // cores) * cores       # a multiple of the cores
    n = max(1, min(n, max_tasks, len(splits)))
    tasks: list[list[Split]] = [[] for _ in range(n)]
    loads = np.zeros(n)
    for s in sorted(splits, key=lambda s: -s.size):         # largest first onto the lightest task
        i = int(np.argmin(loads))
        tasks[i].append(s)
        loads[i] += s.size
    return [sorted(t, key=lambda s: (s.path, s.pieces)) for t in tasks if t]


def run_load(sc: SparkContext, stmt: Statement, splits: list[Split], static: dict[str, str],
             overwrite_partitions: list[str], stage: Stage = _no_stage) -> list[PartitionStats]:
    """The load tasks of one INSERT ("write"), then its directories published ("publish")."""
    table = stmt.table
    plan = conform_plan(table, source_schema(splits[0]), static) if splits else None
    max_tasks = len(stmt.statement_ids) if table.spec.num_buckets else MAX_BUCKET_ID + 1
    tasks = task_splits(sc, splits, max_tasks)
    fs, root = table.fs_and_root
    staging = stmt.staging()
    try:
        with stage("write") as progress:
            # no plan: no splits, so no tasks (an INSERT OVERWRITE of nothing still publishes)
            rows = run_tasks(sc, len(tasks), _load_task(stmt, staging, plan, tasks)) if plan is not None else []
            progress["rows"] = written_rows(rows)
        with stage("publish"):
            return publish(fs, root, staging, stmt, rows, overwrite_partitions)
    finally:
        afs.remove_dir(fs, staging)


def _load_task(stmt: Statement, staging: str, plan: Conform,
               tasks: list[list[Split]]) -> Callable[[int], list[dict]]:
    table = stmt.table

    def load(task: int) -> list[dict]:
        fs, _ = afs.filesystem_for(table.spec.location)
        files = TaskFiles(stmt, staging, fs, task, Placement.PER_TASK)
        for split in tasks[task]:
            for batch in read_split(split):
                files.add(conform_batch(table, plan, batch))
        return files.close()

    return load


def read_split(split: Split) -> Iterator[pa.RecordBatch]:
    fs, path = afs.filesystem_for(split.path)
    try:
        with fs.open_input_file(path) as handle:
            if split.format == "parquet":
                yield from pq.ParquetFile(handle).iter_batches(batch_size=256 * 1024, row_groups=list(split.pieces))
            else:
                orc = po.ORCFile(handle)
                for i in split.pieces:
                    yield orc.read_stripe(i)
    except pa.ArrowInvalid as exc:
        raise DmlError(f"source file {split.path} is not a readable {split.format.upper()} file: {exc}") from None
    except OSError as exc:
        raise afs.AcidFileError(f"cannot read source file {split.path}: {exc}") from None
