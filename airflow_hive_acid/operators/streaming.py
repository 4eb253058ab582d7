"""Streaming ingest as an Airflow task: a landing folder into a table with Structured Streaming,
each micro-batch its own transaction (the ``hive_acid`` data source's streaming write)."""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from ..assets import table_asset
from ..errors import InvalidInputError
from ..hooks.spark import AcidSparkHook
from ..jobs import Ingest, IngestOutput, JobSpec, PartitionStats, SnapshotSpec, run_job
from ..jobs.spec import INGEST_FORMATS, INGEST_TRIGGERS
from ..metastore.db import METASTORE_ENV
from .base import AcidBaseOperator, fails_fast, is_templated
from .transaction import emit_asset_event


class AcidStreamingIngestOperator(AcidBaseOperator):
    """Ingest the Parquet, ORC, JSON or CSV files arriving in ``landing`` into ``table``.

    ``trigger="available_now"`` processes what has arrived and stops (the scheduled form: run it
    hourly); ``trigger="processing"`` starts a micro-batch every ``interval`` seconds and stops
    cleanly after ``max_duration`` seconds. ``checkpoint`` keeps the query's progress between
    runs, so each file is ingested once across runs, retries and crashes. The Spark driver opens
    the metastore of ``hive_acid_conn_id`` for the batches' transactions, so it must reach it.

    XCom: the query id and the batches this run committed (batch ids, txn ids, write ids, rows);
    the table's Asset gets an event when at least one batch committed.
    """

    template_fields: Sequence[str] = ("table", "landing", "checkpoint")

    def __init__(self, *, table: str, landing: str, checkpoint: str, format: str = "parquet",
                 trigger: str = "available_now", interval: float = 1.0, max_duration: float | None = None,
                 max_files_per_trigger: int | None = None, source_options: dict[str, str] | None = None,
                 **kwargs: Any) -> None:
        if format not in INGEST_FORMATS:
            raise InvalidInputError(f"format must be one of {list(INGEST_FORMATS)}, not {format!r}")
        if trigger not in INGEST_TRIGGERS:
            raise InvalidInputError(f"trigger must be one of {list(INGEST_TRIGGERS)}, not {trigger!r}")
        if trigger == "processing" and max_duration is None:
            raise InvalidInputError("trigger='processing' needs max_duration (seconds): a task must end")
        if not is_templated(table) and "outlets" not in kwargs:
            kwargs["outlets"] = [table_asset(table)]
        super().__init__(**kwargs)
        self.table, self.landing, self.checkpoint = table, landing, checkpoint
        self.format, self.trigger, self.interval, self.max_duration = format, trigger, interval, max_duration
        self.max_files_per_trigger = max_files_per_trigger
        self.source_options = dict(source_options or {})
        self._result: dict[str, Any] | None = None

    @cached_property
    def spark_hook(self) -> AcidSparkHook:
        """The job's driver finds the metastore in ``$HIVE_ACID_METASTORE``: a URL that may hold a
        password travels in its environment, not on spark-submit's command line."""
        return AcidSparkHook(conn_id=self.spark_conn_id, conf=self.spark_conf, verbose=self.verbose,
                             env={METASTORE_ENV: self.metastore_hook.metastore.url})

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        info = ms.catalog.get_table(self.table)
        table = info.to_spec()
        request = Ingest(landing=self.landing, checkpoint=self.checkpoint, format=self.format,
                         trigger=self.trigger, interval=float(self.interval), max_duration=self.max_duration,
                         max_files_per_trigger=self.max_files_per_trigger, options=self.source_options)
        request.validate(table)
        started = ms.store.clock()
        manifest = run_job(self.spark_hook, JobSpec(table=table, snapshot=SnapshotSpec("", ""), request=request))
        out = manifest.output
        if not isinstance(out, IngestOutput):
            raise TypeError(f"the ingest job answered {type(out).__name__}, not IngestOutput")
        batches = [b for b in ms.txns.stream_batches(info.qualified_name, out.query_id) if b.committed_at >= started]
        result = {"table": info.qualified_name, "query_id": out.query_id, "batches": len(batches),
                  "rows": sum(b.rows for b in batches), "batch_ids": [b.batch_id for b in batches],
                  "txn_ids": [b.txn_id for b in batches], "write_ids": [b.write_id for b in batches],
                  "spark_app_id": manifest.spark_app_id, "job_seconds": round(manifest.seconds, 3)}
        self.log.info("ingest %s -> %s: %s batches, %s rows committed (write ids %s)", self.landing,
                      info.qualified_name, result["batches"], result["rows"], result["write_ids"])
        if batches:
            emit_asset_event(context, self.outlets, info.qualified_name,
                             {k: result[k] for k in ("query_id", "batches", "rows", "write_ids")})
        self._result = {**result, "stream_batches": [
            {"batchId": b.batch_id, "txnId": b.txn_id, "writeId": b.write_id, "rows": b.rows} for b in batches]}
        return result

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The landing folder into the table: rows appended and the micro-batches committed."""
        from ..lineage import HiveAcidRunFacet, lineage, path_input, table_output
        r = self._result or {}
        rows = r.get("rows", 0)
        stats = [PartitionStats(rows_inserted=rows)] if r else None
        return lineage([path_input(self.landing)], [table_output(self.table, partitions=stats)],
                       HiveAcidRunFacet(operation="ingest", committed=bool(r.get("batches")),
                                        streamBatches=r.get("stream_batches")))

    def on_kill(self) -> None:
        """Kill the Spark job; a batch cut short never committed, and the next run replays it."""
        self.spark_hook.kill()
