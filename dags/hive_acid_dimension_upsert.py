"""Hourly SCD type 1 upsert of a customer dimension with ``AcidMergeOperator``.

Each hour an extract of changed customers lands as a Parquet file; the MERGE updates rows whose
attributes changed and inserts new customers. Only the changed rows are written (one delta and
one delete delta per run); readers keep a consistent snapshot throughout. Each run emits an Asset
event on ``hive-acid://dim/customer`` that downstream DAGs can be scheduled on.
"""
from __future__ import annotations

import pendulum
from _demo_data import data_dir, run_date
from airflow.sdk import DAG, task

from airflow_hive_acid.operators import AcidCreateTableOperator, AcidMergeOperator

TABLE = "dim.customer"

with DAG(
    dag_id="hive_acid_dimension_upsert",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,          # MERGEs of one table run one after another
    tags=["hive-acid", "example"],
    doc_md=__doc__,
) as dag:
    create = AcidCreateTableOperator(
        task_id="ensure_table", table=TABLE,
        columns="customer_id bigint, email string, tier string, updated_at string",
        bucketed_by=["customer_id"], buckets=4,
        # let the maintenance DAG's initiator compact this table after a few hourly deltas
        properties={"compactorthreshold.hive.compactor.delta.num.threshold": "1"})

    @task
    def extract(dag_run=None) -> str:  # noqa: ANN001 - Airflow passes the run
        """Customers changed in the hour (a deterministic stand-in for the source system): the
        run's hour, or for a run triggered by hand (no data interval) the hour it was triggered."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        when = run_date(dag_run).start_of("hour")
        hour = when.int_timestamp // 3600
        ids = list(range(1 + (hour % 10) * 3, 13 + (hour % 10) * 3))   # a sliding window: 9 seen, 3 new
        stamp = when.isoformat()
        rows = pa.table({
            "customer_id": pa.array(ids, pa.int64()),
            "email": [f"c{i}-{hour % 5}@example.com" for i in ids],
            "tier": ["gold" if (i + hour) % 3 == 0 else "silver" for i in ids],
            "updated_at": [stamp] * len(ids),
        })
        path = f"{data_dir('dimension')}/customers_{when.format('YYYYMMDDHH')}.parquet"
        pq.write_table(rows, path)
        return path

    upsert = AcidMergeOperator(
        task_id="upsert", table=TABLE, on="customer_id",
        source="{{ ti.xcom_pull(task_ids='extract') }}",
        clauses=[
            "WHEN MATCHED AND (t.email <> s.email OR t.tier <> s.tier) "
            "THEN UPDATE SET email = s.email, tier = s.tier, updated_at = s.updated_at",
            "WHEN NOT MATCHED THEN INSERT *",
        ])

    create >> extract() >> upsert
