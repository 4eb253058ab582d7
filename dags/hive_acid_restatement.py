"""Fact restatement in ONE transaction across two tables and three tasks, with an abort branch.

``begin`` opens the txn and allocates a write id on both tables; ``restate_orders`` and
``restate_totals`` join it (``txn_id`` from XCom) and each INSERT OVERWRITE one day's partition;
``validate`` checks the staged totals against the orders; ``commit`` makes both visible at once.
If anything fails, ``abort`` (trigger rule ``one_failed``) aborts the txn and fails the run: neither
table changes, and ``show_orders`` (which runs either way) reads what readers now see.

Trigger with ``{"inject_failure": true}`` (``airflow dags test ... -c '{"inject_failure": true}'``)
to watch the abort path.
"""
from __future__ import annotations

import pendulum
from _demo_data import RUN_DS, data_dir
from airflow.sdk import DAG, task
from airflow.sdk.exceptions import AirflowFailException

from airflow_hive_acid.operators import (
    AcidAbortTransactionOperator,
    AcidBeginTransactionOperator,
    AcidCommitTransactionOperator,
    AcidCreateTableOperator,
    AcidInsertOperator,
    AcidReadOperator,
)

ORDERS, TOTALS = "sales.restated_orders", "sales.daily_totals"
TXN = "{{ ti.xcom_pull(task_ids='begin')['txn_id'] }}"

with DAG(
    dag_id="hive_acid_restatement",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["hive-acid", "example"],
    doc_md=__doc__,
    params={"inject_failure": False},
) as dag:
    ensure = [
        AcidCreateTableOperator(task_id="ensure_orders", table=ORDERS,
                                columns="order_id bigint, amount double", partitioned_by="ds string"),
        AcidCreateTableOperator(task_id="ensure_totals", table=TOTALS,
                                columns="orders bigint, amount double", partitioned_by="ds string"),
    ]

    @task
    def stage(params: dict | None = None) -> dict[str, str]:
        """The restated day as delivered upstream: the orders and their totals (the partition,
        ``ds``, is named by the insert tasks, so the files carry no ds column)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        version = 2 if (params or {}).get("inject_failure") else 1
        d = data_dir("restatement", f"v{version}")
        amounts = [float(i * version) for i in range(1, 11)]
        pq.write_table(pa.table({"order_id": pa.array(range(1, 11), pa.int64()), "amount": amounts}),
                       f"{d}/orders.parquet")
        pq.write_table(pa.table({"orders": pa.array([10], pa.int64()), "amount": [sum(amounts)]}),
                       f"{d}/totals.parquet")
        return {"orders": f"{d}/orders.parquet", "totals": f"{d}/totals.parquet"}

    staged = stage()
    begin = AcidBeginTransactionOperator(task_id="begin", tables=[ORDERS, TOTALS])
    restate_orders = AcidInsertOperator(
        task_id="restate_orders", table=ORDERS, txn_id=TXN, overwrite=True, partition={"ds": RUN_DS},
        source="{{ ti.xcom_pull(task_ids='stage')['orders'] }}")
    restate_totals = AcidInsertOperator(
        task_id="restate_totals", table=TOTALS, txn_id=TXN, overwrite=True, partition={"ds": RUN_DS},
        source="{{ ti.xcom_pull(task_ids='stage')['totals'] }}")

    @task
    def validate(params: dict | None = None, ti=None) -> None:  # noqa: ANN001 - Airflow injects ti
        """A data-quality gate between the writes and the commit."""
        orders = ti.xcom_pull(task_ids="restate_orders")
        totals = ti.xcom_pull(task_ids="restate_totals")
        if (params or {}).get("inject_failure"):
            raise AirflowFailException("validation failed (inject_failure=true): the restatement is aborted")
        if orders["rows_inserted"] != 10 or totals["rows_inserted"] != 1:
            raise AirflowFailException(f"unexpected row counts: {orders['rows_inserted']} orders, "
                                       f"{totals['rows_inserted']} totals")

    check = validate()
    commit = AcidCommitTransactionOperator(task_id="commit", txn_id=TXN, tables=[ORDERS, TOTALS])
    # The failure branch: abort, then fail, so the run ends red with nothing half-visible.
    abort = AcidAbortTransactionOperator(task_id="abort", txn_id=TXN, trigger_rule="one_failed",
                                         reason="restatement failed validation", fail_task=True)
    show = AcidReadOperator(task_id="show_orders", table=ORDERS, where=f"ds = '{RUN_DS}'",
                            order_by=["order_id"], trigger_rule="all_done")

    ensure >> staged >> begin >> [restate_orders, restate_totals] >> check >> commit >> show
    [restate_orders, restate_totals, check] >> abort
