"""Streaming ingest, the scheduled form: every hour, the click files that arrived in a landing
folder are appended to ``web.clicks`` with Structured Streaming, one transaction per micro-batch
(``AcidStreamingIngestOperator`` with ``trigger="available_now"``). The checkpoint remembers which
files are in, so a file lands in the table exactly once, whatever retries or crashes happen.

Streaming leaves one small delta per micro-batch; the ``hive_acid_maintenance`` DAG's initiator
sees them in the write stats and compacts them like any other table's deltas.
"""
from __future__ import annotations

import pendulum
from _demo_data import data_dir, run_date
from airflow.sdk import DAG, task

from airflow_hive_acid.operators import AcidCreateTableOperator, AcidStreamingIngestOperator

TABLE = "web.clicks"

with DAG(
    dag_id="hive_acid_streaming_ingest",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["hive-acid", "example", "streaming"],
    doc_md=__doc__,
) as dag:
    create = AcidCreateTableOperator(
        task_id="create_table", table=TABLE,
        columns="click_id bigint, user_id bigint, url string, at timestamp",
        partitioned_by="ds string", bucketed_by=["user_id"], buckets=4)

    @task
    def clicks_arrive(dag_run=None) -> list[str]:  # noqa: ANN001 - Airflow passes the run
        """Stands in for the upstream that drops files: three files of clicks for this hour (the
        hour it was triggered, for a run triggered by hand)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        logical_date = run_date(dag_run).start_of("hour")
        hour = int(logical_date.timestamp()) // 3600
        paths = []
        for f in range(3):
            first = hour * 1000 + f * 100
            ids = list(range(first, first + 100))
            table = pa.table({
                "click_id": pa.array(ids, pa.int64()),
                "user_id": pa.array([i % 37 for i in ids], pa.int64()),
                "url": [f"/page/{i % 11}" for i in ids],
                "at": pa.array([logical_date.replace(tzinfo=None)] * len(ids), pa.timestamp("us")),
                "ds": [logical_date.strftime("%Y-%m-%d")] * len(ids),
            })
            path = f"{data_dir('clicks_landing')}/clicks_{hour}_{f}.parquet"
            pq.write_table(table, path)
            paths.append(path)
        return paths

    ingest = AcidStreamingIngestOperator(
        task_id="ingest_clicks", table=TABLE, landing=data_dir("clicks_landing"),
        checkpoint=data_dir("checkpoints", "web.clicks"), format="parquet", trigger="available_now",
        max_files_per_trigger=1)

    create >> clicks_arrive() >> ingest
