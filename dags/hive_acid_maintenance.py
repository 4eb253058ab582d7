"""Table maintenance, as a platform engineer schedules it: housekeeper -> initiator -> compaction
worker -> ``CompactionSensor`` (deferrable: no worker slot while it waits) -> cleaner.

The initiator decides from the write stats recorded at commit (no file listing) what needs a
minor or major compaction; the worker runs the queued requests as Spark jobs; the cleaner removes
the directories they made obsolete once no open transaction can still read them.

A second DAG, ``hive_acid_customer_report``, is scheduled on the ``dim.customer`` Asset: it runs
whenever a write to that table commits (e.g. the hourly upsert).
"""
from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_hive_acid.assets import table_asset
from airflow_hive_acid.operators import (
    AcidCleanerOperator,
    AcidCompactionWorkerOperator,
    AcidHousekeeperOperator,
    AcidInitiatorOperator,
    AcidReadOperator,
)
from airflow_hive_acid.sensors import CompactionSensor

TABLE = "dim.customer"

with DAG(
    dag_id="hive_acid_maintenance",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["hive-acid", "example", "maintenance"],
    doc_md=__doc__,
) as dag:
    housekeeper = AcidHousekeeperOperator(task_id="housekeeper")
    initiator = AcidInitiatorOperator(task_id="initiator")
    worker = AcidCompactionWorkerOperator(task_id="compaction_worker", max_requests=20)
    compacted = CompactionSensor(
        task_id="wait_for_compaction", table=TABLE, target_states=["ready for cleaning", "succeeded"],
        deferrable=True, poke_interval=5, timeout=1800)
    cleaner = AcidCleanerOperator(task_id="cleaner")

    housekeeper >> initiator >> worker >> compacted >> cleaner


with DAG(
    dag_id="hive_acid_customer_report",
    schedule=[table_asset(TABLE)],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["hive-acid", "example"],
    doc_md="Runs after each committed write to ``dim.customer`` (its Asset): reads the gold tier.",
) as report_dag:
    AcidReadOperator(task_id="gold_customers", table=TABLE, where="tier = 'gold'", order_by=["customer_id"])
