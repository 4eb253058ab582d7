"""The DML operators through real spark-submit (AcidSparkHook over SparkSubmitHook): commit,
XCom and Asset event; a retry that must not write again; a task killed mid-job (on_kill) and a
task process killed outright (the housekeeper ends its txn)."""
import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from jobprocs import python_workers
from tablerows import read_rows
from test_airflow_unit import context

from airflow_hive_acid.assets import table_asset
from airflow_hive_acid.metastore import TxnState
from airflow_hive_acid.operators import AcidInsertOperator, AcidMergeOperator, AcidUpdateOperator

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture
def env(sqlite_ms, monkeypatch, tmp_path):
    monkeypatch.setenv("HIVE_ACID_METASTORE", sqlite_ms.url)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.delenv("HIVE_ACID_SPARK_MASTER", raising=False)
    sqlite_ms.catalog.create_table("s.t", "id bigint, v string", bucketed_by="id", buckets=2)
    return sqlite_ms


def source(tmp_path, name, ids):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]}), path)
    return str(path)


def test_insert_commits_emits_event_and_a_retry_does_not_write_again(env, tmp_path, capsys):
    ms = env
    path = source(tmp_path, "a", range(5))
    ctx = context("load", run_id="scheduled__1")
    out = AcidInsertOperator(task_id="load", table="s.t", source=path).execute(ctx)
    assert (out["rows_inserted"], out["committed"], out["write_id"]) == (5, True, 1)
    extra = ctx["outlet_events"][table_asset("s.t")].extra
    assert {k: extra[k] for k in ("txn_id", "write_id", "rows_inserted", "rows_updated", "rows_deleted")} == {
        "txn_id": out["txn_id"], "write_id": 1, "rows_inserted": 5, "rows_updated": 0, "rows_deleted": 0}
    assert ms.txns.get_txn(out["txn_id"]).agent_info == "airflow:d.load.scheduled__1"

    retry = AcidInsertOperator(task_id="load", table="s.t", source=path).execute(context("load", run_id="scheduled__1"))
    assert retry["replayed"] is True and retry["txn_id"] == out["txn_id"] and retry["rows_inserted"] == 5
    assert set(retry) == set(out) | {"replayed"}, "a replayed task's XCom has the first run's shape"
    assert {k: retry[k] for k in ("statement_id", "files", "bytes", "snapshot", "partitions", "write_id")} == {
        k: out[k] for k in ("statement_id", "files", "bytes", "snapshot", "partitions", "write_id")}
    assert len(read_rows(ms, "s.t")) == 5                   # not applied twice

    capsys.readouterr()
    merged = AcidMergeOperator(task_id="m", table="s.t", source=source(tmp_path, "b", [3, 4, 5, 6]), on="id",
                               clauses=["WHEN MATCHED THEN UPDATE SET v = 'changed'",
                                        "WHEN NOT MATCHED THEN INSERT *"]).execute(context("m"))
    assert (merged["rows_updated"], merged["rows_inserted"]) == (2, 2)
    rows = {r["id"]: r["v"] for r in read_rows(ms, "s.t")}
    assert rows == {0: "v0", 1: "v1", 2: "v2", 3: "changed", 4: "changed", 5: "v5", 6: "v6"}
    # the task log: no Spark INFO chatter, a line per stage, the summary table at the end
    log = capsys.readouterr()
    lines = (log.out + log.err).splitlines()
    assert len(lines) < 60, "\n".join(lines)
    assert not [line for line in lines if " INFO " in line and "hive-acid" not in line], "\n".join(lines)
    assert any("hive-acid: merge write  6 rows" in line for line in lines), "\n".join(lines)
    assert any("hive-acid: merge publish" in line for line in lines)
    header = next(i for i, line in enumerate(lines)
                  if re.search(r"partition +inserted +updated +deleted +files +bytes +published", line))
    w, st = merged["write_id"], merged["statement_id"]
    assert re.search(rf"\(table\) +2 +2 +0 +{merged['files']} +{merged['bytes']:,} ", lines[header + 1])
    assert f"delta_{w:07d}_{w:07d}_{st:04d}" in lines[header + 1], lines[header + 1]

    # verbose: all of Spark's output
    AcidUpdateOperator(task_id="u", table="s.t", set="v = 'u'", where="id = 0", verbose=True).execute(context("u"))
    log = capsys.readouterr()
    assert "INFO SparkContext: Running Spark version" in log.out + log.err


def _wait(pred, timeout=120, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_on_kill_stops_the_job_and_aborts_the_txn(env, tmp_path):
    ms = env
    # killed as its Python tasks start: nothing is published yet, and the files stay small enough for
    # test_java_orc's read of everything the suite wrote should a kill ever come late
    op = AcidInsertOperator(task_id="k", table="s.t", source=source(tmp_path, "k", range(200_000)))
    errors = []
    t = threading.Thread(target=lambda: errors.append(_run(op, context("k"))))
    t.start()
    submit = _wait(lambda: op.spark_hook._current, what="spark-submit to start")
    proc = _wait(lambda: submit._submit_sp, what="the spark-submit process")
    _wait(lambda: python_workers(proc.pid), what="the job's Python tasks to start")
    op.on_kill()
    t.join(120)
    assert not t.is_alive() and errors and "killed" in str(errors[0])
    [txn] = ms.txns.find_txns("airflow:d.k.manual__1")
    assert txn.state is TxnState.ABORTED and txn.reason == "Airflow task killed"
    assert read_rows(ms, "s.t") == []
    with pytest.raises(ProcessLookupError):             # driver and Python workers are gone too
        _wait(lambda: os.killpg(proc.pid, 0) and False, timeout=10, what="the process group to exit")


def _run(op, ctx):
    try:
        op.execute(ctx)
        return None
    except BaseException as exc:   # noqa: BLE001 - the test inspects it
        return exc


def test_task_process_killed_outright_is_aborted_by_the_housekeeper(env, tmp_path):
    ms = env
    ms.set_setting("hive.txn.timeout", "3")
    marker = f"spark.hive_acid.test_marker={tmp_path.name}"    # on the job's spark-submit command line
    script = textwrap.dedent(f"""
        from types import SimpleNamespace
        from collections import defaultdict
        from airflow_hive_acid.operators import AcidInsertOperator
        ti = SimpleNamespace(dag_id="d", task_id="x", run_id="r", map_index=-1)
        AcidInsertOperator(task_id="x", table="s.t", source={source(tmp_path, "x", range(200_000))!r}).execute(
            {{"ti": ti, "outlet_events": defaultdict(lambda: SimpleNamespace(extra={{}}))}})
    """)
    task = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "HIVE_ACID_SPARK_CONF": marker},
                            start_new_session=True)

    def job_pids():
        out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    try:
        _wait(lambda: ms.txns.find_txns("airflow:d.x.r"), what="the task's txn")
        _wait(job_pids, what="the job's spark-submit")
        _wait(lambda: python_workers(task.pid), what="the job's Python tasks")
        os.killpg(task.pid, signal.SIGKILL)            # the worker dies: no on_kill, no abort
        task.wait(10)
        [txn] = ms.txns.find_txns("airflow:d.x.r")
        assert txn.state is TxnState.OPEN
        time.sleep(3.5)                                 # no heartbeats for longer than the timeout
        report = ms.housekeep()
        assert txn.txn_id in report.timed_out
        assert ms.txns.get_txn(txn.txn_id).reason == "timed out"
        assert read_rows(ms, "s.t") == []
    finally:
        for pid in job_pids():                          # the orphaned Spark job and what it started
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
