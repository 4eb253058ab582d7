"""Compaction end to end through real spark-submit: ``hive-acid compact ... --wait`` (worker and
cleaner jobs), and a worker whose spark-submit is killed mid-job together with the worker
process: the table stays readable and the request is recovered, never stuck."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from test_compaction import insert, scan

from airflow_hive_acid.jobs.spec import Delete
from airflow_hive_acid.metastore import CompactionState, Metastore
from airflow_hive_acid.statements import StatementRunner

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def cli(url, *args, ok=True, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, *args],
                          check=False, capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, f"{args}: {proc.stderr[-3000:]}"
    return proc


@pytest.fixture
def setup(tmp_path, in_process):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    ms = Metastore.initialize(url, warehouse=str(tmp_path / "wh"), settings={"hive.txn.timeout": "6"})
    runner = StatementRunner(ms, in_process, lock_wait=5)
    ms.catalog.create_table("app.t", "id bigint, v string", partitioned_by="ds string", bucketed_by="id", buckets=2)
    insert(runner, "app.t", tmp_path, list(range(30)), "d1")
    insert(runner, "app.t", tmp_path, list(range(30, 50)), "d1")
    runner.run(Delete.from_dict({"where": "id % 4 = 0"}), "app.t")
    try:
        yield url, ms, runner
    finally:
        ms.close()


def test_cli_compact_major_wait_through_spark_submit(setup, tmp_path):
    url, ms, runner = setup
    before = scan(runner, "app.t", tmp_path)
    out = json.loads(cli(url, "--json", "compact", "app.t", "--partition", "ds=d1", "--type", "major", "--wait").stdout)
    assert out["state"] == "succeeded", out
    w = out["worker"]
    assert w["output"] == [f"base_0000003_v{w['txn_id']:07d}"] and w["spark_app_id"].startswith("local-")
    assert [c["state"] for c in out["clean"] if c["kind"] == "compaction"] == ["succeeded"]
    part = Path(ms.catalog.get_table("app.t").location) / "ds=d1"
    assert sorted(p.name for p in part.iterdir()) == w["output"]
    assert scan(runner, "app.t", tmp_path) == before
    shown = cli(url, "show", "compactions", "app.t").stdout.splitlines()
    assert shown[0].startswith("CompactionId\tDatabase\tTable\tPartition\tType\tState")
    assert shown[1].split("\t")[3:6] == ["ds=d1", "MAJOR", "succeeded"]


def test_killed_worker_leaves_table_readable_and_request_recoverable(setup, tmp_path):
    url, ms, runner = setup
    before = scan(runner, "app.t", tmp_path)
    cq = ms.compactions.enqueue("app.t", "ds=d1", "minor", manual=True).id
    worker = subprocess.Popen([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, "worker",
                               "--id", str(cq)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        submit = None
        while time.time() < deadline and submit is None:
            kids = psutil.Process(worker.pid).children(recursive=True)
            for k in kids:
                try:
                    if "org.apache.spark.deploy.SparkSubmit" in " ".join(k.cmdline()):
                        submit = os.getpgid(k.pid)
                except (psutil.Error, ProcessLookupError):
                    continue
            time.sleep(0.2)
        assert submit is not None, "spark-submit did not start"
        assert ms.compactions.get(cq).txn_id is not None
        time.sleep(2)           # mid-job
        os.killpg(submit, signal.SIGKILL)                     # the Spark job ...
        worker.kill()                                         # ... and the worker with it
        worker.wait(30)
    finally:
        if worker.poll() is None:
            worker.kill()
    stuck = ms.compactions.get(cq)
    assert stuck.state is CompactionState.WORKING and stuck.txn_id
    assert scan(runner, "app.t", tmp_path) == before, "readable while the request is orphaned"
    time.sleep(6.5)                                           # the compactor txn stops heartbeating
    report = ms.housekeep()
    assert stuck.txn_id in report.timed_out and cq in report.requeued_compactions
    assert ms.compactions.get(cq).state is CompactionState.INITIATED
    out = json.loads(cli(url, "--json", "worker", "--id", str(cq)).stdout)
    assert out["state"] == "ready for cleaning", out
    cleaned = json.loads(cli(url, "--json", "cleaner").stdout)
    assert [c["state"] for c in cleaned if c["kind"] == "compaction"] == ["succeeded"]
    part = Path(ms.catalog.get_table("app.t").location) / "ds=d1"
    names = sorted(p.name for p in part.iterdir())
    assert names == sorted(out["output"]) and not any(f"_v{stuck.txn_id:07d}" in n for n in names)
    staging = Path(ms.catalog.get_table("app.t").location) / "_hive_acid_staging"
    assert not staging.exists() or not any(staging.iterdir())
    assert scan(runner, "app.t", tmp_path) == before
