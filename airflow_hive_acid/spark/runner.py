"""Run a job spec in a SparkSession and produce its manifest — what every ``jobs/*.py`` entry
script does, and what tests call in-process with a shared local session."""
from __future__ import annotations

import argparse
import json
import sys
import time

from pyspark.sql import SparkSession

from ..acid.errors import AcidError
from ..acid.partitions import make_part_name, parse_spec_text
from . import compact, dml, load, merge
from .protocol import JobSpec, JobSpecError, Manifest, MergeClause, SourceSpec, parse_merge_clause
from .scan import Table, read_table, select_partitions
from .write import Placement, Statement, write_statement


def run_job(spark: SparkSession, spec: JobSpec) -> Manifest:
    """Execute ``spec``; errors a user can act on come back in the manifest, not as a trace."""
    started = time.time()
    manifest = Manifest(job=spec.job, write_id=spec.write_id, statement_id=spec.statement_id,
                        spark_app_id=spark.sparkContext.applicationId)
    try:
        _dispatch(spark, spec, manifest)
    except (AcidError, ValueError) as exc:
        manifest.ok, manifest.error, manifest.error_type = False, str(exc), type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - report whatever Spark raised, with its first lines
        manifest.ok, manifest.error_type = False, type(exc).__name__
        manifest.error = _spark_error(exc)
    manifest.seconds = time.time() - started
    return manifest


def _spark_error(exc: Exception) -> str:
    text = str(exc)
    # A Python worker's error inside a Spark task: keep the innermost Python exception line.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and any(k in line for k in ("Error:", "Exception:")) and not line.startswith("at "):
            return line[:2000]
    return (text.strip().splitlines() or [type(exc).__name__])[0][:2000]


def _dispatch(spark: SparkSession, spec: JobSpec, manifest: Manifest) -> None:
    table = Table(spec.table)
    a = spec.args
    if spec.job == "read":
        manifest.result = read(spark, spec, table)
        return
    if spec.job == "compact":
        manifest.partitions, manifest.result = compact.run_compaction(spark, spec)
        return
    if spec.job == "clean":
        manifest.result = compact.run_clean(spark, spec)
        return
    if table.spec.insert_only and spec.job != "insert":
        raise dml.DmlError(f"{table.spec.name} is an insert-only table: only INSERT is allowed")
    exclude = (spec.write_id, frozenset(spec.writer_statement_ids))
    overwrite = bool(a.get("overwrite"))
    static = {k.lower(): str(v) for k, v in (a.get("partition") or {}).items()}
    overwrite_parts: list[str] = []
    if spec.job == "insert":
        source = SourceSpec.from_dict(a.get("source"))
        if source is None:
            raise JobSpecError("INSERT needs a source")
        if overwrite:
            if static:
                overwrite_parts = [make_part_name(table.partition_names, static)]
            elif not table.partition_columns:
                overwrite_parts = [""]
        stmt = Statement(table, spec.txn_id, spec.write_id, spec.writer_statement_ids, overwrite)
        # base_W has no statement id: a bucketed overwrite needs one writer per bucket (a shuffle)
        with manifest.stage("plan"):
            splits = None if overwrite and table.spec.num_buckets else load.load_splits(source)
        if splits is not None:
            manifest.partitions = load.run_load(spark, stmt, splits, static, overwrite_parts, manifest.stage)
            return
        with manifest.stage("plan"):
            events = dml.insert(table, dml.conform_source(table, dml.load_source(spark, source), static))
        placement = Placement.SHUFFLE if overwrite and table.spec.num_buckets else Placement.PER_TASK
    elif spec.job == "delete":
        with manifest.stage("plan"):
            events = dml.delete(spark, table, spec.snapshot, a.get("where", ""), exclude)
        placement = Placement.LOCAL
    elif spec.job == "update":
        with manifest.stage("plan"):
            events = dml.update(spark, table, spec.snapshot, a.get("set") or {}, a.get("where"), exclude)
        placement = Placement.LOCAL
    elif spec.job == "merge":
        source = SourceSpec.from_dict(a.get("source"))
        if source is None:
            raise JobSpecError("MERGE needs a source")
        clauses = [parse_merge_clause(c) if isinstance(c, str) else MergeClause(**c) for c in a.get("clauses", [])]
        stmt = Statement(table, spec.txn_id, spec.write_id, spec.writer_statement_ids)
        manifest.partitions = merge.run_merge(spark, stmt, spec.snapshot, source, a.get("on") or [], clauses,
                                              exclude, manifest.stage)
        return
    else:
        raise JobSpecError(f"job {spec.job!r} is not a DML job")
    stmt = Statement(table, spec.txn_id, spec.write_id, spec.writer_statement_ids, overwrite)
    manifest.partitions = write_statement(spark, stmt, events, placement, overwrite_parts, manifest.stage)


def read(spark: SparkSession, spec: JobSpec, table: Table) -> dict:
    """Rows as JSON lines into ``args.output`` (a local file), at most ``args.limit``."""
    a = spec.args
    partitions = None
    if a.get("partition"):
        partitions = [parse_spec_text(a["partition"], table.partition_names)]
    if a.get("partition_filter"):
        partitions = select_partitions(spark, table, spec.snapshot, a["partition_filter"], partitions)
    df = read_table(spark, table, spec.snapshot, columns=a.get("columns"), partitions=partitions,
                    with_row_id=bool(a.get("with_row_id")))
    if a.get("where"):
        df = dml._analyse(lambda: df.filter(dml._expr(a["where"], "WHERE condition")), "WHERE")
    if a.get("order_by"):
        df = df.orderBy(*a["order_by"])
    if a.get("limit") is not None:
        df = df.limit(int(a["limit"]))
    count = 0
    out = a.get("output")
    with open(out, "w") if out else _Null() as fh:
        for row in df.toLocalIterator():
            count += 1
            fh.write(json.dumps(row.asDict(recursive=True), default=str) + "\n")
    return {"rows": count, "output": out}


class _Null:
    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *a: object) -> None:
        return None

    def write(self, _: str) -> None:
        return None


def main(job: str) -> None:
    """Entry point of ``jobs/<job>.py``: ``--spec FILE``; the manifest goes to the spec's
    ``manifest_path``; exit status 0 on success, 1 on a failed job."""
    ap = argparse.ArgumentParser(prog=f"hive-acid {job} job")
    ap.add_argument("--spec", required=True)
    args = ap.parse_args()
    spec = JobSpec.load(args.spec)
    if spec.job != job:
        raise SystemExit(f"spec is for job {spec.job!r}, not {job!r}")
    from .session import get_session
    started = time.perf_counter()
    spark = get_session(f"hive-acid {job} {spec.table.name}")
    session_s = time.perf_counter() - started
    manifest = run_job(spark, spec)
    manifest.stages.insert(0, {"stage": "session", "seconds": round(session_s, 3)})
    manifest.save(spec.manifest_path)
    if not manifest.ok:
        print(f"hive-acid job failed: {manifest.error}", file=sys.stderr)
    spark.stop()
    sys.exit(0 if manifest.ok else 1)
