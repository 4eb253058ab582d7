"""Streaming writes of ``hive_acid``: each micro-batch is one transaction, applied exactly once.

Executors cannot open the metastore, and a write id exists only once a txn is open, so the tasks
of a micro-batch spool their rows (conformed to the table, as Arrow IPC) into the table's hidden
staging folder. The driver's ``commit(messages, batchId)`` then opens the txn, writes the
batch's delta files from the spool under its write id, publishes them and commits, recording
(query id, batch id) in the same database transaction. A batch Spark replays after a crash
finds its record and is skipped. A crash at any point leaves no visible rows: before the commit
there is no txn; after publishing but before committing, the txn times out and the cleaner
removes its files. See docs/architecture.md §7.
"""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..acid import fs as afs
from ..errors import InvalidInputError
from ..jobs.manifest import PartitionStats
from ..jobs.spec import MergeClause, SnapshotSpec, parse_merge_clause
from ..metastore import Operation, StreamBatch
from ..spark import merge
from ..spark.dml import merge_plan, source_columns
from ..spark.load import Conform, conform_batch
from ..spark.scan import Table
from ..spark.tasks import task_context
from ..spark.write import Placement, Statement, TaskFiles, publish
from ..writetxn import WriteTxn

if TYPE_CHECKING:
    from .source import _Options

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"     # local properties Spark gives a micro-batch's tasks
BATCH_ID_PROPERTY = "streaming.sql.batchId"
SPOOL_DIR = "stream"


@dataclass
class _Spooled(WriterCommitMessage):
    """One task's share of a micro-batch: its spool file (None if it had no rows)."""

    query_id: str
    path: str | None
    rows: int


OP = "__hive_acid_op"      # a change's operation in the spool: "i", "u" or "d"
SEQ = "__hive_acid_seq"    # its sequence number, when the stream has one
_OPS = {"i": "i", "insert": "i", "u": "u", "update": "u", "d": "d", "delete": "d"}


@dataclass(frozen=True)
class ChangeStream:
    """A change stream (``mergeOn`` keys, an operation column, maybe a sequence column) applied
    per micro-batch as the MERGE ``AcidMergeOperator`` would run: the last change of a key in
    the batch wins; a delete removes the row, an insert or update upserts it."""

    keys: tuple[str, ...]
    op_column: str
    sequence_column: str | None
    clauses: tuple[MergeClause, ...]
    needed: tuple[str, ...]

    @classmethod
    def plan(cls, table: Table, opts: _Options) -> ChangeStream:
        if not opts.merge_on:
            raise InvalidInputError("hive_acid: a change stream needs mergeOn, the columns its changes are keyed by")
        spec, keys = table.spec, tuple(opts.merge_on)
        placed = set(spec.bucket_columns) | set(spec.partition_names)
        if not spec.num_buckets or spec.insert_only or not placed <= set(keys):
            raise InvalidInputError(
                f"hive_acid: a change stream (mergeOn) is applied bucket by bucket: {spec.name} must be a bucketed "
                f"full-ACID table and mergeOn must include its bucket and partition columns {sorted(placed)}")
        rest = [c.name for c in spec.all_columns if c.name not in keys]
        texts = [f"WHEN MATCHED AND s.{OP} = 'd' THEN DELETE",
                 f"WHEN NOT MATCHED AND s.{OP} <> 'd' THEN INSERT *"]
        if rest:
            texts.insert(1, "WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{c} = s.{c}" for c in rest))
        clauses = tuple(parse_merge_clause(t) for t in texts)
        _, needed = merge_plan(table, list(keys), list(clauses))
        return cls(keys, opts.op_column, opts.sequence_column, clauses, tuple(needed))

    def spool_columns(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        """The operation (normalised, checked) and sequence columns of a source batch."""
        names = {n.lower(): n for n in batch.schema.names}
        raw = batch.column(names[self.op_column])
        ops = pc.utf8_lower(pc.utf8_trim_whitespace(raw.cast(pa.string())))
        known = pa.array(sorted(_OPS))
        idx = pc.index_in(ops, value_set=known)
        if idx.null_count:
            bad = pc.filter(raw, pc.is_null(idx))[0].as_py()
            raise InvalidInputError(f"hive_acid: {self.op_column} value {bad!r} is not insert, update or delete "
                                    "(or I, U, D)")
        out = {OP: pa.array([_OPS[k] for k in known.to_pylist()]).take(idx)}
        if self.sequence_column:
            out[SEQ] = batch.column(names[self.sequence_column])
        return out

    def last_changes(self, rows: pa.Table) -> pa.Table:
        """One change per key: the highest sequence number, then the latest in arrival order."""
        pos = pa.array(np.arange(rows.num_rows))
        order = [(SEQ, "ascending")] if SEQ in rows.column_names else []
        ranked = rows.append_column("__pos", pos).sort_by(order + [("__pos", "ascending")])
        ranked = ranked.append_column("__rank", pa.array(np.arange(rows.num_rows)))
        last = ranked.group_by(list(self.keys), use_threads=False).aggregate([("__rank", "max")])
        keep = ranked.take(np.sort(last.column("__rank_max").to_numpy()))      # in arrival order
        drop = [c for c in ("__pos", "__rank", SEQ) if c in keep.column_names]
        return keep.drop_columns(drop)


class HiveAcidStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("hive_acid")``: each micro-batch one txn, appended, or with
    ``mergeOn`` applied as a change stream (:class:`ChangeStream`)."""

    def __init__(self, opts: _Options, schema: StructType, overwrite: bool):
        if overwrite:
            raise InvalidInputError("hive_acid: a streaming write appends; use outputMode('append')")
        if opts.txn_id is not None:
            raise InvalidInputError("hive_acid: txnId does not apply to a streaming write: each micro-batch "
                                    "is its own transaction")
        self.opts = opts
        with opts.connect() as ms:
            info = ms.catalog.get_table(opts.table)
        self.table = Table(info.to_spec())
        self.qualified = info.qualified_name
        have = {f.name.lower(): (f.name, f.dataType) for f in schema.fields}
        self.changes = ChangeStream.plan(self.table, opts) if opts.merge_on else None
        if self.changes is not None:
            for extra in (self.changes.op_column, self.changes.sequence_column):
                if extra is not None and have.pop(extra, None) is None:
                    raise InvalidInputError(f"hive_acid: the change stream has no column {extra!r}")
            missing = [k for k in self.changes.keys if k not in have]
            if missing:
                raise InvalidInputError(f"hive_acid: the change stream has no key column(s) {missing}")
        self.plan = Conform(tuple(source_columns(self.table, have, {})))
        _, root = self.table.fs_and_root
        self.spool = afs.join(root, afs.STAGING_DIR, SPOOL_DIR)

    # -- executors ------------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Spooled:
        ctx = task_context()
        query = ctx.getLocalProperty(QUERY_ID_PROPERTY) or "unknown"
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) or "unknown"
        fs, _ = self.table.fs_and_root
        folder = afs.join(self.spool, f"{query}_b{batch}")
        path = afs.join(folder, f"part-{ctx.partitionId():05d}-{uuid.uuid4().hex[:8]}.arrow")
        rows, sink, writer = 0, None, None
        try:
            for b in iterator:
                if not b.num_rows:
                    continue
                extra = self.changes.spool_columns(b) if self.changes is not None else {}
                b = conform_batch(self.table, self.plan, b)
                for name, values in extra.items():
                    b = b.append_column(name, values)
                if writer is None:
                    fs.create_dir(folder, recursive=True)
                    sink = fs.open_output_stream(path)
                    writer = pa.ipc.new_stream(sink, b.schema)
                writer.write_batch(b)
                rows += b.num_rows
        finally:
            if writer is not None:
                writer.close()
            if sink is not None:
                sink.close()
        return _Spooled(query, path if rows else None, rows)

    # -- driver ---------------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        spooled = [m for m in messages if isinstance(m, _Spooled)]
        files = [m.path for m in spooled if m.path]
        fs, _ = self.table.fs_and_root
        try:
            if files:
                self._apply(spooled[0].query_id, batchId, files)
        finally:
            for folder in {f.rsplit("/", 1)[0] for f in files}:
                afs.remove_dir(fs, folder)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        fs, _ = self.table.fs_and_root
        for folder in {m.path.rsplit("/", 1)[0] for m in messages if isinstance(m, _Spooled) and m.path}:
            afs.remove_dir(fs, folder)

    def _apply(self, query_id: str, batch_id: int, files: list[str]) -> None:
        """The micro-batch as one txn (``writetxn.WriteTxn``): write id, delta files from the
        spool, publish, commit with its (query, batch) record; skipped if that record exists (a
        replay)."""
        started = time.perf_counter()
        with self.opts.connect() as ms:
            done = ms.txns.stream_batch(self.qualified, query_id, batch_id)
            if done is not None:
                log.info("batch %s of query %s was committed by txn %s; replay skipped", batch_id, query_id,
                         done.txn_id)
                return
            info = ms.catalog.get_table(self.qualified)
            txn = WriteTxn(ms, info, operation=Operation.INSERT if self.changes is None else Operation.UPDATE,
                           statement_key="stream", agent_info=f"hive_acid stream {query_id}",
                           lock_agent_info="hive_acid stream", lock_wait=ms.config.lock_wait_timeout,
                           purpose=f"hive_acid stream batch {batch_id}")
            with txn:
                assert txn.txn_id is not None and txn.snapshot is not None
                stmt = Statement(self.table, txn.txn_id, txn.write_id, txn.statement_ids)
                if self.changes is None:
                    parts = self._write(stmt, files)
                else:
                    parts = self._merge(stmt, SnapshotSpec.of(txn.snapshot), files)
                txn.commit(txn.record(parts), stream=StreamBatch(self.qualified, query_id, batch_id))
        log.info("batch %s of query %s: txn %s, %s rows in %.2fs", batch_id, query_id, txn.txn_id,
                 sum(w.rows_inserted for w in txn.writes), time.perf_counter() - started)

    def _write(self, stmt: Statement, files: list[str]) -> list[PartitionStats]:
        """The spooled rows as this statement's files (one writer: statement id 0 in every
        bucket of a bucketed table, writer id 0 of an unbucketed one), published."""
        fs, root = self.table.fs_and_root
        staging = stmt.staging("stream")
        try:
            out = TaskFiles(stmt, staging, fs, 0, Placement.PER_TASK)
            for path in sorted(files):
                with fs.open_input_stream(path) as f:
                    for batch in pa.ipc.open_stream(f):
                        out.add(batch)
            return publish(fs, root, staging, stmt, out.close())
        finally:
            afs.remove_dir(fs, staging)


    def _merge(self, stmt: Statement, snapshot: SnapshotSpec, files: list[str]) -> list[PartitionStats]:
        """The batch's last change per key MERGEd bucket by bucket in Arrow (``spark.merge``'s
        plan, run here on the driver: only the buckets the changes hash to are read)."""
        changes = self.changes
        if changes is None:
            raise InvalidInputError(f"hive_acid: the stream into {self.qualified} is not a change stream (mergeOn)")
        fs, root = self.table.fs_and_root
        rows = []
        for path in sorted(files):
            with fs.open_input_stream(path) as f:
                rows.append(pa.ipc.open_stream(f).read_all())
        source = changes.last_changes(pa.concat_tables(rows))
        staging, source_dir = stmt.staging("stream"), stmt.staging("stream-source")
        try:
            plan = merge.plan_buckets(self.table, snapshot, merge.Source(source.schema, source.to_batches()),
                                      list(changes.keys), list(changes.needed), {c.when for c in changes.clauses},
                                      (stmt.write_id, frozenset(stmt.statement_ids)), source_dir)
            program = merge.arrow_program(plan, list(changes.clauses))
            if program is None:
                raise InvalidInputError(f"hive_acid: the change stream's columns cannot be merged into "
                                        f"{self.qualified} in Arrow")
            out = merge.merge_groups(stmt, staging, plan, program, 0, range(len(plan.tasks)))
            return publish(fs, root, staging, stmt, out)
        finally:
            afs.remove_dir(fs, staging)
            afs.remove_dir(fs, source_dir)
