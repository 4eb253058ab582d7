"""INSERT [OVERWRITE], DELETE, UPDATE and MERGE as events DataFrames for ``write.write_statement``.

Every expression (WHERE, SET, MERGE conditions and values) is a Spark SQL expression; PySpark
analyses a DataFrame when it is built, so a bad column or a malformed expression fails here,
before any file is written. Values are checked against the target's column types, and updating
a partition or bucket column is refused (the row would have to move).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark import StorageLevel
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..acid import fs as afs
from ..acid.names import is_hidden
from ..acid.reader import ROW_ID_COLUMN
from ..jobs.spec import JobSpecError, MergeClause, SnapshotSpec, SourceSpec
from .scan import Table, read_table
from .types import assignable, spark_type
from .write import ACTION, BUCKET, DELETE, INSERT, KIND, UPDATE, delete_events_df, insert_events_df, update_events_df

R = TypeVar("R")

TARGET_ALIAS, SOURCE_ALIAS = "t", "s"
IN_TARGET, IN_SOURCE, _TGT, RID = "__in_target", "__in_source", "__clause", "__rid"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_SOURCE_REF = re.compile(r"\b" + SOURCE_ALIAS + r"\s*\.\s*`?[A-Za-z_][A-Za-z0-9_]*`?")


class DmlError(JobSpecError):
    """A statement that cannot run: unknown column, type mismatch, bad expression, duplicate
    source keys for one target row..."""


def _expr(text: str, what: str) -> SparkColumn:
    try:
        return F.expr(text)
    except (ParseException, AnalysisException) as exc:
        raise DmlError(f"malformed {what} {text!r}: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _analyse(df_builder: Callable[[], R], what: str) -> R:
    try:
        return df_builder()
    except (ParseException, AnalysisException) as exc:
        raise DmlError(f"{what}: {_first_line(exc)}") from None


def _type_of(rows: DataFrame, value: SparkColumn) -> T.DataType:
    return rows.select(value).schema.fields[0].dataType


def load_source(spark: SparkSession, source: SourceSpec) -> DataFrame:
    """A MERGE/INSERT source: a file or directory, or another ACID table at its snapshot."""
    source.validate()       # a table with its snapshot, or a path
    if source.table is not None and source.snapshot is not None:
        return read_table(spark, source.table, source.snapshot)
    if not source.path:
        raise DmlError("a source is a path or an ACID table at a snapshot; this one is neither")
    fmt = source.format_name
    check_source_files(source.path, fmt)
    opts = dict(source.options)
    if fmt == "csv":
        opts.setdefault("header", "true")
        opts.setdefault("inferSchema", "true")
    try:
        return spark.read.format(fmt).options(**opts).load(source.path)
    except AnalysisException as exc:
        raise DmlError(f"cannot read source {source.path} as {fmt}: {_first_line(exc)}") from None


# The bytes every file of a binary format starts with: a file without them is some other format
# (Spark would fail later, deep in a task, with e.g. "footer is too large").
_MAGIC = {"parquet": b"PAR1", "orc": b"ORC"}


def check_source_files(path: str, fmt: str) -> list[pafs.FileInfo]:
    """The data files of a source path (a file, or a directory tree without hidden entries),
    each checked to be the format it claims to be."""
    fs, root = afs.filesystem_for(path)
    info = fs.get_file_info(root)
    if info.type == pafs.FileType.File:
        files = [info]
    elif info.type == pafs.FileType.Directory:
        files = [f for f in fs.get_file_info(pafs.FileSelector(root, recursive=True))
                 if f.type == pafs.FileType.File
                 and not any(is_hidden(part) for part in f.path[len(root):].strip("/").split("/"))]
    else:
        raise DmlError(f"source {path} does not exist")
    magic = _MAGIC.get(fmt)
    if magic is None:
        return files
    for f in files:
        with fs.open_input_stream(f.path) as fh:
            head = fh.read(len(magic))
        if head != magic:
            raise DmlError(f"source file {f.path} is not a {fmt.upper()} file (it does not start with "
                           f"{magic.decode()}): give the right format")
    return files


def _typed(table: Table, name: str, value: SparkColumn, value_type: T.DataType, what: str) -> SparkColumn:
    col = table.spec.column(name)
    target = spark_type(col.type)
    if not assignable(value_type, target):
        raise DmlError(f"{what}: column {name!r} is {col.type} but the value is {value_type.simpleString()}")
    return value.cast(target).alias(name)


def source_columns(table: Table, source: dict[str, tuple[str, T.DataType]], static: dict[str, str]
                   ) -> list[tuple[str, str | None, str | None]]:
    """Where each table column comes from: ``(column, source column, None)`` or ``(column, None,
    static partition value)``. ``source`` maps lower-cased source names to (name, Spark type);
    names match case-insensitively and every type must be assignable to its column's."""
    unknown = sorted(set(source) - {c.name for c in table.spec.all_columns})
    if unknown:
        raise DmlError(f"source columns {unknown} are not columns of {table.spec.name} "
                       f"({[c.name for c in table.spec.all_columns]})")
    out: list[tuple[str, str | None, str | None]] = []
    for c in table.spec.all_columns:
        if c.name in static:
            if c.name in source:
                raise DmlError(f"partition column {c.name!r} is both in the data and in the partition spec")
            out.append((c.name, None, static[c.name]))
            continue
        if c.name not in source:
            raise DmlError(f"source has no column {c.name!r} of {table.spec.name}")
        name, value_type = source[c.name]
        if not assignable(value_type, spark_type(c.type)):
            raise DmlError(f"source: column {c.name!r} is {c.type} but the value is {value_type.simpleString()}")
        out.append((c.name, name, None))
    return out


def conform_source(table: Table, df: DataFrame, static_partition: dict[str, str] | None = None) -> DataFrame:
    """Source rows as the target's columns (by name, case-insensitive), type-checked; partition
    columns come from the data or from a static spec."""
    have = {f.name.lower(): (f.name, f.dataType) for f in df.schema.fields}
    return df.select(*[
        (F.lit(value) if src is None else F.col(f"`{src}`")).cast(spark_type(table.spec.column(name).type)).alias(name)
        for name, src, value in source_columns(table, have, static_partition or {})])


# -- statements ----------------------------------------------------------------------------------
def insert(table: Table, rows: DataFrame) -> DataFrame:
    return insert_events_df(table, rows)


def delete(spark: SparkSession, table: Table, snapshot: SnapshotSpec, where: str,
           exclude: tuple[int, frozenset[int]]) -> DataFrame:
    if not where or not where.strip():
        raise DmlError("DELETE needs a WHERE condition (use 'true' to delete everything)")
    cond = _expr(where, "WHERE condition")
    scan = read_table(spark, table, snapshot, with_row_id=True, exclude_statement=exclude)
    return _analyse(lambda: delete_events_df(table, scan.filter(cond)), "DELETE WHERE")


def update(spark: SparkSession, table: Table, snapshot: SnapshotSpec, assignments: dict[str, str],
           where: str | None, exclude: tuple[int, frozenset[int]]) -> DataFrame:
    if not assignments:
        raise DmlError("UPDATE needs at least one SET assignment")
    _check_assignable_columns(table, assignments)
    scan = read_table(spark, table, snapshot, with_row_id=True, exclude_statement=exclude)
    if where:
        scan = _analyse(lambda: scan.filter(_expr(where, "WHERE condition")), "UPDATE WHERE")
    new_values = []
    for c in table.spec.all_columns:
        if c.name in assignments:
            e = _expr(assignments[c.name], f"SET {c.name}")
            t = _analyse(partial(_type_of, scan, e), f"SET {c.name}")
            new_values.append(_typed(table, c.name, e, t, f"SET {c.name}"))
        else:
            new_values.append(F.col(c.name))
    return update_events_df(table, scan.select(*new_values, F.col(ROW_ID_COLUMN)))


def _check_assignable_columns(table: Table, assignments: dict[str, str]) -> None:
    for name in assignments:
        table.spec.column(name)
        if name in table.spec.partition_names:
            raise DmlError(f"cannot update partition column {name!r}: the row would move to another partition")
        if name in table.spec.bucket_columns:
            raise DmlError(f"cannot update bucket column {name!r}: the row would move to another bucket")


BROADCAST_SOURCE_BYTES = 512 * 1024 * 1024


def merge_plan(table: Table, on: list[str] | str, clauses: list[MergeClause]) -> tuple[list[str] | None, list[str]]:
    """Check a MERGE's clauses and ON keys against the target; the key columns (None for an ON
    condition) and the target columns the statement needs."""
    if not clauses:
        raise DmlError("MERGE needs at least one WHEN clause")
    for c in clauses:
        if c.action == "update":
            _check_assignable_columns(table, c.assignments)
        for name in c.assignments:
            table.spec.column(name)
    keys: list[str] | None = None
    if isinstance(on, str):
        if not on.strip():
            raise DmlError("MERGE needs an ON condition or key columns")
        texts = [on]
    else:
        keys = [k.lower() for k in on]
        if not keys:
            raise DmlError("MERGE needs ON key columns")
        missing_t = [k for k in keys if k not in {c.name for c in table.spec.all_columns}]
        if missing_t:
            raise DmlError(f"ON keys {missing_t} are not columns of the target")
        texts = []
    texts += [c.condition for c in clauses if c.condition] + [v for c in clauses for v in c.assignments.values()]
    return keys, _needed_target_columns(table, clauses, keys, texts)


def spark_join(spark: SparkSession, table: Table, snapshot: SnapshotSpec, source: DataFrame, on: list[str] | str,
               keys: list[str] | None, needed: list[str], kinds: set[str],
               exclude: tuple[int, frozenset[int]]) -> DataFrame:
    """The joined rows of a MERGE by Spark joins. When the keys are columns and the source is
    small enough it is broadcast, so the table is never shuffled: matched rows by an inner join,
    unmatched source rows by an anti join against the matched keys, unmatched target rows by an
    anti join against the source keys; and the source keys are pushed into the target's readers."""
    src_fields = {f.name.lower(): f.name for f in source.schema.fields}
    missing_s = [k for k in keys or [] if k not in src_fields]
    if missing_s:
        raise DmlError(f"ON keys {missing_s} are not columns of the source")
    pushed = _pushed_keys(table, source, keys, kinds)
    target = read_table(spark, table, snapshot, columns=needed, with_row_id=True, exclude_statement=exclude,
                        key_filter=pushed)
    t_struct = F.struct(*[F.col(n) for n in needed])
    tgt = target.select(t_struct.alias(TARGET_ALIAS), F.col(ROW_ID_COLUMN).alias(RID), F.lit(True).alias(IN_TARGET))
    src = source.select(F.struct(*[F.col(f"`{n}`").alias(n.lower()) for n in source.columns]).alias(SOURCE_ALIAS),
                        F.lit(True).alias(IN_SOURCE))
    if pushed is not None:
        # Only target rows whose key is in the source are read: few, and used twice below.
        tgt = tgt.persist(StorageLevel.MEMORY_AND_DISK)
        tgt.count()
    if keys is not None and estimated_bytes(source) <= BROADCAST_SOURCE_BYTES:
        return _broadcast_join(tgt, src, keys, kinds, small_target=pushed is not None)
    if isinstance(on, str):
        cond = _expr(on, "ON condition")
    elif keys is not None:
        cond = _key_condition(keys)
    else:
        raise DmlError(f"MERGE ON {on!r} names no key columns")
    how = "full_outer" if "not_matched_by_source" in kinds else (
        "right_outer" if "not_matched" in kinds else "inner")
    return _analyse(lambda: tgt.join(src, on=cond, how=how), "MERGE ON")


def merge_events(table: Table, joined: DataFrame, clauses: list[MergeClause]) -> DataFrame:
    """The events of a MERGE from its joined rows (``t``, ``__rid``, ``__in_target``, ``s``,
    ``__in_source``, and ``__bucket`` when each row's bucket is already known): the first
    clause (in SQL order) whose scope and condition hold acts on each row."""
    in_t = F.col(IN_TARGET).isNotNull()
    in_s = F.col(IN_SOURCE).isNotNull()
    scope = {"matched": in_t & in_s, "not_matched": ~in_t & in_s, "not_matched_by_source": in_t & ~in_s}
    choice = None
    for i, c in enumerate(clauses):
        when = scope[c.when]
        if c.condition:
            when = when & F.coalesce(_expr(c.condition, f"clause {i + 1} condition"), F.lit(False))
        choice = F.when(when, F.lit(i)) if choice is None else choice.when(when, F.lit(i))
    if choice is None:
        raise DmlError("MERGE needs at least one WHEN clause")
    chosen = _analyse(lambda: joined.withColumn(_TGT, choice.otherwise(F.lit(-1))), "MERGE clause")
    acting = chosen.filter(F.col(_TGT) >= 0)
    # One pass: each acting row yields a delete event (update, delete) and/or an insert event
    # (update, insert). A target row matched by two source rows yields two delete events for one
    # ROW__ID, which the writer of that bucket refuses: the cardinality check costs no extra job.
    clause = F.col(_TGT)
    new_values = []
    for col in table.spec.all_columns:
        expr = None
        for i, c in enumerate(clauses):
            if c.action == "delete":
                continue
            v = _clause_value(table, acting, c, i, col.name)
            expr = F.when(clause == i, v) if expr is None else expr.when(clause == i, v)
        target_type = spark_type(col.type)
        new_values.append((expr if expr is not None else F.lit(None)).cast(target_type).alias(col.name))
    deleting = F.lit(False)
    inserting = F.lit(False)
    action = F.lit(INSERT)
    for i, c in enumerate(clauses):
        if c.action in ("update", "delete"):
            deleting = deleting | (clause == i)
        if c.action in ("update", "insert"):
            inserting = inserting | (clause == i)
        code = {"update": UPDATE, "delete": DELETE, "insert": INSERT}[c.action]
        action = F.when(clause == i, F.lit(code)).otherwise(action)
    # (explode, then drop the NULL kind: a higher-order filter() would not be code-generated)
    kinds = F.array(F.when(deleting, F.lit(DELETE)), F.when(inserting, F.lit(INSERT)))
    old_parts = [F.col(f"{TARGET_ALIAS}.{c.name}").alias(f"__old_{c.name}") for c in table.spec.partition_cols]
    bucket = [F.col(BUCKET)] if BUCKET in joined.columns else []
    staged = _analyse(lambda: acting.select(*new_values, *old_parts, F.col(RID).alias(ROW_ID_COLUMN),
                                            action.alias(ACTION), F.explode(kinds).alias(KIND), *bucket)
                      .filter(F.col(KIND).isNotNull()), "MERGE")
    is_insert = F.col(KIND) == INSERT
    cols = [F.when(is_insert, F.col(c.name)).alias(c.name) for c in table.spec.data_columns]
    cols += [F.when(is_insert, F.col(c.name)).otherwise(F.col(f"__old_{c.name}")).alias(c.name)
             for c in table.spec.partition_cols]
    return staged.select(*cols, F.when(~is_insert, F.col(ROW_ID_COLUMN)).alias(ROW_ID_COLUMN), F.col(KIND),
                         F.col(ACTION), *bucket)


def _needed_target_columns(table: Table, clauses: list[MergeClause], keys: list[str] | None,
                           texts: list[str]) -> list[str]:
    """Target columns the MERGE reads: keys, partition columns, every column an expression may
    name (any matching identifier: too many is harmless), and those an UPDATE carries over."""
    names = [c.name for c in table.spec.all_columns]
    want = set(keys or []) | set(table.spec.partition_names)
    for text in texts:
        text = _SOURCE_REF.sub(" ", _STRING.sub(" ", text))   # s.x and 'literals' name no target column
        want |= {tok.lower() for tok in _IDENT.findall(text)} & set(names)
    for c in clauses:
        if c.action == "update":
            want |= set(names) - set(c.assignments)
    return [n for n in names if n in want]


MAX_PUSHED_KEYS = 20_000_000


def _pushed_keys(table: Table, source: DataFrame, keys: list[str] | None,
                 kinds: set[str]) -> tuple[str, pa.Array] | None:
    """The source's key values, when the target rows that can matter are exactly those whose
    key is among them (one data key column, no NOT MATCHED BY SOURCE): the readers then drop
    every other row before it reaches Spark."""
    if keys is None or len(keys) != 1 or "not_matched_by_source" in kinds or keys[0] in table.spec.partition_names:
        return None
    col = table.spec.column(keys[0])
    if not col.type.is_primitive or col.type.name in ("float", "double", "binary", "timestamp"):
        return None
    if estimated_bytes(source) > BROADCAST_SOURCE_BYTES:
        return None
    src_name = next(n for n in source.columns if n.lower() == keys[0])
    values = source.select(F.col(f"`{src_name}`").cast(spark_type(col.type)).alias("k")).toArrow().column(0)
    if len(values) > MAX_PUSHED_KEYS:
        return None
    return keys[0], pc.unique(values.combine_chunks().drop_null()).cast(col.type.to_arrow())


def _key_condition(keys: list[str]) -> SparkColumn:
    cond = None
    for k in keys:
        e = F.col(f"{TARGET_ALIAS}.{k}") == F.col(f"{SOURCE_ALIAS}.{k}")
        cond = e if cond is None else cond & e
    if cond is None:
        raise DmlError("MERGE ON needs at least one key column")
    return cond


def estimated_bytes(df: DataFrame) -> int:
    try:
        return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    except Exception:  # noqa: BLE001 - no estimate: assume large, take the shuffle plan
        return 1 << 62


def _broadcast_join(tgt: DataFrame, src: DataFrame, keys: list[str], kinds: set[str],
                    small_target: bool = False) -> DataFrame:
    """The MERGE join without shuffling the table: each part joins the table (streamed) with a
    broadcast of the source or of the matched keys."""
    k_t = [F.col(f"{TARGET_ALIAS}.{k}").alias(f"__k{i}") for i, k in enumerate(keys)]
    k_s = [F.col(f"{SOURCE_ALIAS}.{k}").alias(f"__k{i}") for i, k in enumerate(keys)]
    kcols = [f"__k{i}" for i in range(len(keys))]
    t = tgt.select("*", *k_t)
    s = src.select("*", *k_s)
    cols = [TARGET_ALIAS, RID, IN_TARGET, SOURCE_ALIAS, IN_SOURCE]
    null_t = [F.lit(None).cast(tgt.schema[TARGET_ALIAS].dataType).alias(TARGET_ALIAS),
              F.lit(None).cast(tgt.schema[RID].dataType).alias(RID), F.lit(None).cast("boolean").alias(IN_TARGET)]
    null_s = [F.lit(None).cast(src.schema[SOURCE_ALIAS].dataType).alias(SOURCE_ALIAS),
              F.lit(None).cast("boolean").alias(IN_SOURCE)]
    parts = []
    needs_matched = "matched" in kinds or "not_matched" in kinds
    if needs_matched:
        matched = t.join(F.broadcast(s.select(SOURCE_ALIAS, IN_SOURCE, *kcols)), on=kcols, how="inner")
        if "not_matched" in kinds and not small_target:
            # used twice (its rows, and its keys against the source): scan the table once
            matched = matched.persist(StorageLevel.MEMORY_AND_DISK)
            matched.count()
        if "matched" in kinds:
            parts.append(matched.select(*cols))
        if "not_matched" in kinds:
            # matched keys are few (at most the source's): broadcast them back against the source
            seen = matched.select(*kcols).distinct()
            parts.append(s.join(F.broadcast(seen), on=kcols, how="left_anti").select(*null_t, SOURCE_ALIAS, IN_SOURCE))
    if "not_matched_by_source" in kinds:
        skeys = s.select(*kcols).distinct()
        parts.append(t.join(F.broadcast(skeys), on=kcols, how="left_anti")
                     .select(TARGET_ALIAS, RID, IN_TARGET, *null_s))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _clause_value(table: Table, rows: DataFrame, c: MergeClause, i: int, name: str) -> SparkColumn:
    """The value clause ``i`` gives column ``name``: its assignment, else (UPDATE) the target's
    value, else (INSERT *) the source column of the same name, else NULL."""
    col = table.spec.column(name)
    if name in c.assignments:
        e = _expr(c.assignments[name], f"clause {i + 1} value of {name}")
        t = _analyse(lambda: rows.select(e).schema.fields[0].dataType, f"clause {i + 1} value of {name}")
        return _typed(table, name, e, t, f"clause {i + 1}")
    if c.action == "update":
        return F.col(f"{TARGET_ALIAS}.{name}")
    if c.assignments:
        return F.lit(None).cast(spark_type(col.type))
    src_type = rows.schema[SOURCE_ALIAS].dataType
    if not isinstance(src_type, T.StructType):
        raise DmlError(f"clause {i + 1}: the joined rows' {SOURCE_ALIAS!r} column is {src_type}, not a struct")
    src_fields = {f.name for f in src_type.fields}
    if name not in src_fields:
        raise DmlError(f"clause {i + 1}: INSERT * needs source column {name!r}")
    t = rows.select(F.col(f"{SOURCE_ALIAS}.{name}")).schema.fields[0].dataType
    return _typed(table, name, F.col(f"{SOURCE_ALIAS}.{name}"), t, f"clause {i + 1}")
