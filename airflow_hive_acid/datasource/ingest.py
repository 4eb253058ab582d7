"""The streaming ingest job: the files arriving in a landing folder, read by Structured
Streaming and appended through ``hive_acid``, one transaction per micro-batch (``stream.py``).
Its driver opens the metastore only through the data source."""
from __future__ import annotations

import logging
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from ..jobs.joblog import PROGRESS_PREFIX
from ..jobs.manifest import IngestOutput, Manifest
from ..jobs.spec import Ingest, JobSpec
from ..spark.runner import run_guarded
from ..spark.scan import Table, scan_schema
from ..spark.session import JobSpark
from . import stream
from .source import register


def run_ingest(spark: SparkSession | JobSpark, spec: JobSpec) -> Manifest:
    """Run an :class:`~airflow_hive_acid.jobs.spec.Ingest` request to its end; each committed
    micro-batch is a progress line of the job's output."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(f"{PROGRESS_PREFIX}ingest %(message)s"))
    stream_log = logging.getLogger(stream.__name__)
    stream_log.addHandler(handler)
    stream_log.setLevel(logging.INFO)
    try:
        return run_guarded(spark, spec, _ingest)
    finally:
        stream_log.removeHandler(handler)


def _ingest(job: JobSpark, spec: JobSpec, manifest: Manifest) -> None:
    spark = job.session
    r = spec.request
    if not isinstance(r, Ingest):
        raise TypeError(f"run_ingest runs ingest requests, not {r.job}")
    register(spark)
    table = Table(spec.table)
    schema = scan_schema(table, None, with_row_id=False)
    reader = spark.readStream.format(r.format).schema(schema).options(**r.options)
    if r.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(r.max_files_per_trigger))
    writer = (reader.load(r.landing).writeStream.format("hive_acid").outputMode("append")
              .option("checkpointLocation", r.checkpoint))
    if r.metastore:                  # else the data source's default: this job's $HIVE_ACID_METASTORE
        writer = writer.option("metastore", r.metastore)
    if r.trigger == "available_now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{r.interval} seconds")
    started = time.perf_counter()
    with manifest.stage("stream"):
        query = writer.start(spec.table.name)
        if r.max_duration is None:
            query.awaitTermination()
        # pyspark takes a float here (it waits int(timeout * 1000) ms) but annotates the timeout int
        elif not query.awaitTermination(r.max_duration):  # type: ignore[arg-type]
            stop_between_batches(query)
    error = query.exception()
    manifest.output = IngestOutput(str(query.id), [{"batch_id": p["batchId"], "rows": p["numInputRows"]}
                                                   for p in query.recentProgress if p["numInputRows"]],
                                   round(time.perf_counter() - started, 3))
    if error is not None:
        raise error


def stop_between_batches(query: StreamingQuery, poll: float = 0.05) -> None:
    """Stop once no micro-batch is running: a batch in flight commits first (stopping in the
    middle of one is safe too, as the next run replays it, but wastes its work)."""
    deadline = time.monotonic() + 600
    while query.isActive and query.status.get("isTriggerActive") and time.monotonic() < deadline:
        time.sleep(poll)
    query.stop()
