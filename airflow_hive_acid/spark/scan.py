"""Snapshot scans: list the table once on the driver, let AcidState choose directories per
partition, and read each bucket group in a Spark task (``mapInArrow`` over pyarrow), so the
reader never goes through Spark's ORC source (which cannot read the ACID event schema)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ..acid import fs as afs
from ..acid.errors import AcidError
from ..acid.names import ParsedDelta, parse_dir
from ..acid.partitions import DEFAULT_PARTITION_NAME, parse_part_name
from ..acid.reader import (
    ROW_ID_COLUMN,
    AcidReadError,
    BucketGroup,
    KeySet,
    ReadRequest,
    bucket_groups,
    insert_only_groups,
    read_bucket_group,
)
from ..acid.state import DirEntry, get_acid_state
from ..acid.writeids import ValidTxnList, ValidWriteIdList
from ..jobs.spec import SnapshotSpec, TableSpec
from .tasks import task_frame, task_indices
from .types import ROW_ID_SPARK, spark_type


@dataclass
class Table:
    """A table as the Spark side uses it: the job's ``TableSpec`` (the one model of a table,
    ``acid/table.py``; its columns and partitioning are read from ``spec``) and its filesystem."""

    spec: TableSpec

    def __post_init__(self) -> None:
        self.spec.check_partition_types()

    @property
    def fs_and_root(self) -> tuple[pafs.FileSystem, str]:
        return afs.filesystem_for(self.spec.location)


@dataclass
class ScanPlan:
    table: Table
    snapshot: ValidWriteIdList
    groups: list[BucketGroup]
    partitions: list[str]


def plan_scan(table: Table, snapshot: SnapshotSpec, partitions: list[str] | None = None,
              exclude_statement: tuple[int, frozenset[int]] | None = None,
              keep: Callable[[str], bool] | None = None) -> ScanPlan:
    """List the table (or the given partitions) once and pick, per partition, what to read.

    ``exclude_statement=(write_id, statement ids)`` hides the directories of the statement being
    run: anything there is a leftover of an earlier attempt of it and must not be read.
    ``keep(partition name)`` prunes partitions of that one listing (pushed-down filters)."""
    wl = ValidWriteIdList.parse(snapshot.valid_write_ids)
    txns = ValidTxnList.parse(snapshot.valid_txns)
    fs, root = table.fs_and_root
    listing = afs.list_table(fs, root, table.spec.partition_names, partitions)
    groups: list[BucketGroup] = []
    kept = sorted(p for p in listing.partitions if keep is None or keep(p))
    for part in kept:
        entries = _without_statement(listing.partitions[part], exclude_statement)
        state = get_acid_state(entries, wl, txns)
        pdir = afs.join(root, part)
        if table.spec.insert_only:
            groups.extend(insert_only_groups(part, pdir, state))
        else:
            groups.extend(bucket_groups(part, pdir, state, wl))
    return ScanPlan(table, wl, groups, kept)


def _without_statement(entries: list[DirEntry], stmt: tuple[int, frozenset[int]] | None) -> list[DirEntry]:
    if stmt is None:
        return entries
    out = []
    for e in entries:
        if e.is_dir and (e.name.startswith("delta_") or e.name.startswith("delete_delta_")):
            try:
                p = parse_dir(e.name)
            except AcidError:
                p = None
            if isinstance(p, ParsedDelta) and p.min_write_id == p.max_write_id == stmt[0] and p.statement_id in stmt[1]:
                continue
        out.append(e)
    return out


def partition_values(table: Table, part: str) -> list[pa.Scalar]:
    """The typed values of a partition's columns (strings in the path, a null scalar for Hive's
    default partition)."""
    if not table.spec.partition_cols:
        return []
    spec = parse_part_name(part, table.spec.partition_names)
    out = []
    for c in table.spec.partition_cols:
        raw = spec[c.name]
        t = c.type.to_arrow()
        if raw == DEFAULT_PARTITION_NAME:
            out.append(pa.scalar(None, t))
        elif c.type.name == "boolean":
            out.append(pa.scalar(raw.lower() == "true", t))
        else:
            try:
                out.append(pc.cast(pa.scalar(raw), t))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise AcidReadError(f"partition {part}: value {raw!r} is not a {c.type}") from None
    return out


def scan_schema(table: Table, columns: list[str] | None, with_row_id: bool,
                with_partitions: bool = True) -> T.StructType:
    cols = table.spec.data_columns if columns is None else [table.spec.column(n) for n in columns
                                                            if n not in table.spec.partition_names]
    fields = [T.StructField(c.name, spark_type(c.type), True) for c in cols]
    if with_partitions:
        fields += [T.StructField(c.name, spark_type(c.type), True) for c in table.spec.partition_cols]
    if with_row_id:
        fields.append(T.StructField(ROW_ID_COLUMN, ROW_ID_SPARK, False))
    return T.StructType(fields)


def read_table(spark: SparkSession, table: TableSpec | Table, snapshot: SnapshotSpec, *,
               columns: list[str] | None = None, partitions: list[str] | None = None,
               partition_filter: str | None = None, with_row_id: bool = False,
               exclude_statement: tuple[int, frozenset[int]] | None = None,
               key_filter: tuple[str, pa.Array] | None = None) -> DataFrame:
    """The table's rows at ``snapshot`` as a DataFrame: the table columns (or ``columns``), the
    partition columns, and ``ROW__ID`` (writeId, bucketId, rowId) if asked.

    ``partitions`` limits the scan to those partition names; ``partition_filter`` is a Spark SQL
    predicate over partition columns evaluated on the driver before any file is listed or read.
    """
    t = table if isinstance(table, Table) else Table(table)
    if columns is not None:
        for n in columns:
            t.spec.column(n)
    if partition_filter:
        partitions = select_partitions(spark, t, snapshot, partition_filter, partitions)
    plan = plan_scan(t, snapshot, partitions, exclude_statement)
    return scan_dataframe(spark, plan, columns, with_row_id, key_filter)


def select_partitions(spark: SparkSession, table: Table, snapshot: SnapshotSpec, predicate: str,
                      among: list[str] | None = None) -> list[str]:
    if not table.spec.partition_cols:
        raise AcidReadError(f"{table.spec.name} is not partitioned: a partition filter does not apply")
    fs, root = table.fs_and_root
    names = among if among is not None else sorted(afs.list_table(fs, root, table.spec.partition_names).partitions)
    if not names:
        return []
    rows = [tuple(v.as_py() for v in partition_values(table, n)) + (n,) for n in names]
    schema = T.StructType([T.StructField(c.name, spark_type(c.type), True) for c in table.spec.partition_cols]
                          + [T.StructField("__part", T.StringType(), False)])
    df = spark.createDataFrame(rows, schema)
    return [r[0] for r in df.filter(predicate).select("__part").collect()]


def scan_request(t: Table, columns: list[str] | None, with_row_id: bool
                 ) -> tuple[ReadRequest, list[pa.Field], bool]:
    """What a scan task reads of each bucket group (data columns, ROW__ID), the Arrow fields of
    the batches it returns (:func:`scan_schema`), and whether the first column read is only
    there to count rows (no data column asked for)."""
    wanted = None if columns is None else [n for n in columns if n not in t.spec.partition_names]
    request = ReadRequest(t.spec.data_columns, wanted, with_row_id)
    if not request.out_columns and not with_row_id:
        # Only partition columns (or nothing) asked: read the first column to count rows.
        request = ReadRequest(t.spec.data_columns, [t.spec.data_columns[0].name], False)
    fields = [pa.field(f.name, _arrow_of(f, t)) for f in scan_schema(t, columns, with_row_id).fields]
    return request, fields, wanted is not None and not wanted and not with_row_id


def read_group(fs: pafs.FileSystem, t: Table, group: BucketGroup, snapshot: ValidWriteIdList,
               request: ReadRequest, fields: list[pa.Field], drop_first: bool) -> Iterator[pa.RecordBatch]:
    """One bucket group's rows at ``snapshot`` as Arrow batches of ``fields`` (partition
    values filled in): what one scan task does, in a ``mapInArrow`` or a data source reader."""
    consts = partition_values(t, group.partition)
    for b in read_bucket_group(fs, group, snapshot, request):
        yield _to_spark_batch(b, consts, fields, drop_first)


def scan_dataframe(spark: SparkSession, plan: ScanPlan, columns: list[str] | None,
                   with_row_id: bool, key_filter: tuple[str, pa.Array] | None = None) -> DataFrame:
    t = plan.table
    schema = scan_schema(t, columns, with_row_id)
    wanted = None if columns is None else [n for n in columns if n not in t.spec.partition_names]
    if key_filter is not None and (wanted is not None and key_filter[0] not in wanted
                                   or key_filter[0] in t.spec.partition_names):
        raise AcidReadError(f"key filter column {key_filter[0]!r} must be a read data column")
    request, arrow_fields, drop_first = scan_request(t, columns, with_row_id)
    # The key values travel once per executor as a broadcast, not inside every task's closure.
    keys_bc = (key_filter[0], spark.sparkContext.broadcast(_ipc(key_filter[1]))) if key_filter is not None else None
    snapshot_text = plan.snapshot.to_string()
    location = t.spec.location
    groups = plan.groups

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, _ = afs.filesystem_for(location)
        snap = ValidWriteIdList.parse(snapshot_text)
        req = request
        if keys_bc is not None:
            key_name, key_values = keys_bc
            req = replace(request, key_filter=(key_name, KeySet(_from_ipc(key_values.value))))
        for i in task_indices(batches):
            yield from read_group(fs, t, groups[i], snap, req, arrow_fields, drop_first)

    if not plan.groups:
        return spark.createDataFrame([], schema)
    slices = num_scan_tasks(plan.groups, spark.sparkContext.defaultParallelism)
    return task_frame(spark, len(plan.groups), slices).mapInArrow(read, schema)


TARGET_TASK_BYTES = 64 * 1024 * 1024


def num_scan_tasks(groups: list[BucketGroup], parallelism: int) -> int:
    """One task per bucket group for large tables; small groups share tasks (a Python task costs
    tens of milliseconds however little it reads), but never fewer tasks than cores."""
    total = sum(f.size for g in groups for f in g.row_files + g.delete_files + g.originals)
    by_size = -(-total // TARGET_TASK_BYTES)
    return max(1, min(len(groups), max(by_size, parallelism)))


def _ipc(values: pa.Array) -> bytes:
    sink = pa.BufferOutputStream()
    batch = pa.record_batch([values], names=["k"])
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Array:
    return pa.ipc.open_stream(data).read_all().column(0).combine_chunks()


def _arrow_of(f: T.StructField, t: Table) -> pa.DataType:
    if f.name == ROW_ID_COLUMN:
        return pa.struct([("writeId", pa.int64()), ("bucketId", pa.int32()), ("rowId", pa.int64())])
    return t.spec.column(f.name).type.to_arrow()


def _to_spark_batch(b: pa.RecordBatch, consts: list, fields: list[pa.Field], drop_first: bool) -> pa.RecordBatch:
    arrays = list(b.columns)
    if drop_first:
        arrays = arrays[1:]
    n = b.num_rows
    row_id = None
    if arrays and fields and fields[-1].name == ROW_ID_COLUMN:
        row_id = arrays.pop()
    arrays += [pa.array([c.as_py()] * n, c.type) if n else pa.array([], c.type) for c in consts]
    if row_id is not None:
        arrays.append(row_id)
    out = []
    for a, f in zip(arrays, fields):
        out.append(a if a.type.equals(f.type) else a.cast(f.type))
    return pa.RecordBatch.from_arrays(out, schema=pa.schema(fields))
