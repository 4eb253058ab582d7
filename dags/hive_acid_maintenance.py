"""Table maintenance, as a platform engineer schedules it: housekeeper -> initiator -> compaction
worker -> ``CompactionSensor`` (deferrable: no worker slot while it waits) -> cleaner.

The initiator decides from the write stats recorded at commit (no file listing) what needs a
minor or major compaction; the worker runs the queued requests as Spark jobs; the sensor waits
until every request this cycle is about is compacted — those the initiator queued or found queued,
and those the worker ran — and fails the run at once if one failed. Requests that a worker elsewhere
(``hive-acid worker``, another DAG) is still running are waited for in the triggerer. The cleaner
then removes the directories they made obsolete once no open transaction can still read them. On a
day with nothing to compact the initiator queues nothing, the worker runs nothing and the sensor
succeeds at once, without deferring.

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

# What the sensor waits for: the requests the initiator queued or found queued (its XCom has a
# decision per table/partition it looked at), and those the worker ran (its XCom: one per request).
THIS_CYCLE = ("{{ (ti.xcom_pull(task_ids='initiator') | selectattr('action', 'in', ['initiated', 'already queued'])"
              " | map(attribute='compaction_id') | list)"
              " + (ti.xcom_pull(task_ids='compaction_worker') | map(attribute='id') | list) }}")

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
        task_id="wait_for_compaction", compaction_ids=THIS_CYCLE,
        # "refused": the worker's job found nothing worth compacting; a maintenance run is fine with that
        target_states=["ready for cleaning", "succeeded", "refused"], failure_states=["failed"],
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
