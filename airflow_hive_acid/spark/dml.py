"""INSERT [OVERWRITE], DELETE, UPDATE and MERGE as events DataFrames for ``write.write_statement``.

Every expression (WHERE, SET, MERGE conditions and values) is a Spark SQL expression; PySpark
analyses a DataFrame when it is built, so a bad column or a malformed expression fails here,
before any file is written. Values are checked against the target's column types, and updating
a partition or bucket column is refused (the row would have to move).
"""
from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.errors import AnalysisException, ParseException

from ..acid.reader import ROW_ID_COLUMN
from .protocol import JobSpecError, MergeClause, SnapshotSpec, SourceSpec
from .scan import Table, read_table
from .types import assignable, spark_type
from .write import ACTION, DELETE, INSERT, KIND, UPDATE, delete_events_df, insert_events_df, update_events_df

TARGET_ALIAS, SOURCE_ALIAS = "t", "s"
_MATCHED, _SRC, _TGT = "__in_target", "__in_source", "__clause"


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


def _analyse(df_builder, what: str):  # type: ignore[no-untyped-def]
    try:
        return df_builder()
    except (ParseException, AnalysisException) as exc:
        raise DmlError(f"{what}: {_first_line(exc)}") from None


def load_source(spark: SparkSession, source: SourceSpec) -> DataFrame:
    """A MERGE/INSERT source: a file or directory, or another ACID table at its snapshot."""
    if source.table is not None:
        if source.snapshot is None:
            raise DmlError("a source table needs a snapshot")
        return read_table(spark, source.table, source.snapshot)
    if not source.path:
        raise DmlError("a source needs a path or a table")
    fmt = (source.format or _guess_format(source.path)).lower()
    if fmt not in ("orc", "parquet", "csv", "json"):
        raise DmlError(f"unsupported source format {fmt!r}: use orc, parquet, csv or json")
    reader = spark.read.format(fmt)
    opts = dict(source.options)
    if fmt == "csv":
        opts.setdefault("header", "true")
        opts.setdefault("inferSchema", "true")
    try:
        return reader.options(**opts).load(source.path)
    except AnalysisException as exc:
        raise DmlError(f"cannot read source {source.path} as {fmt}: {_first_line(exc)}") from None


def _guess_format(path: str) -> str:
    for ext in ("orc", "parquet", "csv", "json"):
        if path.rstrip("/").lower().endswith("." + ext):
            return ext
    raise DmlError(f"cannot tell the format of {path}: pass format (orc, parquet, csv, json)")


def _typed(table: Table, name: str, value: SparkColumn, value_type: T.DataType, what: str) -> SparkColumn:
    col = table.column(name)
    target = spark_type(col.type)
    if not assignable(value_type, target):
        raise DmlError(f"{what}: column {name!r} is {col.type} but the value is {value_type.simpleString()}")
    return value.cast(target).alias(name)


def conform_source(table: Table, df: DataFrame, static_partition: dict[str, str] | None = None) -> DataFrame:
    """Source rows as the target's columns (by name, case-insensitive), type-checked; partition
    columns come from the data or from a static spec."""
    have = {f.name.lower(): f for f in df.schema.fields}
    static = static_partition or {}
    unknown = sorted(set(have) - {c.name for c in table.all_columns})
    if unknown:
        raise DmlError(f"source columns {unknown} are not columns of {table.spec.name} "
                       f"({[c.name for c in table.all_columns]})")
    out = []
    for c in table.all_columns:
        if c.name in static:
            if c.name in have:
                raise DmlError(f"partition column {c.name!r} is both in the data and in the partition spec")
            out.append(F.lit(static[c.name]).cast(spark_type(c.type)).alias(c.name))
            continue
        f = have.get(c.name)
        if f is None:
            raise DmlError(f"source has no column {c.name!r} of {table.spec.name}")
        out.append(_typed(table, c.name, F.col(f"`{f.name}`"), f.dataType, "source"))
    return df.select(*out)


# -- statements ----------------------------------------------------------------------------------
def insert(table: Table, rows: DataFrame) -> DataFrame:
    return insert_events_df(table, rows)


def delete(spark: SparkSession, table: Table, snapshot: SnapshotSpec, where: str,
           exclude: tuple[int, int]) -> DataFrame:
    if not where or not where.strip():
        raise DmlError("DELETE needs a WHERE condition (use 'true' to delete everything)")
    cond = _expr(where, "WHERE condition")
    scan = read_table(spark, table, snapshot, with_row_id=True, exclude_statement=exclude)
    return _analyse(lambda: delete_events_df(table, scan.filter(cond)), "DELETE WHERE")


def update(spark: SparkSession, table: Table, snapshot: SnapshotSpec, assignments: dict[str, str],
           where: str | None, exclude: tuple[int, int]) -> DataFrame:
    if not assignments:
        raise DmlError("UPDATE needs at least one SET assignment")
    _check_assignable_columns(table, assignments)
    scan = read_table(spark, table, snapshot, with_row_id=True, exclude_statement=exclude)
    if where:
        scan = _analyse(lambda: scan.filter(_expr(where, "WHERE condition")), "UPDATE WHERE")
    new_values = []
    for c in table.all_columns:
        if c.name in assignments:
            e = _expr(assignments[c.name], f"SET {c.name}")
            t = _analyse(lambda: scan.select(e).schema.fields[0].dataType, f"SET {c.name}")
            new_values.append(_typed(table, c.name, e, t, f"SET {c.name}"))
        else:
            new_values.append(F.col(c.name))
    return update_events_df(table, scan.select(*new_values, F.col(ROW_ID_COLUMN)))


def _check_assignable_columns(table: Table, assignments: dict[str, str]) -> None:
    for name in assignments:
        table.column(name)
        if name in table.partition_names:
            raise DmlError(f"cannot update partition column {name!r}: the row would move to another partition")
        if name in table.spec.bucket_columns:
            raise DmlError(f"cannot update bucket column {name!r}: the row would move to another bucket")


def merge(spark: SparkSession, table: Table, snapshot: SnapshotSpec, source: DataFrame, on: list[str] | str,
          clauses: list[MergeClause], exclude: tuple[int, int]) -> DataFrame:
    """MERGE INTO table t USING source s ON ... WHEN ... — as events. A target row changed by
    two source rows fails the statement (in the writer) before anything is published."""
    if not clauses:
        raise DmlError("MERGE needs at least one WHEN clause")
    for c in clauses:
        if c.action == "update":
            _check_assignable_columns(table, c.assignments)
    src_cols = {f.name.lower() for f in source.schema.fields}
    target = read_table(spark, table, snapshot, with_row_id=True, exclude_statement=exclude)
    t = target.withColumn(_MATCHED, F.lit(True)).alias(TARGET_ALIAS)
    s = source.withColumn(_SRC, F.lit(True)).alias(SOURCE_ALIAS)
    if isinstance(on, str):
        cond = _expr(on, "ON condition")
    else:
        if not on:
            raise DmlError("MERGE needs ON key columns")
        missing_t = [k for k in on if k.lower() not in {c.name for c in table.all_columns}]
        missing_s = [k for k in on if k.lower() not in src_cols]
        if missing_t or missing_s:
            raise DmlError(f"ON keys {missing_t or missing_s} are not columns of the "
                           f"{'target' if missing_t else 'source'}")
        cond = None
        for k in on:
            e = F.col(f"{TARGET_ALIAS}.{k}") == F.col(f"{SOURCE_ALIAS}.{k}")
            cond = e if cond is None else cond & e
    kinds = {c.when for c in clauses}
    how = "full_outer" if "not_matched_by_source" in kinds else ("right_outer" if "not_matched" in kinds else "inner")
    joined = _analyse(lambda: t.join(s, on=cond, how=how), "MERGE ON")
    in_t = F.col(f"{TARGET_ALIAS}.{_MATCHED}").isNotNull()
    in_s = F.col(f"{SOURCE_ALIAS}.{_SRC}").isNotNull()
    scope = {"matched": in_t & in_s, "not_matched": ~in_t & in_s, "not_matched_by_source": in_t & ~in_s}
    choice = None
    for i, c in enumerate(clauses):
        when = scope[c.when]
        if c.condition:
            when = when & F.coalesce(_expr(c.condition, f"clause {i + 1} condition"), F.lit(False))
        choice = F.when(when, F.lit(i)) if choice is None else choice.when(when, F.lit(i))
    chosen = _analyse(lambda: joined.withColumn(_TGT, choice.otherwise(F.lit(-1))), "MERGE clause")
    acting = chosen.filter(F.col(_TGT) >= 0)

    # One pass: each acting row yields a delete event (update, delete) and/or an insert event
    # (update, insert). A target row matched by two source rows yields two delete events for one
    # ROW__ID, which the writer of that bucket refuses: the cardinality check costs no extra job.
    clause = F.col(_TGT)
    new_values = []
    for col in table.all_columns:
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
        action = F.when(clause == i, F.lit({"update": UPDATE, "delete": DELETE, "insert": INSERT}[c.action])).otherwise(action)
    kinds = F.filter(F.array(F.when(deleting, F.lit(DELETE)), F.when(inserting, F.lit(INSERT))),
                     lambda k: k.isNotNull())
    old_parts = [F.col(f"{TARGET_ALIAS}.{c.name}").alias(f"__old_{c.name}") for c in table.partition_columns]
    staged = _analyse(lambda: acting.select(*new_values, *old_parts,
                                            F.col(f"{TARGET_ALIAS}.{ROW_ID_COLUMN}").alias(ROW_ID_COLUMN),
                                            action.alias(ACTION), F.explode(kinds).alias(KIND)), "MERGE")
    is_insert = F.col(KIND) == INSERT
    cols = [F.when(is_insert, F.col(c.name)).alias(c.name) for c in table.columns]
    cols += [F.when(is_insert, F.col(c.name)).otherwise(F.col(f"__old_{c.name}")).alias(c.name)
             for c in table.partition_columns]
    return staged.select(*cols, F.when(~is_insert, F.col(ROW_ID_COLUMN)).alias(ROW_ID_COLUMN), F.col(KIND),
                         F.col(ACTION))


def _clause_value(table: Table, rows: DataFrame, c: MergeClause, i: int, name: str) -> SparkColumn:
    """The value clause ``i`` gives column ``name``: its assignment, else (UPDATE) the target's
    value, else (INSERT *) the source column of the same name, else NULL."""
    col = table.column(name)
    for assigned in c.assignments:
        table.column(assigned)
    if name in c.assignments:
        e = _expr(c.assignments[name], f"clause {i + 1} value of {name}")
        t = _analyse(lambda: rows.select(e).schema.fields[0].dataType, f"clause {i + 1} value of {name}")
        return _typed(table, name, e, t, f"clause {i + 1}")
    if c.action == "update":
        return F.col(f"{TARGET_ALIAS}.{name}")
    if c.assignments:
        return F.lit(None).cast(spark_type(col.type))
    src_fields = {f.name.lower() for f in rows.select(f"{SOURCE_ALIAS}.*").schema.fields}
    if name not in src_fields:
        raise DmlError(f"clause {i + 1}: INSERT * needs source column {name!r}")
    t = rows.select(F.col(f"{SOURCE_ALIAS}.{name}")).schema.fields[0].dataType
    return _typed(table, name, F.col(f"{SOURCE_ALIAS}.{name}"), t, f"clause {i + 1}")
