"""The ``hive_acid`` data source: snapshot reads and transactional batch writes.

Who talks to the metastore: only the driver side of this module (``reader()``, ``writer()``,
``commit()``, ``abort()`` run in Python processes Spark starts on the driver), and only for
transactions it owns or was handed (``txnId``). Executors get everything they need pickled into
the reader, the input partitions or the writer: the table, the snapshot string, the write id
and statement ids. See docs/architecture.md §7.
"""
from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.types import StructField, StructType

from ..acid import fs as afs
from ..acid.reader import ROW_ID_COLUMN, BucketGroup
from ..acid.writeids import ValidWriteIdList
from ..errors import InvalidInputError
from ..jobs.spec import SnapshotSpec
from ..metastore import LockType, Metastore, TableInfo, TxnType
from ..spark.dml import source_columns
from ..spark.load import Conform, conform_batch
from ..spark.scan import (
    Table,
    num_scan_tasks,
    partition_values,
    plan_scan,
    read_group,
    scan_request,
    scan_schema,
)
from ..spark.tasks import release_freed_memory, task_context
from ..spark.types import spark_type
from ..spark.write import Placement, Statement, TaskFiles, publish
from ..statements import LOAD_STATEMENT_IDS
from ..writetxn import WriteTxn
from .stream import HiveAcidStreamWriter

log = logging.getLogger(__name__)

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
AGENT = "hive_acid data source"
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def register(spark: Any) -> None:
    """Register ``hive_acid`` with ``spark`` and turn on filter pushdown for Python data sources,
    which the partition pruning of reads needs (Spark refuses a reader that pushes filters
    while it is off)."""
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
    spark.dataSource.register(HiveAcidDataSource)


@dataclass(frozen=True)
class _Options:
    """The options a read or write takes, checked once with messages naming the option."""

    table: str
    metastore: str | None
    txn_id: int | None
    write_id: int | None
    valid_write_ids: str | None
    columns: tuple[str, ...] | None
    with_row_id: bool
    max_writers: int
    merge_on: tuple[str, ...] | None = None      # a change stream: MERGE each micro-batch on these keys
    op_column: str = "op"
    sequence_column: str | None = None

    @classmethod
    def parse(cls, options: dict[str, str]) -> _Options:
        opts = {k.lower(): v for k, v in options.items()}
        known = {"path", "metastore", "txnid", "writeid", "validwriteids", "columns", "withrowid", "maxwriters",
                 "mergeon", "opcolumn", "sequencecolumn",
                 "checkpointlocation"}      # Spark passes a streaming query's own option on
        unknown = sorted(set(opts) - known)
        if unknown:
            raise InvalidInputError(f"hive_acid: unknown option(s) {unknown}; known: metastore, txnId, writeId, "
                                    "validWriteIds, columns, withRowId, maxWriters, mergeOn, opColumn, "
                                    "sequenceColumn")
        table = (opts.get("path") or "").strip()
        if not table:
            raise InvalidInputError('hive_acid: name the table, as load("db.table") or save("db.table")')
        columns = None
        if opts.get("columns"):
            columns = tuple(c.strip().lower() for c in opts["columns"].split(",") if c.strip())
            if not columns:
                raise InvalidInputError(f"hive_acid: option columns={opts['columns']!r} names no column")
        if opts.get("writeid") and opts.get("validwriteids"):
            raise InvalidInputError("hive_acid: give writeId or validWriteIds, not both")
        max_writers = _int(opts, "maxwriters", "maxWriters", LOAD_STATEMENT_IDS)
        if max_writers is None or not 1 <= max_writers <= 1024:
            raise InvalidInputError(f"hive_acid: maxWriters must be 1..1024, got {max_writers}")
        merge_on = None
        if opts.get("mergeon"):
            merge_on = tuple(k.strip().lower() for k in opts["mergeon"].split(",") if k.strip())
        return cls(table, opts.get("metastore") or None, _int(opts, "txnid", "txnId"), _int(opts, "writeid", "writeId"),
                   opts.get("validwriteids") or None, columns, _bool(opts, "withrowid", "withRowId"), max_writers,
                   merge_on or None, (opts.get("opcolumn") or "op").strip().lower(),
                   (opts.get("sequencecolumn") or "").strip().lower() or None)

    def connect(self) -> Metastore:
        return Metastore(self.metastore)


def _int(opts: dict[str, str], key: str, name: str, default: int | None = None) -> int | None:
    raw = opts.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInputError(f"hive_acid: option {name}={raw!r} is not an integer") from None
    if value < 0:
        raise InvalidInputError(f"hive_acid: option {name}={raw!r} must not be negative")
    return value


def _bool(opts: dict[str, str], key: str, name: str) -> bool:
    raw = opts.get(key, "false").strip().lower()
    if raw not in _TRUE + _FALSE:
        raise InvalidInputError(f"hive_acid: option {name}={raw!r} is not true or false")
    return raw in _TRUE


class HiveAcidDataSource(DataSource):
    """``format("hive_acid")``: the table named by ``load()`` / ``save()``, at a snapshot or in
    a transaction. Options: ``metastore`` (URL; default ``$HIVE_ACID_METASTORE``), ``txnId``
    (read or write inside a txn owned elsewhere), ``writeId`` / ``validWriteIds`` (read an
    older snapshot), ``columns`` (read only these), ``withRowId`` (add ROW__ID), ``maxWriters``
    (write tasks of an append to a bucketed table, one statement id each); for a streaming
    change stream ``mergeOn``, ``opColumn`` and ``sequenceColumn`` (docs/operations.md §10)."""

    @classmethod
    def name(cls) -> str:
        return "hive_acid"

    def __init__(self, options: dict[str, str]):
        super().__init__(options)
        self.opts = _Options.parse(dict(options))

    def schema(self) -> StructType:
        with self.opts.connect() as ms:
            table = Table(ms.catalog.get_table(self.opts.table).to_spec())
        columns = list(self.opts.columns) if self.opts.columns else None
        if columns:
            for c in columns:
                table.spec.column(c)
        # every field nullable: the Arrow batches a read returns do not mark ROW__ID non-null
        return StructType([StructField(f.name, f.dataType, True)
                           for f in scan_schema(table, columns, self.opts.with_row_id).fields])

    def reader(self, schema: StructType) -> DataSourceReader:
        return HiveAcidReader(self.opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return HiveAcidWriter(self.opts, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HiveAcidStreamWriter:
        return HiveAcidStreamWriter(self.opts, schema, overwrite)


# -- reads -------------------------------------------------------------------------------------
class _Groups(InputPartition):
    """The bucket groups one read task reads (as ``BucketGroup.to_dict``)."""

    def __init__(self, groups: list[dict]):
        super().__init__(groups)
        self.groups = groups


class HiveAcidReader(DataSourceReader):
    """Plans a snapshot read on the driver: the txn, the snapshot and which partitions survive
    the pushed filters; each task reads its bucket groups with the same Arrow reader as
    ``hive-acid read`` (``spark.scan.read_group``), rows leaving as Arrow batches."""

    def __init__(self, opts: _Options, schema: StructType):
        self.opts = opts
        with opts.connect() as ms:
            info = ms.catalog.get_table(opts.table)
            self.table = Table(info.to_spec())
            self.columns, self.with_row_id = self._columns(schema)
            self.txn_id, snap = self._snapshot(ms, info)
        self.snapshot = snap
        self.request, self.fields, self.drop_first = scan_request(self.table, self.columns, self.with_row_id)
        self.partition_filters: list[Filter] = []

    def _columns(self, schema: StructType) -> tuple[list[str], bool]:
        """The columns the schema asks for (all of them by default, fewer with ``columns`` or a
        schema given to ``.schema()``), each checked against the table."""
        names, with_row_id = [], False
        for f in schema.fields:
            if f.name.upper() == ROW_ID_COLUMN:
                with_row_id = True
                continue
            col = self.table.spec.column(f.name.lower())
            if f.dataType != spark_type(col.type):
                raise InvalidInputError(f"hive_acid: column {f.name!r} of {self.table.spec.name} is {col.type}, "
                                        f"not {f.dataType.simpleString()}")
            names.append(col.name)
        return [n for n in names if n not in self.table.spec.partition_names] + [
            n for n in self.table.spec.partition_names if n in names], with_row_id

    def _snapshot(self, ms: Metastore, info: TableInfo) -> tuple[int, SnapshotSpec]:
        """Take the snapshot inside the caller's txn or a read-only txn of our own. Executors
        cannot heartbeat, so our own txn lives for the metastore's txn timeout: until then the
        cleaner keeps every file the read needs (a longer read runs inside a txn its owner
        heartbeats, passed as ``txnId``)."""
        txn_id = self.opts.txn_id
        if txn_id is None:
            txn_id = ms.txns.open_txn(agent_info=AGENT, txn_type=TxnType.READ_ONLY)
        try:
            snap = ms.txns.snapshot(info.qualified_name, txn_id=txn_id)
            wl = snap.valid_write_ids
            if self.opts.write_id is not None:
                wl = wl.as_of(self.opts.write_id)
            elif self.opts.valid_write_ids:
                given = ValidWriteIdList.parse(self.opts.valid_write_ids)
                if given.table and given.table.lower() != info.qualified_name:
                    raise InvalidInputError(f"hive_acid: validWriteIds is for {given.table}, "
                                            f"not {info.qualified_name}")
                wl = ValidWriteIdList(given.high_watermark, given.open_ids, given.aborted_ids,
                                      table=info.qualified_name, min_open_write_id=given.min_open_write_id)
        except BaseException:
            if self.opts.txn_id is None:          # our own txn: nothing will read under it
                ms.txns.abort_txn(txn_id, "hive_acid read refused its snapshot options")
            raise
        return txn_id, SnapshotSpec.of(snap, wl)

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Filters on partition columns prune partitions before anything is listed further;
        the rest go back to Spark."""
        parts = set(self.table.spec.partition_names)
        for f in filters:
            if _supported(f) and _columns_of(f) <= parts:
                self.partition_filters.append(f)
            else:
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        groups = plan_scan(self.table, self.snapshot, keep=self._keeps if self.partition_filters else None).groups
        if not groups:
            return [_Groups([])]
        n = num_scan_tasks(groups, os.cpu_count() or 1)
        size = -(-len(groups) // n)
        return [_Groups([g.to_dict() for g in groups[i:i + size]]) for i in range(0, len(groups), size)]

    def _keeps(self, part: str) -> bool:
        values = {c.name: v.as_py() for c, v in zip(self.table.spec.partition_cols,
                                                     partition_values(self.table, part))}
        return all(_evaluate(f, values) is True for f in self.partition_filters)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, _Groups):
            raise InvalidInputError(f"hive_acid: cannot read {partition!r}: not one of this reader's partitions")
        fs, _ = afs.filesystem_for(self.table.spec.location)
        snap = ValidWriteIdList.parse(self.snapshot.valid_write_ids)
        for g in partition.groups:
            yield from read_group(fs, self.table, BucketGroup.from_dict(g), snap, self.request, self.fields,
                                  self.drop_first)


_COMPARE = {EqualTo: lambda a, b: a == b, GreaterThan: lambda a, b: a > b, GreaterThanOrEqual: lambda a, b: a >= b,
            LessThan: lambda a, b: a < b, LessThanOrEqual: lambda a, b: a <= b}
_STRING = {StringStartsWith: str.startswith, StringEndsWith: str.endswith, StringContains: str.__contains__}
_ON_A_COLUMN = (EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In, IsNull,
                IsNotNull, StringStartsWith, StringEndsWith, StringContains)


def _column_of(f: Filter) -> str:
    """The column a supported filter other than ``Not`` tests (lower case)."""
    if not isinstance(f, _ON_A_COLUMN):
        raise InvalidInputError(f"hive_acid: filter {f!r} is not one that names a column")
    return ".".join(f.attribute).lower()


def _columns_of(f: Filter) -> set[str]:
    if isinstance(f, Not):
        return _columns_of(f.child)
    return {_column_of(f)}


def _supported(f: Filter) -> bool:
    if isinstance(f, Not):
        return _supported(f.child)
    return type(f) in _COMPARE or type(f) in _STRING or isinstance(f, (EqualNullSafe, In, IsNull, IsNotNull))


def _evaluate(f: Filter, values: dict[str, Any]) -> bool | None:
    """SQL's three-valued logic over one partition's values: None is unknown, and a partition
    is kept only when every filter is True."""
    if isinstance(f, Not):
        inner = _evaluate(f.child, values)
        return None if inner is None else not inner
    if not isinstance(f, _ON_A_COLUMN):
        raise InvalidInputError(f"hive_acid: filter {f!r} is not one that names a column")
    v = values[".".join(f.attribute).lower()]
    if isinstance(f, IsNull):
        return v is None
    if isinstance(f, IsNotNull):
        return v is not None
    if isinstance(f, EqualNullSafe):
        return v == f.value if v is not None and f.value is not None else v is None and f.value is None
    if v is None:
        return None
    try:
        if isinstance(f, In):
            if v in [x for x in f.value if x is not None]:
                return True
            return None if any(x is None for x in f.value) else False
        if type(f) in _STRING:
            return _STRING[type(f)](str(v), f.value)
        return None if f.value is None else _COMPARE[type(f)](v, f.value)
    except TypeError:
        return None       # Spark casts literals to the column's type; anything else is unknown


# -- writes ------------------------------------------------------------------------------------
@dataclass
class _TaskFiles(WriterCommitMessage):
    """What one write task wrote: a stats row per file (``spark.write.TaskFiles.close``)."""

    rows: list[dict]


class HiveAcidWriter(DataSourceArrowWriter):
    """One batch write = one statement in one transaction (``writetxn.WriteTxn``). ``writer()``
    (driver) opens the txn (or joins ``txnId``), allocates the write id and statement ids and
    takes the lock; each task writes its own files into staging (PER_TASK placement, as a load:
    no shuffle); ``commit()`` (driver) publishes the directories and commits, ``abort()`` removes
    staging and aborts. Spark runs ``writer()`` and ``commit()`` in two short-lived Python
    processes, so an own txn heartbeats from a process of its own until it ends
    (``heartbeat.spawn_heartbeat_process``)."""

    def __init__(self, opts: _Options, schema: StructType, overwrite: bool):
        self.opts, self.overwrite = opts, overwrite
        with opts.connect() as ms:
            info = ms.catalog.get_table(opts.table)
            table = Table(info.to_spec())
            if overwrite and table.spec.num_buckets:
                raise InvalidInputError(
                    f"hive_acid: mode('overwrite') of the bucketed table {info.qualified_name} needs one writer "
                    "per bucket of base_W; use hive-acid insert --overwrite (AcidInsertOperator(overwrite=True))")
            have = {f.name.lower(): (f.name, f.dataType) for f in schema.fields}
            self.plan = Conform(tuple(source_columns(table, have, {})))
            count = opts.max_writers if table.spec.num_buckets else 1
            txn = WriteTxn(ms, info, txn_id=opts.txn_id,
                           lock=LockType.EXCL_WRITE if overwrite else LockType.SHARED_WRITE,
                           statement_key=f"datasource_{uuid.uuid4().hex}", statement_count=count, agent_info=AGENT,
                           lock_wait=ms.config.lock_wait_timeout, purpose="hive_acid write")
            txn.begin(heartbeat="process" if txn.own else "none")   # a joined txn: its owner heartbeats it
        self.txn = txn.handle()
        self.stmt = Statement(table, self.txn.txn_id, self.txn.write_id, self.txn.statement_ids, overwrite,
                              shared_txn=not self.txn.own)
        self.staging = self.stmt.staging("datasource")
        self.overwrite_partitions = [""] if overwrite and not table.spec.partition_cols else []

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _TaskFiles:
        table = self.stmt.table
        fs, _ = afs.filesystem_for(table.spec.location)
        task = task_context().partitionId()
        if table.spec.num_buckets and task >= len(self.stmt.statement_ids):
            raise InvalidInputError(f"hive_acid: write task {task} has no statement id; an append to a bucketed "
                                    f"table takes at most maxWriters={len(self.stmt.statement_ids)} tasks: "
                                    "coalesce the DataFrame or raise maxWriters")
        files = TaskFiles(self.stmt, self.staging, fs, task, Placement.PER_TASK)
        for batch in iterator:
            files.add(conform_batch(table, self.plan, batch))
        written = files.close()
        release_freed_memory()
        return _TaskFiles(written)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Publish the tasks' directories and end the statement: commit an own txn (which stops
        its heartbeat process), or record the writes in a joined one."""
        fs, root = self.stmt.table.fs_and_root
        rows = [r for m in messages if isinstance(m, _TaskFiles) for r in m.rows]
        with self.opts.connect() as ms:
            txn = WriteTxn.resume(ms, self.txn, purpose="hive_acid commit")
            try:
                txn.record(publish(fs, root, self.staging, self.stmt, rows, self.overwrite_partitions))
                txn.commit()
            except BaseException as exc:
                txn.abort(txn.reason(exc))
                raise
            finally:
                afs.remove_dir(fs, self.staging)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        fs, _ = self.stmt.table.fs_and_root
        afs.remove_dir(fs, self.staging)
        with self.opts.connect() as ms:
            WriteTxn.resume(ms, self.txn).abort("hive_acid write failed: a Spark task failed")
