"""Writing one statement's files: insert events into ``delta_W_W_SSSS`` (or ``base_W`` for
INSERT OVERWRITE), delete events into ``delete_delta_W_W_SSSS``, one file per bucket.

Everything a statement writes travels as one DataFrame of *events* (inserts and deletes
together). Each file must be written by exactly one task; how the events get there is the
statement's :class:`Placement`:

* ``LOCAL``: the events of each (partition, bucket) already sit in one task, and carry their
  bucket — UPDATE, DELETE and a bucket-wise MERGE, whose tasks each read whole buckets.
* ``PER_TASK``: inserts only; every task writes its own files, with its own statement id in a
  bucketed table (Hive allows several statement ids under one write id) or its own writer id as
  the bucket of an unbucketed one. A load needs no shuffle.
* ``SHUFFLE``: the events are shuffled by (partition, kind, bucket) first.

Tasks write into a hidden staging directory of the table (:class:`TaskFiles`, also used by the
load tasks of :mod:`.load`); the driver then adds the ``_orc_acid_version`` markers and moves
each finished directory into place. A job killed before that leaves only staging (hidden from
readers, removed by the cleaner); after it, only directories of a write id that is not
committed until the client commits.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..acid import fs as afs
from ..acid.bucket_codec import MAX_BUCKET_ID, decode_bucket_array
from ..acid.bucketing import bucket_ids
from ..acid.errors import AcidError
from ..acid.names import ParsedDelta, base_name, bucket_file_name, delta_name, parse_dir
from ..acid.reader import ROW_ID_COLUMN
from ..acid.writer import InsertFile, delete_events, write_acid_file
from ..errors import InvalidInputError
from ..jobs.manifest import PartitionStats
from ..jobs.spec import partition_value_text
from .scan import Table
from .tasks import release_freed_memory, task_context
from .types import ROW_ID_SPARK, spark_type

KIND = "__kind"        # "i" insert event, "d" delete event
ACTION = "__action"    # "i" insert, "u" update, "d" delete: what the row counts as in the stats
BUCKET = "__bucket"
INSERT, DELETE, UPDATE = "i", "d", "u"

_STATS_ARROW = pa.schema([("partition", pa.string()), ("dir", pa.string()), ("kind", pa.string()),
                          ("file", pa.string()), ("rows", pa.int64()), ("updates", pa.int64()),
                          ("bytes", pa.int64())])
_STATS_SCHEMA = T.StructType([
    T.StructField("partition", T.StringType()), T.StructField("dir", T.StringType()),
    T.StructField("kind", T.StringType()), T.StructField("file", T.StringType()),
    T.StructField("rows", T.LongType()), T.StructField("updates", T.LongType()),
    T.StructField("bytes", T.LongType()),
])


Stage = Callable[[str], AbstractContextManager]


def _no_stage(_name: str) -> AbstractContextManager:
    return nullcontext({})


def written_rows(stats: list[dict]) -> int:
    """Rows a statement's writer tasks wrote (inserts, updates and delete events)."""
    return sum(r["rows"] for r in stats)


class WriteError(InvalidInputError):
    """A statement that cannot be written: more writer tasks than its writer ids (statement ids
    of a bucketed table, buckets of a delta). The same statement fails the same way."""


class Placement(enum.Enum):
    """How a statement's events reach the one task that writes each file (module docstring)."""

    LOCAL = "local"
    PER_TASK = "per_task"
    SHUFFLE = "shuffle"


@dataclass(frozen=True)
class Statement:
    """Where one statement writes: the write id, its statement ids (the first is the
    statement's; writer task i of a PER_TASK load writes under the i-th) and whether inserts go
    to ``base_W`` (INSERT OVERWRITE)."""

    table: Table
    txn_id: int
    write_id: int
    statement_ids: tuple[int, ...]
    overwrite: bool = False
    shared_txn: bool = False      # an earlier attempt may have left directories under these ids

    @property
    def statement_id(self) -> int:
        return self.statement_ids[0]

    def dir_name(self, kind: str, statement_id: int | None = None) -> str:
        if kind == INSERT and self.overwrite:
            return base_name(self.write_id)
        sid = self.statement_id if statement_id is None else statement_id
        return delta_name(self.write_id, self.write_id, sid, delete=kind == DELETE)

    def staging(self, purpose: str = "files") -> str:
        """A fresh staging directory for one attempt of this statement (the cleaner finds what a
        killed attempt left by its ``txn_<id>_`` prefix)."""
        _, root = self.table.fs_and_root
        return afs.join(root, afs.STAGING_DIR, f"txn_{self.txn_id}_w{self.write_id}_s{self.statement_id}_"
                                               f"{purpose}_{uuid.uuid4().hex[:8]}")


def row_bucket(row_id: SparkColumn) -> SparkColumn:
    """The bucket (writer id) a ROW__ID's bucket property names (BucketCodec V0 or V1)."""
    prop = row_id.getField("bucketId")
    return F.when(F.shiftrightunsigned(prop, 29) == 0, prop).otherwise(
        F.shiftright(prop.bitwiseAND(0x0FFF0000), 16))


def insert_events_df(table: Table, rows: DataFrame, action: str = INSERT) -> DataFrame:
    """Rows (table + partition columns, already of the table's types) as insert events."""
    cols = [F.col(c.name) for c in table.spec.all_columns]
    return rows.select(*cols, F.lit(None).cast(ROW_ID_SPARK).alias(ROW_ID_COLUMN),
                       F.lit(INSERT).alias(KIND), F.lit(action).alias(ACTION))


def delete_events_df(table: Table, rows: DataFrame, action: str = DELETE) -> DataFrame:
    """Rows read with ROW__ID (and partition columns) as delete events, in their row's bucket."""
    cols = [F.lit(None).cast(spark_type(c.type)).alias(c.name) for c in table.spec.data_columns]
    cols += [F.col(c.name) for c in table.spec.partition_cols]
    return rows.select(*cols, F.col(ROW_ID_COLUMN), F.lit(DELETE).alias(KIND), F.lit(action).alias(ACTION),
                       row_bucket(F.col(ROW_ID_COLUMN)).alias(BUCKET))


def update_events_df(table: Table, rows: DataFrame) -> DataFrame:
    """Updated rows (new values + the old ROW__ID) as a delete event and an insert event each,
    produced in one pass over ``rows``; both in the old row's bucket (bucket columns never
    change)."""
    kind = F.explode(F.array(F.lit(DELETE), F.lit(INSERT))).alias(KIND)
    exploded = rows.select("*", row_bucket(F.col(ROW_ID_COLUMN)).alias(BUCKET), kind)
    is_insert = F.col(KIND) == INSERT
    cols = [F.when(is_insert, F.col(c.name)).cast(spark_type(c.type)).alias(c.name) for c in table.spec.data_columns]
    cols += [F.col(c.name) for c in table.spec.partition_cols]
    return exploded.select(*cols, F.when(~is_insert, F.col(ROW_ID_COLUMN)).alias(ROW_ID_COLUMN), F.col(KIND),
                           F.lit(UPDATE).alias(ACTION), F.col(BUCKET))


def write_statement(spark: SparkSession, stmt: Statement, events: DataFrame, placement: Placement,
                    overwrite_partitions: Sequence[str] = (), stage: Stage = _no_stage) -> list[PartitionStats]:
    """Write all events of a statement and publish its directories; per-partition stats.

    ``overwrite_partitions``: partitions an INSERT OVERWRITE empties even if no row lands there
    (a static partition spec); they get an empty ``base_W``. ``stage(name)`` times the Spark
    job ("write") and the publishing ("publish").
    """
    table = stmt.table
    fs, root = table.fs_and_root
    staging = stmt.staging()
    if placement is Placement.SHUFFLE:
        with_bucket = _with_bucket(table, events)
        part_cols = table.spec.partition_names
        events = with_bucket.repartition(_num_writers(spark, table, with_bucket), *part_cols, KIND, BUCKET)
    elif placement is Placement.PER_TASK:
        writers = len(stmt.statement_ids) if table.spec.num_buckets else MAX_BUCKET_ID + 1
        if events.rdd.getNumPartitions() > writers:
            events = events.coalesce(writers)
    try:
        with stage("write") as progress:
            rows = [r.asDict() for r in events.mapInArrow(_writer(stmt, staging, placement), _STATS_SCHEMA).collect()]
            progress["rows"] = written_rows(rows)
        with stage("publish"):
            return publish(fs, root, staging, stmt, rows, overwrite_partitions)
    finally:
        afs.remove_dir(fs, staging)


def _num_writers(spark: SparkSession, table: Table, df: DataFrame) -> int:
    if table.spec.num_buckets:
        return max(1, min(table.spec.num_buckets * 4, 4 * spark.sparkContext.defaultParallelism, 2000))
    return max(1, min(df.rdd.getNumPartitions(), MAX_BUCKET_ID + 1))


def _with_bucket(table: Table, events: DataFrame) -> DataFrame:
    """Add the bucket each event's file is: Hive's bucketing hash for inserts into a bucketed
    table, the writer (upstream task) for unbucketed inserts, and the bucket of the deleted
    row's ROW__ID for delete events."""
    if BUCKET in events.columns:
        events = events.drop(BUCKET)
    delete_bucket = row_bucket(F.col(ROW_ID_COLUMN))
    if not table.spec.num_buckets:
        writers = min(events.rdd.getNumPartitions(), MAX_BUCKET_ID + 1)
        insert_bucket = F.pmod(F.spark_partition_id(), F.lit(max(1, writers)))
        return events.withColumn(BUCKET, F.when(F.col(KIND) == INSERT, insert_bucket).otherwise(delete_bucket))
    schema = T.StructType(events.schema.fields + [T.StructField(BUCKET, T.IntegerType(), False)])
    spec = table.spec
    hive_types = spec.bucket_types

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield b.append_column(BUCKET, pa.array(event_buckets(b, spec.bucket_columns, hive_types,
                                                                 spec.num_buckets, spec.bucketing_version)))

    return events.mapInArrow(add, schema)


def event_buckets(batch: pa.RecordBatch, bucket_columns: tuple[str, ...], hive_types: list[str], buckets: int,
                  version: int) -> np.ndarray:
    """The bucket of each event of a bucketed table: Hive's hash of the bucket columns for
    inserts (all rows, without a KIND column), the deleted row's (from its ROW__ID) for deletes."""
    names = batch.schema.names
    ids = np.zeros(batch.num_rows, dtype=np.int32)
    ins = (batch.column(names.index(KIND)).to_numpy(zero_copy_only=False) == INSERT if KIND in names
           else np.ones(batch.num_rows, dtype=bool))
    if ins.any():
        ids = bucket_ids([batch.column(batch.schema.get_field_index(c)) for c in bucket_columns],
                         hive_types, buckets, version).astype(np.int32)
    if (~ins).any():
        rid = batch.column(batch.schema.get_field_index(ROW_ID_COLUMN))
        props = pc.fill_null(pc.struct_field(rid, [1]), 0).to_numpy(zero_copy_only=False)
        ids = np.where(ins, ids, decode_bucket_array(props)).astype(np.int32)
    return ids


def group_rows(batch: pa.RecordBatch, keys: list[pa.Array]) -> list[tuple[list, pa.RecordBatch]]:
    """The rows of ``batch`` per distinct combination of ``keys`` values (NULL a value of its
    own): one sort and one take, each group a zero-copy slice of the result."""
    n = batch.num_rows
    combined = np.zeros(n, dtype=np.int64)
    decoders = []
    for k in keys:
        codes, values = _key_codes(k)
        combined = combined * (len(values) + 1) + codes
        decoders.append((codes, values + [None]))
    if n and combined.min() == combined.max():
        return [([d[c[0]] for c, d in decoders], batch)]
    if combined.max() < 1 << 16:
        combined = combined.astype(np.uint16)                # a radix sort for small codes
    order = np.argsort(combined, kind="stable")
    sorted_codes = combined[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    ends = np.r_[starts[1:], n]
    taken = batch.take(pa.array(order))
    return [([d[c[order[a]]] for c, d in decoders], taken.slice(a, b - a)) for a, b in zip(starts, ends)]


def _key_codes(key: pa.Array) -> tuple[np.ndarray, list]:
    """Codes 0..len(values) of a grouping key's rows (len(values) for NULL) and the value of
    each code. Small non-NULL integers (bucket ids) are their own codes, without a hash table."""
    if pa.types.is_integer(key.type) and not key.null_count and len(key):
        ints = key.to_numpy().astype(np.int64)
        low, high = int(ints.min()), int(ints.max())
        if high - low < 1 << 16:
            return ints - low, list(range(low, high + 1))
    enc = pc.dictionary_encode(key)
    codes = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, enc.dictionary.to_pylist()


def row_partition(table: Table, values: list) -> str:
    """The partition directory of a row's partition values (validated: no ``/`` or ``..``; ``""``
    for an unpartitioned table), by ``TableSpec.partition_name``."""
    if not table.spec.partition_cols:
        return ""
    return table.spec.partition_name([partition_value_text(v) for v in values])


@dataclass
class _Deletes:
    """Delete events of one file, kept until the end: Hive wants them sorted by ROW__ID."""

    ot: list[np.ndarray] = field(default_factory=list)
    bp: list[np.ndarray] = field(default_factory=list)
    rid: list[np.ndarray] = field(default_factory=list)
    updates: int = 0


class TaskFiles:
    """The files one writer task writes for a statement: per (partition, bucket, statement id)
    one insert file, written as rows arrive, and one delete file, written at the end.

    ``task`` is the task's index: its statement id offset (PER_TASK, bucketed) or the bucket of
    its inserts (PER_TASK, unbucketed). Events arrive as batches of the table columns, the
    partition columns, ROW__ID, KIND, ACTION and, unless PER_TASK, BUCKET."""

    def __init__(self, stmt: Statement, staging: str, fs: pafs.FileSystem, task: int, placement: Placement):
        self.stmt, self.staging, self.fs, self.placement = stmt, staging, fs, placement
        table = stmt.table
        self.columns = table.spec.data_columns
        self.insert_statement = stmt.statement_id
        self.insert_bucket: int | None = None
        if placement is Placement.PER_TASK:
            if table.spec.num_buckets:
                if task >= len(stmt.statement_ids):
                    raise WriteError(f"writer task {task} has no statement id: the statement has "
                                     f"{len(stmt.statement_ids)}")
                self.insert_statement = stmt.statement_ids[task]
            elif task > MAX_BUCKET_ID:
                raise WriteError(f"writer task {task} exceeds the {MAX_BUCKET_ID + 1} writer ids of a delta")
            else:
                self.insert_bucket = task
        spec = table.spec
        self._bucketing = (spec.bucket_columns, spec.bucket_types,
                           spec.num_buckets, spec.bucketing_version)
        self._parts: dict[tuple, str] = {}
        self._inserts: dict[tuple[str, int], tuple[InsertFile, list[int]]] = {}
        self._deletes: dict[tuple[str, int], _Deletes] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        """Events (or, without a KIND column, rows to insert) into their files."""
        if not batch.num_rows:
            return
        table = self.stmt.table
        names = batch.schema.names
        if BUCKET in names:
            buckets = batch.column(names.index(BUCKET))
        elif self.insert_bucket is not None:
            buckets = pa.array(np.full(batch.num_rows, self.insert_bucket, np.int32))
        else:
            buckets = pa.array(event_buckets(batch, *self._bucketing))
        keys = [batch.column(names.index(n)) for n in table.spec.partition_names] + [buckets]
        if KIND in names:
            keys.append(batch.column(names.index(KIND)))
        groups = []
        for values, rows in group_rows(batch, keys):
            kind = values.pop() if KIND in names else INSERT
            groups.append((tuple(values), kind, rows))
        for key, kind, rows in groups:
            *pvals, bucket = key
            part = self._part_name(tuple(pvals))
            updates = 0
            if ACTION in names:
                updates = int(pc.sum(pc.equal(rows.column(names.index(ACTION)), UPDATE)).as_py() or 0)
            if kind == INSERT:
                self._insert(part, int(bucket), rows, updates)
            else:
                self._delete(part, int(bucket), rows, updates)

    def _part_name(self, values: tuple) -> str:
        """Validated once per partition, before any file of it is written."""
        if values not in self._parts:
            self._parts[values] = row_partition(self.stmt.table, list(values))
        return self._parts[values]

    def _insert(self, part: str, bucket: int, rows: pa.RecordBatch, updates: int) -> None:
        key = (part, bucket)
        if key not in self._inserts:
            spec = self.stmt.table.spec
            name = f"{bucket:06d}_0" if spec.insert_only else bucket_file_name(bucket)
            path = afs.join(self.staging, part, self.stmt.dir_name(INSERT, self.insert_statement), name)
            self._inserts[key] = (InsertFile(self.columns, self.stmt.write_id, bucket, self.insert_statement,
                                             self.fs, path, base=self.stmt.overwrite,
                                             insert_only=spec.insert_only, compression=spec.compression), [0])
        f, counts = self._inserts[key]
        f.write(rows.select([c.name for c in self.columns]))
        counts[0] += updates

    def _delete(self, part: str, bucket: int, rows: pa.RecordBatch, updates: int) -> None:
        d = self._deletes.setdefault((part, bucket), _Deletes())
        rid = rows.column(rows.schema.get_field_index(ROW_ID_COLUMN))
        for i, target in enumerate((d.ot, d.bp, d.rid)):
            target.append(pc.struct_field(rid, [i]).to_numpy(zero_copy_only=False))
        d.updates += updates

    def close(self) -> list[dict]:
        """Finish every file; one stats row per file written."""
        out = []
        for (part, _), (f, counts) in self._inserts.items():
            written = f.close()
            out.append({"partition": part, "dir": self.stmt.dir_name(INSERT, self.insert_statement),
                        "kind": INSERT, "file": written.path,
                        "rows": written.rows, "updates": counts[0], "bytes": written.bytes})
        for (part, bucket), d in self._deletes.items():
            dir_name = self.stmt.dir_name(DELETE)
            events = delete_events(np.concatenate(d.ot), np.concatenate(d.bp), np.concatenate(d.rid),
                                   self.columns, self.stmt.write_id)
            written = write_acid_file(self.fs, afs.join(self.staging, part, dir_name, bucket_file_name(bucket)),
                                      events, self.columns, compression=self.stmt.table.spec.compression)
            out.append({"partition": part, "dir": dir_name, "kind": DELETE, "file": written.path,
                        "rows": written.rows, "updates": d.updates, "bytes": written.bytes})
        return out


def stats_batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=_STATS_ARROW)


def _writer(stmt: Statement, staging: str, placement: Placement):  # type: ignore[no-untyped-def]
    location = stmt.table.spec.location

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, _ = afs.filesystem_for(location)
        files = TaskFiles(stmt, staging, fs, task_context().partitionId(), placement)
        for b in batches:
            files.add(b)
        out = files.close()
        release_freed_memory()
        if out:
            yield stats_batch(out)

    return write


def publish(fs: pafs.FileSystem, root: str, staging: str, stmt: Statement, rows: list[dict],
            overwrite_partitions: Sequence[str] = ()) -> list[PartitionStats]:
    """Markers into every directory the tasks wrote (rows: their stats), then each moved into
    place; per-partition stats."""
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
    if stmt.shared_txn:
        _remove_leftovers(fs, root, stmt, dirs)
    for part, dir_name in sorted(dirs):
        staged = afs.join(staging, part, dir_name)
        if not stmt.table.spec.insert_only:
            afs.write_acid_version(fs, staged)
        elif not afs.exists(fs, staged):
            fs.create_dir(staged, recursive=True)
        afs.publish(fs, staged, afs.join(root, part, dir_name))
        stats[part].directories.append(dir_name)
    return [stats[p] for p in sorted(stats)]


def _remove_leftovers(fs: pafs.FileSystem, root: str, stmt: Statement, keep: set[tuple[str, str]]) -> None:
    """Directories an earlier attempt of this statement published under its ids that this one
    does not replace (it wrote fewer files, or other partitions): in a shared txn they would
    become visible at its commit."""
    listing = afs.list_table(fs, root, stmt.table.spec.partition_names)
    for part, entries in listing.partitions.items():
        for e in entries:
            if not e.is_dir or not e.name.startswith(("delta_", "delete_delta_")) or (part, e.name) in keep:
                continue
            try:
                p = parse_dir(e.name)
            except AcidError:
                continue
            if (isinstance(p, ParsedDelta) and p.min_write_id == p.max_write_id == stmt.write_id
                    and p.statement_id in stmt.statement_ids):
                fs.delete_dir(afs.join(root, part, e.name))
