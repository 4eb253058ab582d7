"""The Airflow layer without Spark: provider registration, Asset URIs, the hooks' connection and
heartbeat handling, the txn operators' XCom contract, the compaction trigger and sensor."""
import asyncio
import json
import time
from collections import defaultdict
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest

from airflow_hive_acid import get_provider_info
from airflow_hive_acid.assets import convert_asset_to_openlineage, sanitize_uri, table_asset, table_asset_uri
from airflow_hive_acid.heartbeat import HeartbeatLost
from airflow_hive_acid.hooks import AcidMetastoreHook, AcidSparkHook
from airflow_hive_acid.metastore import TxnState, WriteStat
from airflow_hive_acid.operators import (
    AcidAbortTransactionOperator,
    AcidBeginTransactionOperator,
    AcidCommitTransactionOperator,
    AcidCreateTableOperator,
    AcidMergeOperator,
    AcidUpdateOperator,
)
from airflow_hive_acid.operators.base import parse_txn_id, task_key
from airflow_hive_acid.sensors import CompactionSensor
from airflow_hive_acid.triggers import CompactionTrigger


@pytest.fixture
def env_ms(ms, monkeypatch, tmp_path):
    """The test metastore as the embedded default the hooks fall back to."""
    monkeypatch.setenv("HIVE_ACID_METASTORE", ms.url)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    return ms


def context(task_id="t", run_id="manual__1", dag_id="d"):
    ti = SimpleNamespace(dag_id=dag_id, task_id=task_id, run_id=run_id, map_index=-1)
    events = defaultdict(lambda: SimpleNamespace(extra={}))
    return {"ti": ti, "outlet_events": events}


# -- provider registration -------------------------------------------------------------------
def test_provider_info_validates_against_airflows_schema():
    import importlib.resources

    import jsonschema
    schema = json.loads(importlib.resources.files("airflow").joinpath("provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "airflow-hive-acid"
    conn = info["connection-types"][0]
    assert conn["connection-type"] == "hive_acid"
    assert set(conn["conn-fields"]) == {"metastore_url", "warehouse", "txn_timeout", "heartbeat_interval"}
    assert info["asset-uris"][0]["schemes"] == ["hive-acid"]


def test_airflow_providers_manager_loads_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    assert "airflow-hive-acid" in ProvidersManager().providers
    runtime = ProvidersManagerTaskRuntime()
    assert runtime.hooks["hive_acid"].hook_class_name.endswith("AcidMetastoreHook")
    assert runtime.asset_uri_handlers["hive-acid"] is sanitize_uri
    assert runtime.asset_to_openlineage_converters["hive-acid"] is convert_asset_to_openlineage


# -- assets ----------------------------------------------------------------------------------
def test_asset_uris_are_normalized_and_validated():
    assert sanitize_uri(urlsplit("hive-acid://Sales/Orders/DS=2024-01-01")).geturl() == \
        "hive-acid://sales/orders/ds=2024-01-01"
    assert table_asset_uri("Dim.Customer") == "hive-acid://dim/customer"
    assert table_asset("dim.customer").name == "hive-acid://dim/customer"
    for bad, why in [("hive-acid:///orders", "needs a database"), ("hive-acid://sales", "needs a table"),
                     ("hive-acid://sales/or-ders", "bad"), ("hive-acid://sales/orders/ds=..", "bad"),
                     ("hive-acid://sales/orders/ds", "bad"), ("hive-acid://sales/orders?x=1", "no query")]:
        with pytest.raises(ValueError, match=why):
            sanitize_uri(urlsplit(bad))


# -- hooks -----------------------------------------------------------------------------------
def test_metastore_hook_reads_its_connection(monkeypatch, tmp_path, warehouse):
    url = f"sqlite:///{tmp_path / 'conn.db'}"
    monkeypatch.setenv("AIRFLOW_CONN_HIVE_ACID_TEST", json.dumps({
        "conn_type": "hive_acid", "extra": {"metastore_url": url, "warehouse": str(warehouse),
                                            "txn_timeout": 90, "heartbeat_interval": 7}}))
    hook = AcidMetastoreHook("hive_acid_test")
    ms = hook.initialize()
    assert ms.url == url and ms.config.txn_timeout == 90 and ms.config.warehouse == str(warehouse)
    assert hook.heartbeat_interval == 7
    assert hook.test_connection()[0] is True
    assert asyncio.run(AcidMetastoreHook("hive_acid_test").aget_metastore_url()) == url


def test_metastore_hook_unknown_connection_is_an_error(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    from airflow.sdk.exceptions import AirflowNotFoundException
    with pytest.raises(AirflowNotFoundException, match="nope"):
        _ = AcidMetastoreHook("nope").metastore_url


def test_heartbeat_context_keeps_txn_alive_and_fails_when_aborted(env_ms):
    ms = env_ms
    ms.set_setting("hive.txn.timeout", "2")
    hook = AcidMetastoreHook()
    txn = ms.txns.open_txn()
    with hook.heartbeat(txn) as beater:
        assert beater.interval == pytest.approx(2 / 3)
        time.sleep(2.5)                         # longer than the timeout: only the beats keep it open
        assert ms.txns.abort_timed_out() == []
    assert beater.beats >= 2 and not beater._thread.is_alive()
    assert ms.txns.get_txn(txn).state is TxnState.OPEN

    lost = []
    with pytest.raises(HeartbeatLost, match="aborted"):
        with hook.heartbeat(txn, on_lost=lost.append):
            ms.txns.abort_txn(txn, "aborted elsewhere")
            time.sleep(1.5)
    assert lost and "refused" in lost[0]


def test_spark_hook_defaults_to_local_master_without_connection(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("HIVE_ACID_SPARK_MASTER", raising=False)
    assert AcidSparkHook().fallback_master == "local[*]"
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "spark://h:7077"}))
    assert AcidSparkHook().fallback_master is None


# -- operators: XCom contract of a multi-task transaction ---------------------------------------
def test_begin_commit_contract_and_retry_reuses_the_open_txn(env_ms):
    ms = env_ms
    ms.catalog.create_table("s.a", "id bigint")
    ms.catalog.create_table("s.b", "id bigint")
    begin = AcidBeginTransactionOperator(task_id="begin", tables=["s.a", "S.B"])
    out = begin.execute(context("begin"))
    assert set(out) == {"txn_id", "write_ids", "snapshot"}
    assert out["write_ids"] == {"s.a": 1, "s.b": 1}
    assert out["snapshot"]["s.a"]["valid_write_ids"].startswith("s.a:")
    again = begin.execute(context("begin"))          # a retry of the same task instance
    assert again["txn_id"] == out["txn_id"] and again["write_ids"] == out["write_ids"]
    other = begin.execute(context("begin", run_id="manual__2"))
    assert other["txn_id"] != out["txn_id"]

    both = [("hive-acid://s", "a"), ("hive-acid://s", "b")]
    lineage = begin.get_openlineage_facets_on_complete(None)
    assert sorted((o.namespace, o.name) for o in lineage.outputs) == both and not lineage.inputs
    assert (lineage.run_facets["hiveAcid"].operation, lineage.run_facets["hiveAcid"].txnId) == ("begin", other["txn_id"])

    commit = AcidCommitTransactionOperator(task_id="commit", txn_id=str(out["txn_id"]), tables=["s.a"])
    assert [o.uri for o in commit.outlets] == ["hive-acid://s/a"]
    ms.txns.add_writes(out["txn_id"], [WriteStat("s", "a", "", 1, rows_inserted=5, delta_files=1, delta_bytes=300)])
    ctx = context("commit")
    res = commit.execute(ctx)
    assert res["committed"] is True and ms.txns.get_txn(out["txn_id"]).state is TxnState.COMMITTED
    lineage = commit.get_openlineage_facets_on_complete(None)
    outputs = {o.name: o for o in lineage.outputs}
    assert sorted(outputs) == ["a", "b"], "every table the txn held a write id on"
    written = outputs["a"].outputFacets["hiveAcidWrite"]
    assert (written.rowsInserted, written.files, written.bytes) == (5, 1, 300)
    assert outputs["b"].outputFacets["hiveAcidWrite"].rowsInserted == 0
    assert lineage.run_facets["hiveAcid"].committed is True
    assert commit.execute(context("commit"))["committed"] is True        # idempotent

    abort = AcidAbortTransactionOperator(task_id="abort", txn_id=other)   # the XCom dict works too
    assert abort.execute(context("abort"))["reason"] == "aborted by Airflow failure branch"
    assert ms.txns.get_txn(other["txn_id"]).state is TxnState.ABORTED
    lineage = abort.get_openlineage_facets_on_complete(None)
    assert sorted((o.namespace, o.name) for o in lineage.outputs) == both
    assert (lineage.run_facets["hiveAcid"].operation, lineage.run_facets["hiveAcid"].committed) == ("abort", False)
    failing = AcidAbortTransactionOperator(task_id="abort3", txn_id=ms.txns.open_txn(), reason="bad", fail_task=True)
    from airflow.sdk.exceptions import AirflowFailException
    with pytest.raises(AirflowFailException, match="aborted: bad"):
        failing.execute(context("abort3"))
    with pytest.raises(AirflowFailException, match="already committed"):     # final: no retry
        AcidAbortTransactionOperator(task_id="abort2", txn_id=out["txn_id"]).execute(context("abort2"))


def test_operator_input_is_validated(env_ms):
    for bad in ("x", "-3", "1.5"):
        with pytest.raises(ValueError, match="txn_id"):
            parse_txn_id(bad)
    assert parse_txn_id({"txn_id": "12"}) == 12 and parse_txn_id(None) is None
    with pytest.raises(ValueError, match="at least one WHEN"):
        AcidMergeOperator(task_id="m", table="s.a", source="/x", on="id", clauses=[])
    env_ms.catalog.create_table("s.p", "id bigint, v int", partitioned_by="ds string", bucketed_by="id", buckets=2)
    from airflow.sdk.exceptions import AirflowFailException  # bad input: no retry can fix it
    op = AcidUpdateOperator(task_id="u", table="s.p", set="ds = '2024'", where="true")
    with pytest.raises(AirflowFailException, match="partition column 'ds'"):
        op.execute(context("u"))
    op = AcidUpdateOperator(task_id="u2", table="s.p", set={"id": "id + 1"})
    with pytest.raises(AirflowFailException, match="bucket column 'id'"):
        op.execute(context("u2"))
    with pytest.raises(AirflowFailException, match="unknown table"):
        AcidUpdateOperator(task_id="u3", table="s.nope", set="v = 1").execute(context("u3"))
    assert AcidMergeOperator(task_id="m2", table="s.p", source="/x", on="id, ds",
                             clauses=["WHEN MATCHED THEN DELETE"]).outlets[0].uri == "hive-acid://s/p"
    joined = AcidMergeOperator(task_id="m3", table="s.p", source="/x", on="id", txn_id="{{ x }}",
                               clauses=["WHEN MATCHED THEN DELETE"])
    assert joined.outlets == []       # a joined statement's table changes when the txn commits


def test_create_table_operator_initializes_and_is_idempotent(tmp_path, monkeypatch):
    monkeypatch.setenv("HIVE_ACID_METASTORE", f"sqlite:///{tmp_path / 'fresh.db'}")
    monkeypatch.setenv("HIVE_ACID_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    op = AcidCreateTableOperator(task_id="c", table="d.t", columns="id bigint, s string", bucketed_by=["id"], buckets=2)
    first = op.execute(context("c"))
    assert op.execute(context("c")) == first
    assert first["location"].startswith(str(tmp_path / "wh"))


def test_task_key_is_stable_and_bounded():
    ctx = context("t", run_id="r" * 400)
    assert task_key(ctx) == task_key(context("t", run_id="r" * 400)) and len(task_key(ctx)) <= 256
    assert task_key(context("t")) == "airflow:d.t.manual__1"


# -- compaction trigger and sensor -------------------------------------------------------------
def _first_event(trigger):
    async def first():
        async for ev in trigger.run():
            return ev.payload
    return asyncio.run(first())


def test_trigger_serializes_round_trip():
    t = CompactionTrigger(hive_acid_conn_id="c", table="s.a", partition="ds=1", target_states=["ready_for_cleaning"],
                          poll_interval=3, timeout=60, started_at=5.0)
    path, kwargs = t.serialize()
    assert path == "airflow_hive_acid.triggers.compaction.CompactionTrigger"
    assert CompactionTrigger(**kwargs).serialize() == (path, kwargs)
    assert kwargs["target_states"] == ["ready for cleaning"]
    with pytest.raises(ValueError, match="compaction_id, compaction_ids or table"):
        CompactionTrigger(hive_acid_conn_id="c")
    with pytest.raises(ValueError, match="compaction_ids alone"):
        CompactionTrigger(hive_acid_conn_id="c", table="s.a", compaction_ids=[1])
    listed = CompactionTrigger(hive_acid_conn_id="c", compaction_ids=[3, 4], poll_interval=1)
    assert CompactionTrigger(**listed.serialize()[1]).serialize() == listed.serialize()
    with pytest.raises(ValueError):
        CompactionTrigger(hive_acid_conn_id="c", table="s.a", target_states=["bogus"])


def test_trigger_events_success_failed_timeout(env_ms):
    ms = env_ms
    ms.catalog.create_table("s.a", "id bigint")
    q = ms.compactions.enqueue("s.a", None, "major")
    trig = dict(hive_acid_conn_id="hive_acid_default", poll_interval=0.2)
    ev = _first_event(CompactionTrigger(compaction_id=q.id, timeout=0.5, **trig))
    assert ev["status"] == "timeout" and ev["compaction"]["state"] == "initiated"
    ms.compactions.claim("w1")
    ms.compactions.mark_compacted(q.id)
    ev = _first_event(CompactionTrigger(table="s.a", target_states=["ready for cleaning"], **trig))
    assert ev["status"] == "success" and ev["compaction"]["id"] == q.id
    q2 = ms.compactions.enqueue("s.a", None, "minor")
    ms.compactions.claim("w1")
    ms.compactions.mark_failed(q2.id, "boom")
    ev = _first_event(CompactionTrigger(compaction_id=q2.id, **trig))
    assert ev["status"] == "failed" and "boom" in ev["message"]


def test_sensor_pokes_and_fails_at_once_on_failed(env_ms):
    from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout
    ms = env_ms
    ms.catalog.create_table("s.a", "id bigint")
    q = ms.compactions.enqueue("s.a", None, "major")
    sensor = CompactionSensor(task_id="s", compaction_id=str(q.id))
    assert sensor.poke(context("s")).is_done is False
    ms.compactions.claim("w")
    ms.compactions.mark_compacted(q.id)
    ms.compactions.mark_cleaned(q.id)
    done = sensor.poke(context("s"))
    assert done.is_done and done.xcom_value["state"] == "succeeded"
    q2 = ms.compactions.enqueue("s.a", None, "major")
    ms.compactions.claim("w")
    ms.compactions.mark_failed(q2.id, "disk full")
    with pytest.raises(AirflowFailException, match="disk full"):
        CompactionSensor(task_id="s2", table="s.a").poke(context("s2"))
    resumed = CompactionSensor(task_id="s3", table="s.a", deferrable=True)
    assert resumed.execute_complete(context("s3"), {"status": "success", "compaction": {"id": 1}}) == {"id": 1}
    with pytest.raises(AirflowSensorTimeout):
        resumed.execute_complete(context("s3"), {"status": "timeout", "message": "late"})
    with pytest.raises(AirflowFailException):
        resumed.execute_complete(context("s3"), {"status": "failed", "message": "x"})



def test_sensor_waits_for_every_compaction_of_a_list(env_ms):
    """``compaction_ids``: the ids as a list, XCom dicts (a worker result's ``id``, an initiator
    decision's ``compaction_id``) or a rendered template's string; all must reach a target state,
    and one failure fails the sensor at once."""
    from airflow.sdk.exceptions import AirflowFailException, TaskDeferred
    ms = env_ms
    ms.catalog.create_table("s.l", "id bigint")
    ms.catalog.create_table("s.m", "id bigint")
    q1 = ms.compactions.enqueue("s.l", None, "major")
    q2 = ms.compactions.enqueue("s.m", None, "minor")
    forms = [[q1.id, {"id": q2.id}], f"[{q1.id}, {q2.id}]",
             str([{"compaction_id": q1.id, "action": "initiated"}, {"id": q2.id, "state": "working"}])]
    for form in forms:
        assert CompactionSensor(task_id="l", compaction_ids=form).poke(context("l")).is_done is False
    with pytest.raises(TaskDeferred) as deferred:
        CompactionSensor(task_id="l", compaction_ids=forms[1], target_states=["ready for cleaning", "succeeded"],
                         deferrable=True, timeout=60, poke_interval=0.2).execute(context("l"))
    trigger = deferred.value.trigger
    assert (trigger.compaction_ids, trigger.compaction_id, trigger.table) == ([q1.id, q2.id], None, None)
    for q in (q1, q2):
        ms.compactions.claim("w", cq_id=q.id)
        ms.compactions.mark_compacted(q.id)
    ev = _first_event(trigger)
    assert ev["status"] == "success" and [c["id"] for c in ev["compactions"]] == [q1.id, q2.id]
    resumed = CompactionSensor(task_id="l", compaction_ids=forms[1], deferrable=True)
    assert [c["state"] for c in resumed.execute_complete(context("l"), ev)] == ["ready for cleaning"] * 2
    done = CompactionSensor(task_id="l", compaction_ids=forms[0], target_states=["ready for cleaning"]).poke(context("l"))
    assert done.is_done and [c["id"] for c in done.xcom_value] == [q1.id, q2.id]
    q3 = ms.compactions.enqueue("s.l", None, "minor")
    ms.compactions.claim("w", cq_id=q3.id)
    ms.compactions.mark_failed(q3.id, "out of disk")
    with pytest.raises(AirflowFailException, match=f"compaction {q3.id} .*out of disk"):
        CompactionSensor(task_id="l", compaction_ids=[q1.id, q3.id], deferrable=True).execute(context("l"))


def test_sensor_with_no_compactions_to_wait_for_succeeds_at_once(env_ms):
    """A maintenance run with nothing to compact: the sensor succeeds without deferring, in every
    mode, whether the empty list is a literal or a rendered template."""
    for form in ([], "[]", " [] ", ()):
        assert CompactionSensor(task_id="e", compaction_ids=form, deferrable=True).execute(context("e")) == []
        assert CompactionSensor(task_id="e", compaction_ids=form).execute(context("e")) == []
    assert _first_event(CompactionTrigger(hive_acid_conn_id="hive_acid_default", compaction_ids=[]))["status"] == "success"


def test_sensor_rejects_what_names_no_compactions(env_ms):
    with pytest.raises(ValueError, match="compaction_ids alone"):
        CompactionSensor(task_id="x", compaction_ids=[1], table="s.a")
    with pytest.raises(ValueError, match="needs compaction_id, compaction_ids or table"):
        CompactionSensor(task_id="x")
    with pytest.raises(ValueError, match=r"compaction_ids\[1\] must be positive"):
        CompactionSensor(task_id="x", compaction_ids=[1, 0])
    with pytest.raises(ValueError, match=r"compaction_ids\[0\] must be a compaction id"):
        CompactionSensor(task_id="x", compaction_ids=[True])
    with pytest.raises(ValueError, match="names no compaction"):
        CompactionSensor(task_id="x", compaction_ids=[{"action": "skipped", "compaction_id": None}])
    with pytest.raises(ValueError, match="must be a list of compaction ids"):
        CompactionSensor(task_id="x", compaction_ids={"id": 1})
    for rendered, why in (("None", "XCom it names is missing"), ("3, x", "list of compaction ids"),
                          ("7", "list of compaction ids")):
        with pytest.raises(ValueError, match=why):
            CompactionSensor(task_id="x", compaction_ids=rendered).poke(context("x"))
    with pytest.raises(Exception, match="unknown compaction id 999"):
        CompactionSensor(task_id="x", compaction_ids=[999]).poke(context("x"))
    sensor = CompactionSensor(task_id="x", compaction_id={"id": 5, "txn_id": 77})
    assert sensor._id() == 5, "AcidCompactOperator's XCom names its compaction by id, not by its txn"


def test_maintenance_dag_waits_for_what_the_initiator_queued_and_the_worker_ran():
    """The example maintenance DAG's template, rendered by Airflow's Jinja: the ids of the
    initiator's ``initiated`` / ``already queued`` decisions and of the worker's results, and none
    on a day with nothing to do."""
    import importlib.util
    import sys

    from airflow.sdk.definitions._internal.templater import create_template_env
    from conftest import REPO
    sys.path.insert(0, str(REPO / "dags"))
    try:
        spec = importlib.util.spec_from_file_location("maintenance_dag", REPO / "dags" / "hive_acid_maintenance.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "dags"))
    sensor = module.dag.task_dict["wait_for_compaction"]
    assert module.dag.task_dict["compaction_worker"].downstream_task_ids == {"wait_for_compaction"}

    def rendered(initiator, worker):
        ti = SimpleNamespace(xcom_pull=lambda task_ids: {"initiator": initiator, "compaction_worker": worker}[task_ids])
        return create_template_env().from_string(sensor.compaction_ids).render(ti=ti)

    decisions = [{"action": "initiated", "compaction_id": 4}, {"action": "skipped", "compaction_id": None},
                 {"action": "already queued", "compaction_id": 2}, {"action": "did not initiate", "compaction_id": 9}]
    assert parse_ids(rendered(decisions, [{"id": 4, "state": "ready for cleaning"}, {"id": 6}])) == [4, 2, 6]
    assert parse_ids(rendered([{"action": "skipped", "compaction_id": None}], [])) == []
    assert parse_ids(rendered([], [])) == []


def parse_ids(text):
    from airflow_hive_acid.sensors.compaction import parse_compaction_ids
    return parse_compaction_ids(text)

# -- lineage ---------------------------------------------------------------------------------
def test_a_failed_statement_reports_the_datasets_it_meant_to_touch(env_ms):
    from airflow.sdk.exceptions import AirflowFailException
    op = AcidMergeOperator(task_id="m", table="db.nosuch", source="/landing/changes.parquet", on="id",
                           clauses=["WHEN NOT MATCHED THEN INSERT *"])
    with pytest.raises(AirflowFailException, match="nosuch"):
        op.execute(context("m"))
    lineage = op.get_openlineage_facets_on_failure(None)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", "/landing/changes.parquet"),
                                                              ("hive-acid://db", "nosuch")]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [("hive-acid://db", "nosuch")]
    assert lineage.run_facets["hiveAcid"].committed is False and lineage.run_facets["hiveAcid"].operation == "merge"
    assert convert_asset_to_openlineage(table_asset("db.nosuch")).namespace == "hive-acid://db"



def test_streaming_ingest_gives_the_job_its_metastore_in_the_environment(env_ms, monkeypatch, tmp_path):
    """A metastore URL may hold a password: it must not travel in the spec on spark-submit's
    command line, but in the driver's environment."""
    from airflow_hive_acid.errors import JobFailed
    from airflow_hive_acid.operators import AcidStreamingIngestOperator
    env_ms.catalog.create_table("s.e", "id bigint")
    op = AcidStreamingIngestOperator(task_id="i", table="s.e", landing=str(tmp_path / "landing"),
                                     checkpoint=str(tmp_path / "cp"))
    specs = []

    def submit(spec):
        specs.append(spec.to_json())
        raise JobFailed("not run here")

    monkeypatch.setattr(op.spark_hook, "submit_job", submit)
    with pytest.raises(JobFailed):
        op.execute(context("i"))
    assert env_ms.url not in specs[0] and '"metastore": null' in specs[0]
    assert op.spark_hook.env == {"HIVE_ACID_METASTORE": env_ms.url}
