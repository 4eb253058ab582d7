"""Every example DAG in ``dags/`` runs under ``airflow dags test`` (Airflow on SQLite, Spark
``local[*]`` through spark-submit, the embedded SQLite metastore), and then the tables hold what
the DAG promises — checked by reading them, not only by the run state."""
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import REPO
from tablerows import read_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """An Airflow home and a hive-acid home of their own; ``run(dag, date)`` runs a DAG test."""
    root = tmp_path_factory.mktemp("dags")
    env = {**os.environ, "AIRFLOW_HOME": str(root / "airflow"), "HIVE_ACID_HOME": str(root / "hive-acid"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    for k in ("HIVE_ACID_METASTORE", "HIVE_ACID_DEMO_DATA", "HIVE_ACID_WAREHOUSE"):
        env.pop(k, None)
    airflow_bin = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow_bin, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)

    def run(dag_id: str, date: str, conf: dict | None = None, ok: bool = True) -> subprocess.CompletedProcess:
        cmd = [airflow_bin, "dags", "test", dag_id, date] + (["-c", json.dumps(conf)] if conf else [])
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        out = proc.stdout + proc.stderr
        log = root / f"{dag_id}-{date[:13]}.log"
        log.write_text(out)
        finished = re.search(r"DagRun Finished: .*?, state=(\w+)", out)
        proc.state = finished.group(1) if finished else None
        if ok:
            assert proc.returncode == 0 and proc.state == "success", f"{dag_id} failed; log {log}:\n{out[-4000:]}"
        return proc

    def metastore():
        from airflow_hive_acid.metastore import Metastore
        return Metastore(f"sqlite:///{root / 'hive-acid' / 'metastore.db'}")

    def asset_events(uri: str) -> list[dict]:
        with sqlite3.connect(root / "airflow" / "airflow.db") as db:
            rows = db.execute("SELECT e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id "
                              "WHERE a.uri = ? ORDER BY e.id", (uri,)).fetchall()
        return [json.loads(r[0]) if isinstance(r[0], str) else r[0] for r in rows]

    run.metastore = metastore
    run.asset_events = asset_events
    run.data = root / "hive-acid" / "incoming"
    return run


def test_quickstart(airflow):
    airflow("hive_acid_quickstart", "2026-01-01")
    ms = airflow.metastore()
    rows = sorted(read_rows(ms, "demo.customers"), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 6, 7, 10, 11, 12, 13]     # 8, 9 merged away, 5 deleted
    assert {r["city"] for r in rows if r["id"] in (2, 3, 4)} == {"Nairobi"}
    assert {r["city"] for r in rows if r["id"] >= 11} == {"Lima"}
    [c] = ms.compactions.show(db="demo", table="customers")
    assert (c.type.name, c.state.label) == ("MAJOR", "succeeded")
    table_dir = Path(ms.catalog.get_table("demo.customers").location)
    assert [p.name for p in table_dir.iterdir() if not p.name.startswith((".", "_"))] == [f"base_{c.highest_write_id:07d}_v{c.txn_id:07d}"]


def test_dimension_upsert_hourly(airflow):
    airflow("hive_acid_dimension_upsert", "2026-01-01T00:00:00+00:00")
    airflow("hive_acid_dimension_upsert", "2026-01-01T01:00:00+00:00")
    expected: dict[int, dict] = {}
    for f in sorted((airflow.data / "dimension").glob("customers_2026010100.parquet")) + \
            sorted((airflow.data / "dimension").glob("customers_2026010101.parquet")):
        for r in pq.read_table(f).to_pylist():
            old = expected.get(r["customer_id"])
            if old is None or (old["email"], old["tier"]) != (r["email"], r["tier"]):
                expected[r["customer_id"]] = r       # SCD1: changed attributes overwrite
    rows = {r["customer_id"]: r for r in read_rows(airflow.metastore(), "dim.customer")}
    assert rows == expected
    events = airflow.asset_events("hive-acid://dim/customer")
    assert len(events) == 2 and events[0]["write_id"] == 1 and events[1]["write_id"] == 2
    assert events[1]["rows_updated"] >= 1 and set(events[1]) >= {"rows_inserted", "rows_updated", "rows_deleted"}


def test_gdpr_delete(airflow):
    airflow("hive_acid_gdpr_delete", "2026-01-02")
    ms = airflow.metastore()
    customers = read_rows(ms, "crm.customers")
    orders = read_rows(ms, "sales.orders")
    assert sorted(r["id"] for r in customers) == [i for i in range(1, 21) if i not in (3, 7, 11)]
    assert len(orders) == 51 and not {r["customer_id"] for r in orders} & {3, 7, 11}
    assert {r["ds"] for r in orders} == {"2026-01-01", "2026-01-02", "2026-01-03"}


def test_restatement_aborts_as_a_whole_then_commits(airflow):
    proc = airflow("hive_acid_restatement", "2026-01-02", {"inject_failure": True}, ok=False)
    assert proc.state == "failed" and "validation failed" in proc.stdout + proc.stderr
    ms = airflow.metastore()
    assert read_rows(ms, "sales.restated_orders") == [] and read_rows(ms, "sales.daily_totals") == []
    [txn] = [t for t in ms.txns.show_transactions() if t.reason == "restatement failed validation"]
    assert txn.state.name == "ABORTED"
    assert sorted(ms.txns.write_ids_of(txn.txn_id)) == ["sales.daily_totals", "sales.restated_orders"]

    airflow("hive_acid_restatement", "2026-01-03")
    orders = read_rows(ms, "sales.restated_orders")
    totals = read_rows(ms, "sales.daily_totals")
    assert len(orders) == 10 and {r["ds"] for r in orders} == {"2026-01-03"}
    assert totals == [{"orders": 10, "amount": 55.0, "ds": "2026-01-03"}]
    events = airflow.asset_events("hive-acid://sales/daily_totals")
    assert events and events[-1]["rows_inserted"] == 1


def test_maintenance_compacts_and_cleans_then_report_runs(airflow):
    ms = airflow.metastore()
    before = sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"])
    airflow("hive_acid_maintenance", "2026-01-02")
    comps = ms.compactions.show(db="dim", table="customer")
    assert comps and comps[-1].state.label == "succeeded", [c.to_dict() for c in comps]
    assert sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"]) == before
    airflow("hive_acid_customer_report", "2026-01-02")


def test_streaming_ingest_hourly_takes_each_file_once(airflow):
    airflow("hive_acid_streaming_ingest", "2026-01-03T10:00:00+00:00")
    airflow("hive_acid_streaming_ingest", "2026-01-03T11:00:00+00:00")
    ms = airflow.metastore()
    rows = read_rows(ms, "web.clicks")
    ids = sorted(r["click_id"] for r in rows)
    assert len(ids) == 600 and len(set(ids)) == 600, "two hours of three files, each file once"
    batches = ms.txns.stream_batches("web.clicks")
    assert len(batches) == 6 and len({b.query_id for b in batches}) == 1, "one query, kept in the checkpoint"
    assert sorted(b.batch_id for b in batches) == list(range(6)) and all(b.rows == 100 for b in batches)
    assert len({b.write_id for b in batches}) == 6
    events = airflow.asset_events("hive-acid://web/clicks")
    assert [(e["batches"], e["rows"]) for e in events] == [(3, 300), (3, 300)]
