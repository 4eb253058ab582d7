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

import jsonschema
import pyarrow.parquet as pq
import pytest
from conftest import REPO
from tablerows import read_rows

from airflow_hive_acid.assets import convert_asset_to_openlineage, table_asset

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    """An Airflow home and a hive-acid home of their own; ``run(dag, date)`` runs a DAG test."""
    root = tmp_path_factory.mktemp("dags")
    env = {**os.environ, "AIRFLOW_HOME": str(root / "airflow"), "HIVE_ACID_HOME": str(root / "hive-acid"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
           # OpenLineage's file transport: every event of every run, one JSON document per line
           "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "append": True,
                                                          "log_file_path": str(root / "openlineage.jsonl")}),
           "AIRFLOW__OPENLINEAGE__NAMESPACE": "hive-acid-examples",
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

    def lineage(dag_id: str) -> dict[str, list[dict]]:
        """The OpenLineage events of a DAG's tasks, by task id, in the order they were emitted."""
        path = root / "openlineage.jsonl"
        out: dict[str, list[dict]] = {}
        for line in path.read_text().splitlines() if path.exists() else []:
            event = json.loads(line)
            name = event.get("job", {}).get("name", "")
            if name.startswith(f"{dag_id}."):
                out.setdefault(name[len(dag_id) + 1:], []).append(event)
        return out

    run.metastore = metastore
    run.asset_events = asset_events
    run.lineage = lineage
    run.data = root / "hive-acid" / "incoming"
    return run


SUMMARY_HEADER = re.compile(r"partition +inserted +updated +deleted +files +bytes +published")


def task_log(output: str, task_id: str) -> list[str]:
    """A task's log lines as ``airflow dags test`` prints them, from its start to its end."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if f"[DAG TEST] starting task_id={task_id} " in line)
    end = next(i for i, line in enumerate(lines) if f"[DAG TEST] end task task_id={task_id} " in line)
    return lines[start:end + 1]


def test_quickstart(airflow):
    proc = airflow("hive_acid_quickstart", "2026-01-01")
    for task in ("load", "merge_changes", "delete_negative_balances"):
        log = task_log(proc.stdout + proc.stderr, task)
        assert len(log) < 60, f"{task}: {len(log)} lines\n" + "\n".join(log)
        assert any("hive-acid: " in line and " write " in line for line in log), "a line per stage"
        assert any(SUMMARY_HEADER.search(line) for line in log), "the summary table"
    ms = airflow.metastore()
    rows = sorted(read_rows(ms, "demo.customers"), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == [1, 2, 3, 4, 6, 7, 10, 11, 12, 13]     # 8, 9 merged away, 5 deleted
    assert {r["city"] for r in rows if r["id"] in (2, 3, 4)} == {"Nairobi"}
    assert {r["city"] for r in rows if r["id"] >= 11} == {"Lima"}
    [c] = ms.compactions.show(db="demo", table="customers")
    assert (c.type.name, c.state.label) == ("MAJOR", "succeeded")
    table_dir = Path(ms.catalog.get_table("demo.customers").location)
    assert [p.name for p in table_dir.iterdir() if not p.name.startswith((".", "_"))] == [f"base_{c.highest_write_id:07d}_v{c.txn_id:07d}"]

    # lineage, as OpenLineage's file transport received it
    events = airflow.lineage("hive_acid_quickstart")
    done = {task: next(e for e in evs if e["eventType"] == "COMPLETE") for task, evs in events.items()
            if any(e["eventType"] == "COMPLETE" for e in evs)}
    assert {"create_table", "load", "merge_changes", "delete_negative_balances", "compact", "show_table"} <= set(done)
    table = ("hive-acid://demo", "customers")
    assert (convert_asset_to_openlineage(table_asset("demo.customers")).namespace,
            convert_asset_to_openlineage(table_asset("demo.customers")).name) == table, "the Asset's identity"
    [created] = done["create_table"]["outputs"]
    assert (created["namespace"], created["name"]) == table and [f["name"] for f in created["facets"]["schema"]["fields"]] \
        == ["id", "name", "city", "balance"], "create-table reports the table with its schema"
    merge = done["merge_changes"]
    [out] = [o for o in merge["outputs"] if (o["namespace"], o["name"]) == table]
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == [
        c.name for c in ms.catalog.get_table("demo.customers").columns]
    run = merge["run"]["facets"]["hiveAcid"]
    writes = ms.txns.writes_of(run["txnId"])
    assert run["committed"] is True and run["operation"] == "merge"
    assert run["writeId"] == writes[0].write_id and run["validWriteIds"].startswith("demo.customers:")
    acid = out["outputFacets"]["hiveAcidWrite"]
    assert (acid["rowsInserted"], acid["rowsUpdated"], acid["rowsDeleted"]) == (
        sum(w.rows_inserted for w in writes), sum(w.rows_updated for w in writes), sum(w.rows_deleted for w in writes))
    assert out["outputFacets"]["outputStatistics"]["size"] == sum(
        w.delta_bytes + w.delete_delta_bytes + w.base_bytes for w in writes) > 0
    assert {(i["namespace"], i["name"]) for i in merge["inputs"]} >= {table}, "MERGE reads its target"
    assert any(i["namespace"] == "file" for i in merge["inputs"]), "and its source file"
    assert done["compact"]["run"]["facets"]["hiveAcid"]["compactionId"] == c.id
    facets = json.loads((REPO / "docs" / "lineage-facets.json").read_text())["$defs"]   # what the docs promise
    jsonschema.validate(run, facets["HiveAcidRunFacet"]["allOf"][1])
    jsonschema.validate(acid, facets["HiveAcidWriteOutputDatasetFacet"]["allOf"][1])
    read = done["show_table"]
    assert [(i["namespace"], i["name"]) for i in read["inputs"]] == [table]
    assert read["run"]["facets"]["hiveAcid"]["validWriteIds"].startswith("demo.customers:")


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


ORDERS, TOTALS = "sales.restated_orders", "sales.daily_totals"


def test_restatement_aborts_as_a_whole_then_commits(airflow):
    proc = airflow("hive_acid_restatement", "2026-01-02", {"inject_failure": True}, ok=False)
    assert proc.state == "failed" and "validation failed" in proc.stdout + proc.stderr
    ms = airflow.metastore()
    assert read_rows(ms, "sales.restated_orders") == [] and read_rows(ms, "sales.daily_totals") == []
    [txn] = [t for t in ms.txns.show_transactions() if t.reason == "restatement failed validation"]
    assert txn.state.name == "ABORTED"
    assert sorted(ms.txns.write_ids_of(txn.txn_id)) == ["sales.daily_totals", "sales.restated_orders"]
    events = airflow.lineage("hive_acid_restatement")
    assert [e["eventType"] for e in events["validate"]][-1] == "FAIL", "the failed run is reported"
    joined = next(e for e in events["restate_orders"] if e["eventType"] == "COMPLETE")["run"]["facets"]["hiveAcid"]
    assert (joined["txnId"], joined["committed"]) == (txn.txn_id, False), "written in the txn the abort ended"
    both = {("hive-acid://sales", "restated_orders"), ("hive-acid://sales", "daily_totals")}
    begun = next(e for e in events["begin"] if e["eventType"] == "COMPLETE")
    assert {(o["namespace"], o["name"]) for o in begun["outputs"]} == both, "begin: the tables it opened the txn for"
    assert all(o["facets"]["schema"]["fields"] for o in begun["outputs"])
    assert begun["run"]["facets"]["hiveAcid"] == {**begun["run"]["facets"]["hiveAcid"], "operation": "begin",
                                                  "txnId": txn.txn_id, "committed": False}
    aborted = [e for e in events["abort"] if e["eventType"] == "FAIL"]    # fail_task=True: the run ends red
    assert len(aborted) == 1 and {(o["namespace"], o["name"]) for o in aborted[0]["outputs"]} == both
    assert aborted[0]["run"]["facets"]["hiveAcid"] == {**aborted[0]["run"]["facets"]["hiveAcid"],
                                                       "operation": "abort", "txnId": txn.txn_id, "committed": False}

    airflow("hive_acid_restatement", "2026-01-03")
    orders = read_rows(ms, "sales.restated_orders")
    totals = read_rows(ms, "sales.daily_totals")
    assert len(orders) == 10 and {r["ds"] for r in orders} == {"2026-01-03"}
    assert totals == [{"orders": 10, "amount": 55.0, "ds": "2026-01-03"}]
    events = airflow.asset_events("hive-acid://sales/daily_totals")
    assert events and events[-1]["rows_inserted"] == 1
    [commit] = [e for e in airflow.lineage("hive_acid_restatement")["commit"] if e["eventType"] == "COMPLETE"]
    run = commit["run"]["facets"]["hiveAcid"]
    assert (run["operation"], run["committed"]) == ("commit", True)
    writes = {f"{w.db}.{w.table}": w for w in ms.txns.writes_of(run["txnId"])}
    assert set(writes) == {ORDERS, TOTALS}, "the commit reports the txn the metastore says wrote both tables"
    written = {o["name"]: o["outputFacets"]["hiveAcidWrite"] for o in commit["outputs"]}
    assert written == {"restated_orders": {**written["restated_orders"], "rowsInserted": 10, "partitions": ["ds=2026-01-03"]},
                       "daily_totals": {**written["daily_totals"], "rowsInserted": 1, "partitions": ["ds=2026-01-03"]}}
    assert written["restated_orders"]["bytes"] == sum(getattr(writes[ORDERS], f"{k}_bytes") for k in ("delta", "delete_delta", "base")) > 0


def test_maintenance_compacts_and_cleans_then_report_runs(airflow):
    ms = airflow.metastore()
    before = sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"])
    airflow("hive_acid_maintenance", "2026-01-02")
    comps = ms.compactions.show(db="dim", table="customer")
    assert comps and comps[-1].state.label == "succeeded", [c.to_dict() for c in comps]
    assert sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"]) == before
    worker = next(e for e in airflow.lineage("hive_acid_maintenance")["compaction_worker"] if e["eventType"] == "COMPLETE")
    assert ("hive-acid://dim", "customer") in {(o["namespace"], o["name"]) for o in worker["outputs"]}
    assert worker["run"]["facets"]["hiveAcid"]["compactionId"] in {c.id for c in ms.compactions.show()}
    cleaner = next(e for e in airflow.lineage("hive_acid_maintenance")["cleaner"] if e["eventType"] == "COMPLETE")
    assert ("hive-acid://dim", "customer") in {(o["namespace"], o["name"]) for o in cleaner["outputs"]}
    assert cleaner["run"]["facets"]["hiveAcid"]["operation"] == "clean"
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
    ingests = [e for e in airflow.lineage("hive_acid_streaming_ingest")["ingest_clicks"] if e["eventType"] == "COMPLETE"]
    assert len(ingests) == 2
    last = ingests[-1]
    assert [i["namespace"] for i in last["inputs"]] == ["file"] and last["inputs"][0]["name"].endswith("clicks_landing")
    assert [(o["namespace"], o["name"]) for o in last["outputs"]] == [("hive-acid://web", "clicks")]
    assert last["outputs"][0]["outputFacets"]["hiveAcidWrite"]["rowsInserted"] == 300
    committed = last["run"]["facets"]["hiveAcid"]["streamBatches"]
    assert sorted(b["writeId"] for b in committed) == sorted(b.write_id for b in batches if b.batch_id >= 3)
