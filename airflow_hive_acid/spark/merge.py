"""MERGE INTO table t USING source s ON ... WHEN ... as events, and how they reach their writers.

A target row changed by two source rows fails the statement (in the writer) before anything is
published. Conditions and values see the target row as struct ``t`` and the source row as
struct ``s`` (``t.amount``, ``s.op``), and the target is read with only the columns the
statement needs. Two ways to join:

**Bucket by bucket**, without a Spark join of the target. When the ON keys include the bucket
columns (and the partition columns), a target row and the source rows it can match hash to the
same (partition, bucket). The driver reads the source (pyarrow for Parquet/ORC files, else
Spark), hashes it as Hive would, and gives each task one bucket group with the source rows of
that group. The task reads only the key column(s) and the
columns the statement needs (with the source keys pushed into the reader), joins in Arrow, and
hands Spark the joined rows, which ``dml.merge_events`` turns into events that the same task
writes (``Placement.LOCAL``): one stage, no shuffle, nothing of the target beyond its keys
crosses into the JVM.

**By Spark joins** (``dml.spark_join``) otherwise: any ON condition, any table; the events are
then shuffled to their buckets' writers.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ..acid import fs as afs
from ..acid.bucketing import bucket_ids
from ..acid.reader import ROW_ID_COLUMN, BucketGroup, KeySet, ReadRequest, read_bucket_group
from ..acid.schema import row_id_type
from ..acid.writeids import ValidWriteIdList
from ..jobs.manifest import PartitionStats
from ..jobs.spec import MergeClause, SnapshotSpec, SourceSpec
from . import arrowexpr as ax
from . import dml, load
from .scan import Table, partition_values, plan_scan
from .session import JobSpark
from .tasks import release_freed_memory, run_tasks, task_frame, task_indices
from .types import ROW_ID_SPARK, spark_type
from .write import (
    ACTION,
    BUCKET,
    DELETE,
    INSERT,
    KIND,
    UPDATE,
    Placement,
    Stage,
    Statement,
    TaskFiles,
    _no_stage,
    group_rows,
    publish,
    row_partition,
    write_statement,
    written_rows,
)

MAX_SOURCE_FILE_BYTES = 256 * 1024 * 1024


def run_merge(spark: JobSpark, stmt: Statement, snapshot: SnapshotSpec, source: SourceSpec,
              on: list[str] | str, clauses: list[MergeClause], exclude: tuple[int, frozenset[int]],
              stage: Stage = _no_stage) -> list[PartitionStats]:
    """Run the MERGE of ``stmt``: plan ("plan"), write ("write") and publish ("publish")."""
    table = stmt.table
    fs, _ = table.fs_and_root
    source_dir = stmt.staging("merge-source")
    try:
        with stage("plan"):
            keys, needed = dml.merge_plan(table, on, clauses)
            kinds = {c.when for c in clauses}
            rows = source_rows(spark, table, source, keys, clauses) if keys is not None else None
            plan = (plan_buckets(table, snapshot, rows, keys, needed, kinds, exclude, source_dir)
                    if keys is not None and rows is not None else None)
            program = arrow_program(plan, clauses) if plan is not None else None
            events: DataFrame | None = None
            if plan is None:
                events = dml.merge_events(table, dml.spark_join(spark.session, table, snapshot,
                                                                dml.load_source(spark.session, source),
                                                                on, keys, needed, kinds, exclude), clauses)
            elif program is None:
                events = dml.merge_events(table, joined_rows(spark.session, plan), clauses)
        if plan is not None and program is not None:
            return run_in_arrow(spark.sc, stmt, plan, program, stage)
        if events is None:      # cannot happen: a MERGE not run in Arrow has its Spark plan from above
            raise RuntimeError(f"MERGE into {table.spec.name} was planned neither in Arrow nor in Spark")
        return write_statement(spark.session, stmt, events, Placement.SHUFFLE if plan is None else Placement.LOCAL, [],
                               stage)
    finally:
        afs.remove_dir(fs, source_dir)


@dataclass
class Source:
    """A MERGE source read on the driver: its schema (Spark's types) and its batches."""

    schema: pa.Schema
    batches: Iterable[pa.RecordBatch]


def source_rows(spark: JobSpark, table: Table, source: SourceSpec, keys: list[str],
                clauses: list[MergeClause]) -> Source | None:
    """The source as Arrow batches, with Spark's types, if this MERGE can run bucket by bucket;
    else None (not bucketed, keys not covering the bucket and partition columns, an INSERT
    that sets those columns from anything but the same source column, or a large source).
    Files are read a batch at a time, so the driver never holds the whole source."""
    spec = table.spec
    if not spec.num_buckets or spec.insert_only:
        return None
    if not set(spec.bucket_columns) | set(spec.partition_names) <= set(keys):
        return None
    placed = set(spec.bucket_columns) | set(spec.partition_names)
    for c in clauses:
        if c.action == "insert" and c.assignments and any(
                re.sub(r"[\s`]", "", c.assignments.get(k, "")).lower() != f"{dml.SOURCE_ALIAS}.{k}" for k in placed):
            return None
    splits = load.load_splits(source)
    if splits is not None:
        if not splits or sum(s.size for s in splits) > MAX_SOURCE_FILE_BYTES:
            return None
        schema = load.source_schema(splits[0])
        batches: Iterable[pa.RecordBatch] = (b for s in splits for b in load.read_split(s))
    else:
        df = dml.load_source(spark.session, source)
        if dml.estimated_bytes(df) > dml.BROADCAST_SOURCE_BYTES:
            return None
        rows = df.toArrow()
        schema, batches = rows.schema, rows.to_batches()
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
    names = [n.lower() for n in schema.names]
    if len(set(names)) != len(names):
        raise dml.DmlError(f"source columns {schema.names} differ only in case")
    missing = [k for k in keys if k not in names]
    if missing:
        raise dml.DmlError(f"ON keys {missing} are not columns of the source")
    spark_schema = to_arrow_schema(from_arrow_schema(pa.schema([f.with_name(n) for f, n in zip(schema, names)])))

    def as_spark(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            if b.num_rows:       # as Spark would hand them over
                yield pa.RecordBatch.from_arrays(b.columns, names=names).cast(spark_schema)

    return Source(spark_schema, as_spark(batches))


@dataclass
class BucketPlan:
    """The bucket groups a MERGE acts on, each with the source rows that hash to it (record
    batches in the Arrow IPC files of ``source_dir``)."""

    table: Table
    keys: list[str]
    needed: list[str]
    kinds: set[str]
    snapshot: str                       # the ValidWriteIdList the target is read at
    source_schema: pa.Schema
    source_dir: str
    tasks: list[tuple[BucketGroup, list[tuple[str, int]]]]   # (bucket group, (IPC file, batch) of its source rows)

    @property
    def how(self) -> str:
        return ("full outer" if "not_matched_by_source" in self.kinds else
                "right outer" if "not_matched" in self.kinds else "inner")

    @property
    def t_type(self) -> pa.StructType:
        return pa.struct([pa.field(n, self.table.spec.column(n).type.to_arrow()) for n in self.needed])


def plan_buckets(table: Table, snapshot: SnapshotSpec, source: Source, keys: list[str], needed: list[str],
                 kinds: set[str], exclude: tuple[int, frozenset[int]], source_dir: str) -> BucketPlan:
    """One task per (partition, bucket) group that can act: the source's groups, and every
    target group when unmatched target rows can act. Each source batch is written to
    ``source_dir`` as one IPC file, one record batch per group it holds rows of."""
    spec = table.spec
    fs, _ = afs.filesystem_for(table.spec.location)
    types = spec.bucket_types
    slices: dict[tuple[str, int], list[tuple[str, int]]] = {}
    fs.create_dir(source_dir, recursive=True)
    for n, batch in enumerate(source.batches):
        key_values = {}
        for k in keys:
            target = table.spec.column(k).type
            try:
                key_values[k] = batch.column(batch.schema.get_field_index(k)).cast(target.to_arrow())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise dml.DmlError(f"ON key {k!r}: source values cannot be compared with {target}: {exc}") from None
        buckets = pa.array(bucket_ids([key_values[c] for c in spec.bucket_columns], types, spec.num_buckets,
                                      spec.bucketing_version).astype(np.int32))
        name = f"batch-{n:05d}.arrow"
        with fs.open_output_stream(afs.join(source_dir, name)) as out, \
                pa.ipc.new_file(out, source.schema) as writer:
            row_groups = group_rows(batch, [key_values[c.name] for c in table.spec.partition_cols] + [buckets])
            for i, (values, rows) in enumerate(row_groups):
                slices.setdefault((row_partition(table, values[:-1]), int(values[-1])), []).append((name, i))
                writer.write_batch(rows)
        release_freed_memory()     # else each batch's freed decode buffers stay and the next grows past them
    # target groups: of the source's partitions only, unless unmatched target rows can act
    everything = "not_matched_by_source" in kinds
    parts_wanted = None if everything or not table.spec.partition_cols else sorted({p for p, _ in slices})
    plan = plan_scan(table, snapshot, parts_wanted, exclude) if parts_wanted != [] else None
    groups = {(g.partition, g.bucket): g for g in plan.groups} if plan is not None else {}
    wanted = list(groups) if everything else list(slices)
    tasks = [(groups.get(k, BucketGroup(*k)), slices.get(k, [])) for k in sorted(wanted)]
    snap_text = (plan.snapshot if plan is not None else ValidWriteIdList.parse(snapshot.valid_write_ids)).to_string()
    return BucketPlan(table, keys, needed, kinds, snap_text, source.schema, source_dir, tasks)


def joined_rows(spark: SparkSession, plan: BucketPlan) -> DataFrame:
    """The joined rows, for Spark to evaluate the clauses on (``dml.merge_events``)."""
    schema = _joined_schema(plan.table, plan.needed, plan.source_schema)
    if not plan.tasks:
        return spark.createDataFrame([], schema)
    return task_frame(spark, len(plan.tasks)).mapInArrow(_join_task(plan), schema)


def run_in_arrow(sc: SparkContext, stmt: Statement, plan: BucketPlan, program: list[ClauseProgram],
                 stage: Stage) -> list[PartitionStats]:
    """Each task joins, evaluates the clauses and writes its bucket: nothing crosses the JVM."""
    fs, root = stmt.table.fs_and_root
    staging = stmt.staging()
    try:
        with stage("write") as progress:
            rows = run_tasks(sc, len(plan.tasks), _merge_task(stmt, staging, plan, program))
            progress["rows"] = written_rows(rows)
        with stage("publish"):
            return publish(fs, root, staging, stmt, rows)
    finally:
        afs.remove_dir(fs, staging)


def _joined_schema(table: Table, needed: list[str], source: pa.Schema) -> T.StructType:
    from pyspark.sql.pandas.types import from_arrow_type
    t = T.StructType([T.StructField(n, spark_type(table.spec.column(n).type), True) for n in needed])
    s = T.StructType([T.StructField(f.name, from_arrow_type(f.type), True) for f in source])
    return T.StructType([
        T.StructField(dml.TARGET_ALIAS, t, True), T.StructField(dml.RID, ROW_ID_SPARK, True),
        T.StructField(dml.IN_TARGET, T.BooleanType(), True), T.StructField(dml.SOURCE_ALIAS, s, True),
        T.StructField(dml.IN_SOURCE, T.BooleanType(), True), T.StructField(BUCKET, T.IntegerType(), False)])


@dataclass
class Joined:
    """One group's joined rows: target row (needed columns) and ROW__ID, source row, and
    whether each side is there."""

    t: pa.StructArray
    rid: pa.StructArray
    in_t: pa.Array
    s: pa.StructArray
    in_s: pa.Array

    def __len__(self) -> int:
        return len(self.in_t)


def _join(fs: pafs.FileSystem, plan: BucketPlan, snap: ValidWriteIdList, group: BucketGroup,
          source: pa.Table) -> Joined:
    """Read the group's target rows (only those whose key is in the source, where unmatched
    target rows cannot act) and join them with the group's source rows in Arrow."""
    table, keys, needed = plan.table, plan.keys, plan.needed
    src_keys = [source.column(k).combine_chunks().cast(table.spec.column(k).type.to_arrow()) for k in keys]
    data_cols = [n for n in needed if n not in table.spec.partition_names]
    key_filter = None
    data_keys = [k for k in keys if k not in table.spec.partition_names]
    if plan.how != "full outer" and len(data_keys) == 1:
        key_filter = (data_keys[0], KeySet(src_keys[keys.index(data_keys[0])]))
    request = ReadRequest(table.spec.data_columns, data_cols, True, key_filter)
    batches = list(read_bucket_group(fs, group, snap, request)) if group.row_files or group.originals else []
    target = (pa.Table.from_batches(batches) if batches else
              pa.schema([pa.field(n, table.spec.column(n).type.to_arrow()) for n in data_cols]
                        + [pa.field(ROW_ID_COLUMN, row_id_type())]).empty_table())
    consts = dict(zip(table.spec.partition_names, partition_values(table, group.partition))) if group.partition else {}
    t_cols = [pa.array([consts[n].as_py()] * target.num_rows, consts[n].type) if n in consts
              else target.column(n).combine_chunks() for n in needed]
    names = [f"k{i}" for i in range(len(keys))]
    left = pa.table([t_cols[needed.index(k)] for k in keys] + [pa.array(np.arange(target.num_rows))],
                    names=names + ["ti"])
    right = pa.table(src_keys + [pa.array(np.arange(source.num_rows))], names=names + ["si"])
    pairs = left.join(right, keys=names, join_type=plan.how, use_threads=False)
    ti, si = pairs.column("ti").combine_chunks(), pairs.column("si").combine_chunks()
    t = pa.StructArray.from_arrays(t_cols, fields=list(plan.t_type))
    s = pa.StructArray.from_arrays([source.column(i).combine_chunks() for i in range(source.num_columns)],
                                   fields=list(source.schema))
    rid = target.column(ROW_ID_COLUMN).combine_chunks() if target.num_rows else pa.array([], row_id_type())
    return Joined(t.take(ti), rid.take(ti), ti.is_valid(), s.take(si), si.is_valid())


def _tasks(fs: pafs.FileSystem, plan: BucketPlan, indices: Iterable[int]) -> Iterator[tuple[BucketGroup, pa.Table]]:
    """Each task's bucket group and its source rows, read from the plan's IPC files."""
    for task in indices:
        group, src = plan.tasks[task]
        parts = []
        for name, i in src:
            with fs.open_input_file(afs.join(plan.source_dir, name)) as f:
                parts.append(pa.ipc.open_file(f).get_batch(i))
        yield group, pa.Table.from_batches(parts, schema=plan.source_schema)


def _join_task(plan: BucketPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    location = plan.table.spec.location

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, _ = afs.filesystem_for(location)
        snap = ValidWriteIdList.parse(plan.snapshot)
        for group, source in _tasks(fs, plan, task_indices(batches)):
            j = _join(fs, plan, snap, group, source)
            if len(j):
                yield pa.RecordBatch.from_arrays(
                    [j.t, j.rid, pc.if_else(j.in_t, True, None), j.s, pc.if_else(j.in_s, True, None),
                     pa.array(np.full(len(j), group.bucket, dtype=np.int32))],
                    names=[dml.TARGET_ALIAS, dml.RID, dml.IN_TARGET, dml.SOURCE_ALIAS, dml.IN_SOURCE, BUCKET])

    return run


# -- the clauses in Arrow ----------------------------------------------------------------------
@dataclass(frozen=True)
class ClauseProgram:
    """One WHEN clause as Arrow expressions: its scope, condition, and the value of every column
    of a row it inserts (INSERT, or the new version of an UPDATE)."""

    when: str
    action: str
    condition: ax.Node | None
    values: tuple[tuple[str, ax.Node], ...]


def arrow_program(plan: BucketPlan, clauses: list[MergeClause]) -> list[ClauseProgram] | None:
    """The clauses as :class:`ClauseProgram`, or None if any expression is beyond
    :mod:`.arrowexpr` or any value would need a cast Spark does differently (Spark then
    evaluates them, and reports whatever is wrong with them)."""
    table = plan.table
    scope = ax.Scope.of_types({dml.TARGET_ALIAS: plan.t_type, dml.SOURCE_ALIAS: pa.struct(list(plan.source_schema))})
    out = []
    try:
        for c in clauses:
            cond = ax.parse(c.condition) if c.condition else None
            if cond is not None and not pa.types.is_boolean(ax.type_of(cond, scope)):
                return None
            values = []
            if c.action != "delete":
                for col in table.spec.all_columns:
                    if col.name in c.assignments:
                        node = ax.parse(c.assignments[col.name])
                    elif c.action == "update":
                        node = ax.Node("col", value=(dml.TARGET_ALIAS, col.name))
                    elif c.assignments:
                        node = ax.Node("lit", value=(None, "null"))
                    else:                                       # INSERT *
                        node = ax.Node("col", value=(dml.SOURCE_ALIAS, col.name))
                    if not ax.assignable(node, scope, col.type.to_arrow()):
                        return None
                    values.append((col.name, node))
            out.append(ClauseProgram(c.when, c.action, cond, tuple(values)))
    except ax.Unsupported:
        return None
    return out


def merge_groups(stmt: Statement, staging: str, plan: BucketPlan, program: list[ClauseProgram], task: int,
                 indices: Iterable[int]) -> list[dict]:
    """Join, evaluate and write the bucket groups ``plan.tasks[i]`` of ``indices``: one task's
    work in a MERGE job, or all of a change stream's micro-batch on the driver. Returns the
    stats row of every file written."""
    fs, _ = afs.filesystem_for(plan.table.spec.location)
    snap = ValidWriteIdList.parse(plan.snapshot)
    files = TaskFiles(stmt, staging, fs, task, Placement.LOCAL)
    for group, source in _tasks(fs, plan, indices):
        for events in _apply(plan.table, program, _join(fs, plan, snap, group, source), group.bucket):
            files.add(events)
    return files.close()


def _merge_task(stmt: Statement, staging: str, plan: BucketPlan,
                program: list[ClauseProgram]) -> Callable[[int], list[dict]]:
    def run(task: int) -> list[dict]:
        return merge_groups(stmt, staging, plan, program, task, [task])

    return run


def _apply(table: Table, program: list[ClauseProgram], j: Joined, bucket: int) -> Iterator[pa.RecordBatch]:
    """The events of one group: each joined row takes the first clause whose scope and
    condition hold (SQL order), as ``dml.merge_events`` decides in Spark."""
    n = len(j)
    if not n:
        return
    in_t = j.in_t.to_numpy(zero_copy_only=False)
    in_s = j.in_s.to_numpy(zero_copy_only=False)
    scopes = {"matched": in_t & in_s, "not_matched": ~in_t & in_s, "not_matched_by_source": in_t & ~in_s}
    t = pa.StructArray.from_arrays(j.t.flatten(), fields=list(j.t.type))        # NULL fields where no row
    s = pa.StructArray.from_arrays(j.s.flatten(), fields=list(j.s.type))
    choice = np.full(n, -1, dtype=np.int32)
    for i, c in enumerate(program):
        cand = scopes[c.when] & (choice < 0)
        if c.condition is not None and cand.any():
            # only on the rows Spark evaluates it on (in scope, no earlier clause taken): an
            # integer overflow elsewhere must not fail the statement
            rows = np.flatnonzero(cand)
            idx = pa.array(rows)
            sub = ax.Scope({dml.TARGET_ALIAS: t.take(idx), dml.SOURCE_ALIAS: s.take(idx)})
            holds = _broadcast(ax.evaluate(c.condition, sub), len(rows))
            cand[rows] = pc.fill_null(holds, False).to_numpy(zero_copy_only=False)
        choice[cand] = i
    part_names = table.spec.partition_names
    for i, c in enumerate(program):
        sel = np.flatnonzero(choice == i)
        if not len(sel):
            continue
        code = {"update": UPDATE, "delete": DELETE, "insert": INSERT}[c.action]
        idx = pa.array(sel)
        m = len(sel)
        common = {ACTION: pa.array([code] * m, pa.string()), BUCKET: pa.array(np.full(m, bucket, dtype=np.int32))}
        if c.action in ("update", "delete"):
            old = t.take(idx)
            yield pa.RecordBatch.from_pydict({
                **{p: old.field(p) for p in part_names}, ROW_ID_COLUMN: j.rid.take(idx),
                KIND: pa.array([DELETE] * m, pa.string()), **common})
        if c.action in ("update", "insert"):
            sub = ax.Scope({dml.TARGET_ALIAS: t.take(idx), dml.SOURCE_ALIAS: s.take(idx)})
            cols = {}
            for name, node in c.values:
                target = table.spec.column(name).type.to_arrow()
                cols[name] = _broadcast(ax.assign(ax.evaluate(node, sub), target), m)
            yield pa.RecordBatch.from_pydict({**cols, **common})


def _broadcast(v: pa.Array | pa.Scalar, n: int) -> pa.Array:
    if isinstance(v, pa.Scalar):
        return pa.array([v.as_py()] * n, v.type)
    return v
