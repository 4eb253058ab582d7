"""Run a job spec in a SparkSession and produce its manifest — what every entry script in
``entrypoints/`` does, and what tests call in-process with a shared local session."""
from __future__ import annotations

import argparse
import base64
import importlib
import json
import re
import sys
import time
from collections.abc import Callable

from pyspark.sql import SparkSession

from ..acid import fs as afs
from ..errors import HiveAcidError, InvalidInputError, is_retryable
from ..jobs.joblog import print_progress
from ..jobs.manifest import Manifest, ReadOutput
from ..jobs.spec import Clean, Compact, Delete, Insert, JobSpec, JobSpecError, Merge, Read, Update
from . import compact, dml, load, merge
from .scan import Table, read_table, select_partitions
from .session import JobSpark, cheap_numpy_converters, dumps_class_archive, load_sql_classes
from .write import Placement, Statement, write_statement


def run_job(spark: SparkSession | JobSpark, spec: JobSpec) -> Manifest:
    """Execute ``spec``; errors a user can act on come back in the manifest, not as a trace."""
    return run_guarded(spark, spec, _dispatch)


def run_guarded(spark: SparkSession | JobSpark, spec: JobSpec,
                body: Callable[[JobSpark, JobSpec, Manifest], None]) -> Manifest:
    """Validate ``spec``'s request and run ``body`` to fill its manifest; an error becomes the
    manifest's ``error`` (``bad_input`` when no retry can fix it: ``errors.is_retryable``), with
    the job's time. A SparkSession (tests, a user's own job) is taken as a JobSpark whose
    session is made."""
    started = time.time()
    if not isinstance(spark, JobSpark):
        spark = JobSpark(session=spark)
    manifest = Manifest(job=spec.job, write_id=spec.write_id, statement_id=spec.statement_id,
                        spark_app_id=spark.sc.applicationId)
    try:
        spec.request.validate(spec.table)
        body(spark, spec, manifest)
    except (HiveAcidError, ValueError) as exc:
        manifest.ok, manifest.error, manifest.error_type = False, str(exc), type(exc).__name__
        manifest.bad_input = not is_retryable(exc)
    except Exception as exc:  # noqa: BLE001 - report whatever Spark raised, with its first lines
        manifest.ok, manifest.error_type = False, type(exc).__name__
        manifest.error = _spark_error(exc)
        task_error = _task_error_class(manifest.error)
        if task_error is not None:     # our own error, raised in a task and wrapped by Spark
            manifest.error_type = task_error.__name__
            manifest.bad_input = issubclass(task_error, InvalidInputError)
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


_TASK_ERROR = re.compile(r"(airflow_hive_acid(?:\.\w+)+)\.(\w+): ")


def _task_error_class(line: str) -> type[BaseException] | None:
    """The class of a package error named by a task's traceback line (``module.Class: message``),
    so that bad input found inside a task (a partition value, a corrupt file) is judged by the
    same rule as in the driver; None for anything else."""
    m = _TASK_ERROR.search(line)
    if m is None:
        return None
    module = sys.modules.get(m.group(1))
    if module is None:
        try:
            module = importlib.import_module(m.group(1))
        except ImportError:
            return None
    cls = getattr(module, m.group(2), None)
    return cls if isinstance(cls, type) and issubclass(cls, HiveAcidError) else None


def _dispatch(spark: JobSpark, spec: JobSpec, manifest: Manifest) -> None:
    """Run the job; only the steps that need Spark SQL make the session (``spark.session``)."""
    table = Table(spec.table)
    r = spec.request
    if isinstance(r, Read):
        with manifest.stage("scan") as progress:
            manifest.output = read(spark.session, spec, table, r)
            progress["rows"] = manifest.output.rows
        return
    if isinstance(r, Compact):
        with manifest.stage("compact") as progress:
            manifest.partitions, manifest.output = compact.run_compaction(spark.sc, spec, r)
            progress["rows"] = manifest.output.rows
        return
    if isinstance(r, Clean):
        with manifest.stage("clean"):
            manifest.output = compact.run_clean(spec, r)
        return
    exclude = (spec.write_id, frozenset(spec.writer_statement_ids))
    overwrite = isinstance(r, Insert) and r.overwrite
    stmt = Statement(table, spec.txn_id, spec.write_id, spec.writer_statement_ids, overwrite, spec.shared_txn)
    overwrite_parts: list[str] = []
    if isinstance(r, Insert):
        static = {k.lower(): str(v) for k, v in (r.partition or {}).items()}
        if overwrite:
            if static:
                overwrite_parts = [spec.table.partition_name(static)]
            elif not table.spec.partition_cols:
                overwrite_parts = [""]
        with manifest.stage("plan"):
            # base_W has no statement id: a bucketed overwrite needs one writer per bucket (a shuffle)
            splits = None if overwrite and table.spec.num_buckets else load.load_splits(r.source)
        if splits is not None:
            manifest.partitions = load.run_load(spark.sc, stmt, splits, static, overwrite_parts, manifest.stage)
            return
        with manifest.stage("plan"):
            events = dml.insert(table, dml.conform_source(table, dml.load_source(spark.session, r.source), static))
        placement = Placement.SHUFFLE if overwrite and table.spec.num_buckets else Placement.PER_TASK
    elif isinstance(r, Delete):
        with manifest.stage("plan"):
            events = dml.delete(spark.session, table, spec.snapshot, r.where, exclude)
        placement = Placement.LOCAL
    elif isinstance(r, Update):
        with manifest.stage("plan"):
            events = dml.update(spark.session, table, spec.snapshot, r.set, r.where, exclude)
        placement = Placement.LOCAL
    elif isinstance(r, Merge):
        manifest.partitions = merge.run_merge(spark, stmt, spec.snapshot, r.source, r.on, r.clauses, exclude,
                                              manifest.stage)
        return
    else:
        raise JobSpecError(f"job {spec.job!r} is not a DML job")
    manifest.partitions = write_statement(spark.session, stmt, events, placement, overwrite_parts, manifest.stage)


def read(spark: SparkSession, spec: JobSpec, table: Table, r: Read) -> ReadOutput:
    """Rows as JSON lines into ``r.output`` (on the table's filesystem, or any path pyarrow
    reaches), at most ``r.limit``."""
    partitions = [table.spec.partition_name(r.partition)] if r.partition else None
    if r.partition_filter:
        partitions = select_partitions(spark, table, spec.snapshot, r.partition_filter, partitions)
    df = read_table(spark, table, spec.snapshot, columns=r.columns, partitions=partitions,
                    with_row_id=r.with_row_id)
    where = r.where
    if where:
        df = dml._analyse(lambda: df.filter(dml._expr(where, "WHERE condition")), "WHERE")
    if r.order_by:
        df = df.orderBy(*r.order_by)
    if r.limit is not None:
        df = df.limit(r.limit)
    count = 0
    if r.output is None:
        for _ in df.toLocalIterator():
            count += 1
        return ReadOutput(count, None)
    fs, path = afs.filesystem_for(r.output)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as fh:
        for row in df.toLocalIterator():
            count += 1
            fh.write((json.dumps(row.asDict(recursive=True), default=str) + "\n").encode())
    return ReadOutput(count, r.output)


def main(job: str, run: Callable[[JobSpark, JobSpec], Manifest] | None = None) -> None:
    """Entry point of ``entrypoints/<job>.py``: ``--spec-b64 SPEC``; ``run`` (default
    :func:`run_job`) makes the manifest, which goes to the spec's ``manifest_path``; exit status
    0 on success, 1 on a failed job."""
    ap = argparse.ArgumentParser(prog=f"hive-acid {job} job")
    ap.add_argument("--spec-b64", required=True, help="the job spec, JSON in base64")
    args = ap.parse_args()
    spec = JobSpec.from_json(base64.b64decode(args.spec_b64).decode())
    if spec.job != job:
        raise SystemExit(f"spec is for job {spec.job!r}, not {job!r}")
    started = time.perf_counter()
    cheap_numpy_converters()
    spark = JobSpark(f"hive-acid {job} {spec.table.name}")
    session_s = time.perf_counter() - started
    print_progress(job, "session", session_s)
    manifest = (run or run_job)(spark, spec)
    manifest.stages.insert(0, {"stage": "session", "seconds": round(session_s, 3)})
    manifest.save(spec.manifest_path)
    if not manifest.ok:
        print(f"hive-acid job failed: {manifest.error}", file=sys.stderr)
    if dumps_class_archive(spark.sc):      # the first job on this machine: its archive serves all
        try:
            load_sql_classes(spark)
        except Exception as exc:  # noqa: BLE001 - the job is done; a thinner archive only costs time
            print(f"hive-acid: class archive warm-up failed: {_spark_error(exc)}", file=sys.stderr)
    # No spark.stop(): spark-submit stops the SparkContext once this driver exits, and pyspark's
    # stop() would first wait up to a second for its accumulator server to notice (docs/operations.md).
    sys.exit(0 if manifest.ok else 1)
