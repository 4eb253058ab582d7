"""Daily GDPR erasure: delete every row of the customers named in the day's erasure requests,
from the customer table and from the partitioned orders fact table.

The ids arrive as a file; a MERGE ... WHEN MATCHED THEN DELETE joins on them, so a list of any
length deletes in one Spark job without building SQL from ids. Each delete is its own
transaction: a retry of a task whose delete already committed does not run it again.
"""
from __future__ import annotations

import pendulum
from _demo_data import data_dir, run_date
from airflow.sdk import DAG, task

from airflow_hive_acid.operators import AcidCreateTableOperator, AcidInsertOperator, AcidMergeOperator

CUSTOMERS, ORDERS = "crm.customers", "sales.orders"

with DAG(
    dag_id="hive_acid_gdpr_delete",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["hive-acid", "example", "gdpr"],
    doc_md=__doc__,
) as dag:
    customers = AcidCreateTableOperator(task_id="ensure_customers", table=CUSTOMERS,
                                        columns="id bigint, name string, email string",
                                        bucketed_by=["id"], buckets=2)
    orders = AcidCreateTableOperator(task_id="ensure_orders", table=ORDERS,
                                     columns="order_id bigint, customer_id bigint, amount double",
                                     partitioned_by="ds string", bucketed_by=["order_id"], buckets=2)

    @task
    def demo_data() -> dict[str, str]:
        """Demo only: rows the seed tasks load (in production the tables are already full)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        d = data_dir("gdpr")
        pq.write_table(pa.table({"id": pa.array(range(1, 21), pa.int64()),
                                 "name": [f"person {i}" for i in range(1, 21)],
                                 "email": [f"p{i}@example.com" for i in range(1, 21)]}), f"{d}/customers.parquet")
        pq.write_table(pa.table({"order_id": pa.array(range(1, 61), pa.int64()),
                                 "customer_id": pa.array([(i % 20) + 1 for i in range(1, 61)], pa.int64()),
                                 "amount": [float(i) for i in range(1, 61)],
                                 "ds": ["2026-01-0" + str(1 + i % 3) for i in range(1, 61)]}), f"{d}/orders.parquet")
        return {"customers": f"{d}/customers.parquet", "orders": f"{d}/orders.parquet"}

    seed = demo_data()
    seed_customers = AcidInsertOperator(task_id="seed_customers", table=CUSTOMERS, overwrite=True,
                                        source="{{ ti.xcom_pull(task_ids='demo_data')['customers'] }}")
    seed_orders = AcidInsertOperator(task_id="seed_orders", table=ORDERS, overwrite=True,
                                     source="{{ ti.xcom_pull(task_ids='demo_data')['orders'] }}")

    @task
    def erasure_requests(dag_run=None) -> str:  # noqa: ANN001 - Airflow passes the run
        """The day's erasure requests as a one-column file of customer ids."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        path = f"{data_dir('gdpr')}/erasure_{run_date(dag_run).to_date_string()}.parquet"
        pq.write_table(pa.table({"id": pa.array([3, 7, 11], pa.int64())}), path)
        return path

    requests = erasure_requests()
    erase_customers = AcidMergeOperator(
        task_id="erase_customers", table=CUSTOMERS, on="id",
        source="{{ ti.xcom_pull(task_ids='erasure_requests') }}",
        clauses=["WHEN MATCHED THEN DELETE"])
    erase_orders = AcidMergeOperator(
        task_id="erase_orders", table=ORDERS, on="t.customer_id = s.id",
        source="{{ ti.xcom_pull(task_ids='erasure_requests') }}",
        clauses=["WHEN MATCHED THEN DELETE"])

    [customers, orders] >> seed >> [seed_customers, seed_orders] >> requests >> [erase_customers, erase_orders]
