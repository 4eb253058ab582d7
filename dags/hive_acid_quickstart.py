"""Quickstart: create a table, load it, MERGE a batch of changes, DELETE, compact, then show the
table and SHOW COMPACTIONS. ``make demo`` runs it with ``airflow dags test`` on the embedded
defaults (SQLite metastore and a warehouse folder under ``~/.hive-acid``, Spark ``local[*]``)."""
from __future__ import annotations

from decimal import Decimal

import pendulum
from _demo_data import data_dir
from airflow.sdk import DAG, task

from airflow_hive_acid.hooks import AcidMetastoreHook
from airflow_hive_acid.operators import (
    AcidCompactOperator,
    AcidCreateTableOperator,
    AcidDeleteOperator,
    AcidInsertOperator,
    AcidMergeOperator,
    AcidReadOperator,
)

TABLE = "demo.customers"

with DAG(
    dag_id="hive_acid_quickstart",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["hive-acid", "example"],
    doc_md=__doc__,
) as dag:
    create = AcidCreateTableOperator(
        task_id="create_table", table=TABLE,
        columns="id bigint, name string, city string, balance decimal(10,2)",
        bucketed_by=["id"], buckets=4)

    @task
    def stage_files() -> dict[str, str]:
        """Ten customers to load, and a batch of changes (op U/D/I) to merge."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        dec = pa.decimal128(10, 2)
        cities = ["Lisbon", "Oslo", "Quito", "Osaka", "Perth"]
        initial = pa.table({
            "id": pa.array(range(1, 11), pa.int64()),
            "name": [f"customer {i}" for i in range(1, 11)],
            "city": [cities[i % 5] for i in range(1, 11)],
            "balance": pa.array([Decimal("-20.00") if i == 5 else Decimal(f"{i * 10}.50") for i in range(1, 11)], dec),
        })
        changes = pa.table({
            "id": pa.array([2, 3, 4, 8, 9, 11, 12, 13], pa.int64()),
            "op": ["U", "U", "U", "D", "D", "I", "I", "I"],
            "name": ["customer 2", "customer 3", "customer 4", None, None, "customer 11", "customer 12", "customer 13"],
            "city": ["Nairobi", "Nairobi", "Nairobi", None, None, "Lima", "Lima", "Lima"],
            "balance": pa.array([Decimal("1.00")] * 3 + [None, None] + [Decimal("5.00")] * 3, dec),
        })
        paths = {"initial": f"{data_dir('quickstart')}/customers.parquet",
                 "changes": f"{data_dir('quickstart')}/changes.parquet"}
        pq.write_table(initial, paths["initial"])
        pq.write_table(changes, paths["changes"])
        return paths

    files = stage_files()

    # INSERT OVERWRITE: a new base_N, so running the quickstart again starts from the same rows.
    load = AcidInsertOperator(
        task_id="load", table=TABLE, overwrite=True,
        source="{{ ti.xcom_pull(task_ids='stage_files')['initial'] }}")

    merge = AcidMergeOperator(
        task_id="merge_changes", table=TABLE, on="id",
        source="{{ ti.xcom_pull(task_ids='stage_files')['changes'] }}",
        clauses=[
            "WHEN MATCHED AND s.op = 'D' THEN DELETE",
            "WHEN MATCHED THEN UPDATE SET city = s.city, balance = s.balance",
            "WHEN NOT MATCHED AND s.op = 'I' THEN INSERT *",
        ])

    delete = AcidDeleteOperator(task_id="delete_negative_balances", table=TABLE, where="balance < 0")

    # ALTER TABLE demo.customers COMPACT 'major' AND WAIT: run it here, then clean what it made obsolete.
    compact = AcidCompactOperator(task_id="compact", table=TABLE, compaction_type="major", wait=True)

    show = AcidReadOperator(task_id="show_table", table=TABLE, order_by=["id"])

    @task
    def show_compactions() -> list[dict]:
        """SHOW COMPACTIONS, as a DAG author would check it from a task."""
        rows = [c.to_dict() for c in AcidMetastoreHook().metastore.compactions.show(table="customers", db="demo")]
        for r in rows:
            print(f"{r['id']:>4}  {r['database']}.{r['table']:<12} {r['type']:<6} {r['state']:<20} "
                  f"worker={r['worker']} duration_ms={r['duration_ms']} error={r['error']}")
        return rows

    create >> files >> load >> merge >> delete >> compact >> show >> show_compactions()
