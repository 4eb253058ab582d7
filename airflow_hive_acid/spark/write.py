"""Writing one statement's files: insert events into ``delta_W_W_SSSS`` (or ``base_W`` for
INSERT OVERWRITE), delete events into ``delete_delta_W_W_SSSS``, one file per bucket.

Everything a statement writes travels as one DataFrame of *events* (inserts and deletes
together), shuffled once by (partition, kind, bucket) so that each bucket file is written by
exactly one task. Tasks write into a hidden staging directory of the table; the driver then adds
the ``_orc_acid_version`` markers and moves each finished directory into place. A job killed
before that leaves only staging (hidden from readers, removed by the cleaner); after it, only
directories of a write id that is not committed until the client commits.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..acid import fs as afs
from ..acid.bucket_codec import MAX_BUCKET_ID
from ..acid.bucketing import bucket_ids
from ..acid.names import base_name, bucket_file_name, delta_name
from ..acid.partitions import DEFAULT_PARTITION_NAME, make_part_name
from ..acid.reader import ROW_ID_COLUMN
from ..acid.writer import delete_events, insert_events, write_acid_file, write_plain_file
from .protocol import PartitionStats
from .scan import Table
from .types import ROW_ID_SPARK, spark_type

KIND = "__kind"        # "i" insert event, "d" delete event
ACTION = "__action"    # "i" insert, "u" update, "d" delete: what the row counts as in the stats
BUCKET = "__bucket"
INSERT, DELETE, UPDATE = "i", "d", "u"

_STATS_SCHEMA = T.StructType([
    T.StructField("partition", T.StringType()), T.StructField("dir", T.StringType()),
    T.StructField("kind", T.StringType()), T.StructField("file", T.StringType()),
    T.StructField("rows", T.LongType()), T.StructField("updates", T.LongType()),
    T.StructField("bytes", T.LongType()),
])


class WriteError(Exception):
    """A statement that cannot be written (bad partition value, too many writers, ...)."""


@dataclass(frozen=True)
class Statement:
    """Where one statement writes: the write id, statement id and this attempt's staging dir."""

    table: Table
    txn_id: int
    write_id: int
    statement_id: int
    overwrite: bool = False          # INSERT OVERWRITE: inserts go to base_W

    def dir_name(self, kind: str) -> str:
        if kind == INSERT and self.overwrite:
            return base_name(self.write_id)
        return delta_name(self.write_id, self.write_id, self.statement_id, delete=kind == DELETE)


def event_schema(table: Table) -> T.StructType:
    """The columns of the events DataFrame a statement writes."""
    fields = [T.StructField(c.name, spark_type(c.type), True) for c in table.all_columns]
    fields += [T.StructField(ROW_ID_COLUMN, ROW_ID_SPARK, True), T.StructField(KIND, T.StringType(), False),
               T.StructField(ACTION, T.StringType(), False)]
    return T.StructType(fields)


def insert_events_df(table: Table, rows: DataFrame, action: str = INSERT) -> DataFrame:
    """Rows (table + partition columns, already of the table's types) as insert events."""
    cols = [F.col(c.name) for c in table.all_columns]
    return rows.select(*cols, F.lit(None).cast(ROW_ID_SPARK).alias(ROW_ID_COLUMN),
                       F.lit(INSERT).alias(KIND), F.lit(action).alias(ACTION))


def delete_events_df(table: Table, rows: DataFrame, action: str = DELETE) -> DataFrame:
    """Rows read with ROW__ID (and partition columns) as delete events."""
    cols = [F.lit(None).cast(spark_type(c.type)).alias(c.name) for c in table.columns]
    cols += [F.col(c.name) for c in table.partition_columns]
    return rows.select(*cols, F.col(ROW_ID_COLUMN), F.lit(DELETE).alias(KIND), F.lit(action).alias(ACTION))


def update_events_df(table: Table, rows: DataFrame) -> DataFrame:
    """Updated rows (new values + the old ROW__ID) as a delete event and an insert event each,
    produced in one pass over ``rows``."""
    kind = F.explode(F.array(F.lit(DELETE), F.lit(INSERT))).alias(KIND)
    exploded = rows.select("*", kind)
    is_insert = F.col(KIND) == INSERT
    cols = [F.when(is_insert, F.col(c.name)).cast(spark_type(c.type)).alias(c.name) for c in table.columns]
    cols += [F.col(c.name) for c in table.partition_columns]
    return exploded.select(*cols, F.when(~is_insert, F.col(ROW_ID_COLUMN)).alias(ROW_ID_COLUMN), F.col(KIND),
                           F.lit(UPDATE).alias(ACTION))


def write_statement(spark: SparkSession, stmt: Statement, events: DataFrame,
                    overwrite_partitions: list[str] = ()) -> list[PartitionStats]:
    """Write all events of a statement and publish its directories; per-partition stats.

    ``overwrite_partitions``: partitions an INSERT OVERWRITE empties even if no row lands there
    (a static partition spec); they get an empty ``base_W``.
    """
    table = stmt.table
    fs, root = table.fs_and_root
    staging = afs.join(root, afs.STAGING_DIR,
                       f"txn_{stmt.txn_id}_w{stmt.write_id}_s{stmt.statement_id}_{uuid.uuid4().hex[:8]}")
    with_bucket = _with_bucket(table, events)
    part_cols = [c.name for c in table.partition_columns]
    shuffled = with_bucket.repartition(_num_writers(spark, table, with_bucket), *part_cols, KIND, BUCKET)
    writer = _writer(stmt, staging)
    try:
        rows = shuffled.mapInArrow(writer, _STATS_SCHEMA).collect()
        stats = _publish(fs, root, staging, stmt, rows, overwrite_partitions)
    finally:
        if afs.exists(fs, staging):
            fs.delete_dir(staging)
    return stats


def _num_writers(spark: SparkSession, table: Table, df: DataFrame) -> int:
    if table.spec.num_buckets:
        return max(1, min(table.spec.num_buckets * 4, 4 * spark.sparkContext.defaultParallelism, 2000))
    return max(1, min(df.rdd.getNumPartitions(), MAX_BUCKET_ID + 1))


def _with_bucket(table: Table, events: DataFrame) -> DataFrame:
    """Add the bucket each event's file is: Hive's bucketing hash for inserts into a bucketed
    table, the writer (upstream task) for unbucketed inserts, and the bucket of the deleted
    row's ROW__ID for delete events."""
    bucket_prop = F.col(f"{ROW_ID_COLUMN}.bucketId")
    row_bucket = F.when(F.shiftrightunsigned(bucket_prop, 29) == 0, bucket_prop).otherwise(
        F.shiftright(bucket_prop.bitwiseAND(0x0FFF0000), 16))
    if not table.spec.num_buckets:
        writers = min(events.rdd.getNumPartitions(), MAX_BUCKET_ID + 1)
        insert_bucket = F.pmod(F.spark_partition_id(), F.lit(max(1, writers)))
        return events.withColumn(BUCKET, F.when(F.col(KIND) == INSERT, insert_bucket).otherwise(row_bucket))
    spec = table.spec
    hive_types = [str(table.column(c).type) for c in spec.bucket_columns]
    bucket_cols = list(spec.bucket_columns)
    schema = T.StructType(events.schema.fields + [T.StructField(BUCKET, T.IntegerType(), False)])
    n = spec.num_buckets
    version = spec.bucketing_version

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            kinds = b.column(b.schema.get_field_index(KIND)).to_numpy(zero_copy_only=False)
            ids = np.zeros(b.num_rows, dtype=np.int32)
            ins = kinds == INSERT
            if ins.any():
                cols = [b.column(b.schema.get_field_index(c)) for c in bucket_cols]
                ids = bucket_ids(cols, hive_types, n, version)
            if (~ins).any():
                rid = b.column(b.schema.get_field_index(ROW_ID_COLUMN))
                props = pc.struct_field(rid, [1]).to_numpy(zero_copy_only=False)
                props = np.where(~ins, props, 0).astype(np.int64) & 0xFFFFFFFF
                row_b = np.where(props >> 29 == 0, props, (props & 0x0FFF0000) >> 16).astype(np.int32)
                ids = np.where(ins, ids, row_b).astype(np.int32)
            yield b.append_column(BUCKET, pa.array(ids, pa.int32()))

    return events.mapInArrow(add, schema)


def _partition_name(table: Table, values: list) -> str:
    if not table.partition_columns:
        return ""
    strs = []
    for _col, v in zip(table.partition_columns, values):
        if v is None:
            strs.append(DEFAULT_PARTITION_NAME)
        elif isinstance(v, bool):
            strs.append("true" if v else "false")
        else:
            strs.append(str(v))
    return make_part_name(table.partition_names, strs)


def _writer(stmt: Statement, staging: str):  # type: ignore[no-untyped-def]
    table = stmt.table
    cols = table.columns
    part_names = table.partition_names
    insert_only = table.spec.insert_only

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, _ = afs.filesystem_for(table.spec.location)
        groups: dict[tuple, list[pa.RecordBatch]] = defaultdict(list)
        for b in batches:
            if not b.num_rows:
                continue
            keys = [b.column(b.schema.get_field_index(n)) for n in part_names] + [
                b.column(b.schema.get_field_index(KIND)), b.column(b.schema.get_field_index(BUCKET))]
            key_table = pa.Table.from_arrays(keys, names=[f"k{i}" for i in range(len(keys))])
            for combo in key_table.group_by(key_table.column_names).aggregate([]).to_pylist():
                mask = None
                for i, name in enumerate(key_table.column_names):
                    v = combo[name]
                    m = pc.is_null(keys[i]) if v is None else pc.equal(keys[i], pa.scalar(v, keys[i].type))
                    m = pc.fill_null(m, False)
                    mask = m if mask is None else pc.and_(mask, m)
                groups[tuple(combo[n] for n in key_table.column_names)].append(b.filter(mask))
        out = []
        for key, parts in groups.items():
            *pvals, kind, bucket = key
            part = _partition_name(table, pvals)
            rows = pa.Table.from_batches(parts)
            dir_name = stmt.dir_name(kind)
            if kind == INSERT and not table.spec.num_buckets:
                # an unbucketed insert's bucket is its writer; keep it unique per task
                bucket = TaskContext.get().partitionId() if bucket is None else bucket
            if bucket > MAX_BUCKET_ID:
                raise WriteError(f"bucket/writer id {bucket} exceeds {MAX_BUCKET_ID}")
            path_dir = afs.join(staging, part, dir_name)
            updates = int(pc.sum(pc.equal(rows.column(ACTION), UPDATE)).as_py() or 0)
            if kind == INSERT:
                data = rows.select([c.name for c in cols])
                if insert_only:
                    written = write_plain_file(fs, afs.join(path_dir, f"{bucket:06d}_0"), data, cols)
                else:
                    events = insert_events(data, cols, stmt.write_id, bucket, stmt.statement_id)
                    written = write_acid_file(fs, afs.join(path_dir, bucket_file_name(bucket)), events, cols,
                                              base=stmt.overwrite)
            else:
                rid = rows.column(ROW_ID_COLUMN).combine_chunks()
                events = delete_events(
                    pc.struct_field(rid, [0]).to_numpy(zero_copy_only=False),
                    pc.struct_field(rid, [1]).to_numpy(zero_copy_only=False),
                    pc.struct_field(rid, [2]).to_numpy(zero_copy_only=False), cols, stmt.write_id)
                written = write_acid_file(fs, afs.join(path_dir, bucket_file_name(bucket)), events, cols)
            out.append({"partition": part, "dir": dir_name, "kind": kind, "file": written.path,
                        "rows": written.rows, "updates": updates, "bytes": written.bytes})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=pa.schema([
                ("partition", pa.string()), ("dir", pa.string()), ("kind", pa.string()), ("file", pa.string()),
                ("rows", pa.int64()), ("updates", pa.int64()), ("bytes", pa.int64())]))

    return write


def _publish(fs, root: str, staging: str, stmt: Statement, rows: list, overwrite_partitions) -> list[PartitionStats]:  # type: ignore[no-untyped-def]
    stats: dict[str, PartitionStats] = {}
    dirs: set[tuple[str, str]] = set()
    for r in rows:
        p = stats.setdefault(r["partition"], PartitionStats(r["partition"]))
        dirs.add((r["partition"], r["dir"]))
        if r["kind"] == INSERT:
            if stmt.overwrite:
                p.base_files += 1
                p.base_bytes += r["bytes"]
            else:
                p.delta_files += 1
                p.delta_bytes += r["bytes"]
            p.rows_inserted += r["rows"] - r["updates"]
        else:
            p.delete_delta_files += 1
            p.delete_delta_bytes += r["bytes"]
            p.rows_deleted += r["rows"] - r["updates"]
            p.rows_updated += r["updates"]
    for part in overwrite_partitions:
        stats.setdefault(part, PartitionStats(part))
        dirs.add((part, stmt.dir_name(INSERT)))
    for part, dir_name in sorted(dirs):
        staged = afs.join(staging, part, dir_name)
        if not stmt.table.spec.insert_only:
            afs.write_acid_version(fs, staged)
        elif not afs.exists(fs, staged):
            fs.create_dir(staged, recursive=True)
        afs.publish(fs, staged, afs.join(root, part, dir_name))
        stats[part].directories.append(dir_name)
    return [stats[p] for p in sorted(stats)]
