"""End to end through real spark-submit: the hive-acid CLI runs each statement as a Spark job
(local master, and once on a standalone cluster started from the pyspark install)."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import CORPUS
from jobprocs import python_workers

pytestmark = [pytest.mark.slow, pytest.mark.spark]
TRINO = CORPUS / "trinodb_trino/plugin/trino-hive/src/test/resources"


def cli(url, *args, ok=True, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, *args],
                          capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, f"{args}: {proc.stderr[-3000:]}"
    return proc


def rows(url, table, *extra):
    proc = cli(url, "read", table, "--json", *extra)
    noise = [line for line in proc.stderr.splitlines() if not line.startswith("hive-acid: ")]
    assert not noise, f"a read prints its stage lines, not Spark's output: {noise}"
    return [json.loads(x) for x in proc.stdout.splitlines()]


@pytest.fixture
def url(tmp_path):
    u = f"sqlite:///{tmp_path / 'm.db'}"
    cli(u, "init", "--warehouse", str(tmp_path / "wh"))
    return u


def test_cli_statements_and_reads_through_spark_submit(url, tmp_path):
    pq.write_table(pa.table({"id": list(range(1, 9)), "name": [f"n{i}" for i in range(1, 9)],
                             "ds": ["d1"] * 4 + ["d2"] * 4}), tmp_path / "init.parquet")
    (tmp_path / "changes.csv").write_text("id,name,ds,op\n1,uno,d1,U\n2,,d1,D\n9,nine,d2,I\n")
    cli(url, "create-table", "app.users", "--columns", "id bigint, name string", "--partitioned-by", "ds string",
        "--bucketed-by", "id", "--buckets", "2")
    r = json.loads(cli(url, "--json", "insert", "app.users", "--source", str(tmp_path / "init.parquet")).stdout)
    assert r["rows_inserted"] == 8 and r["committed"] and r["spark_app_id"].startswith("local-")
    r = json.loads(cli(url, "--json", "merge", "app.users", "--source", str(tmp_path / "changes.csv"), "--on", "id",
                       "--clause", "WHEN MATCHED AND s.op = 'D' THEN DELETE",
                       "--clause", "WHEN MATCHED THEN UPDATE SET name = s.name",
                       "--clause", "WHEN NOT MATCHED THEN INSERT (id, name, ds) VALUES (s.id, s.name, s.ds)").stdout)
    assert (r["rows_updated"], r["rows_deleted"], r["rows_inserted"]) == (1, 1, 1)
    got = {x["id"]: x for x in rows(url, "app.users", "--row-id")}
    assert sorted(got) == [1, 3, 4, 5, 6, 7, 8, 9] and got[1]["name"] == "uno" and got[9]["ds"] == "d2"
    assert got[1]["ROW__ID"]["writeId"] == 2 and got[3]["ROW__ID"]["writeId"] == 1
    dirs = json.loads(cli(url, "--json", "dirs", "app.users").stdout)
    d1 = [p for p in dirs["partitions"] if p["partition"] == "ds=d1"][0]
    assert d1["deltas"] == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000"]
    assert d1["delete_deltas"] == ["delete_delta_0000002_0000002_0000"]
    # a bad statement: clear error on stderr, non-zero exit, nothing committed
    bad = cli(url, "update", "app.users", "--set", "name = nosuch_col", ok=False)
    assert bad.returncode == 1 and "nosuch_col" in bad.stderr and "update job failed" in bad.stderr
    snap = json.loads(cli(url, "--json", "snapshot", "app.users").stdout)
    assert snap["aborted"] == [3]
    after = json.loads(cli(url, "--json", "dirs", "app.users").stdout)
    assert [p["deltas"] for p in after["partitions"]] == [p["deltas"] for p in dirs["partitions"]]
    # partition values that would leave the table: the error in one line at the end, no Spark stack
    # traces (--verbose shows them), and no staging folder left in the table
    pq.write_table(pa.table({"id": [20, 21], "name": ["x", "y"], "ds": ["../evil", "a/b"]}), tmp_path / "evil.parquet")
    evil = cli(url, "insert", "app.users", "--source", str(tmp_path / "evil.parquet"), ok=False)
    err = evil.stderr.splitlines()
    assert evil.returncode == 1 and err[-1].startswith("hive-acid: error: ") and "contains a path separator" in err[-1]
    assert len(err) <= 6 and all(line.startswith("hive-acid: ") for line in err), evil.stderr
    assert sorted(p.name for p in (tmp_path / "wh" / "app.db" / "users").iterdir()) == ["ds=d1", "ds=d2"]


def test_a_package_in_the_working_directory_does_not_shadow_the_jobs_code(url, tmp_path):
    """Spark starts the Python worker daemon with ``python -m``, which puts the working
    directory first on the path: another ``airflow_hive_acid`` there (an older checkout) must
    not be what the job's workers run."""
    here = tmp_path / "elsewhere"
    (here / "airflow_hive_acid").mkdir(parents=True)
    (here / "airflow_hive_acid" / "__init__.py").write_text(
        "raise ImportError('the airflow_hive_acid of the working directory was imported')\n")
    pq.write_table(pa.table({"id": list(range(100))}), tmp_path / "ids.parquet")
    cli(url, "create-table", "app.ids", "--columns", "id bigint", "--bucketed-by", "id", "--buckets", "2")
    console = Path(sys.executable).parent / "hive-acid"         # its own directory first, not the cwd
    proc = subprocess.run([str(console), "--metastore", url, "--json", "insert", "app.ids", "--source",
                           str(tmp_path / "ids.parquet")], cwd=here, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["rows_inserted"] == 100
    assert sorted(r["id"] for r in rows(url, "app.ids")) == list(range(100))


def test_register_a_hive_written_table_and_read_it(url, tmp_path):
    import shutil
    root = tmp_path / "nation"
    (root / "delta_0000002_0000002_0000").mkdir(parents=True)
    shutil.copy(TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000", root / "delta_0000002_0000002_0000")
    for d in ("delete_delta_0000003_0000003_0000", "delete_delta_0000004_0000004_0000"):
        shutil.copytree(TRINO / "nation_delete_deltas" / d, root / d)
    out = json.loads(cli(url, "--json", "register", "hive.nation", "--location", str(root), "--columns",
                         "n_nationkey int, n_name string, n_regionkey int, n_comment string").stdout)
    assert out["adopted_write_ids"] == 4
    got = rows(url, "hive.nation", "--columns", "n_nationkey")
    assert len(got) == 23000 and {x["n_nationkey"] for x in got} == set(range(25)) - {5, 19}
    # and it can be written here: delete one more nation
    r = json.loads(cli(url, "--json", "delete", "hive.nation", "--where", "n_nationkey = 7").stdout)
    assert (r["rows_deleted"], r["write_id"]) == (1000, 5)


def test_killed_job_leaves_nothing_visible_and_its_txn_is_reaped(url, tmp_path):
    cli(url, "config", "hive.txn.timeout", "3")
    cli(url, "create-table", "app.k", "--columns", "id bigint")
    pq.write_table(pa.table({"id": np.arange(200_000, dtype=np.int64)}), tmp_path / "k.parquet")
    proc = subprocess.Popen([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, "insert", "app.k",
                             "--source", str(tmp_path / "k.parquet")], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not python_workers(proc.pid) and time.time() < deadline:     # the job's Python tasks start
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)   # the CLI dies; its spark-submit (own session) may finish, uncommitted
    proc.wait()
    shown = json.loads(cli(url, "--json", "show", "transactions").stdout)
    assert [t["state"] for t in shown] == ["OPEN"], "killed before its commit"
    timed_out: list[int] = []
    deadline = time.time() + 30          # its last heartbeat ages past the 3 s timeout
    while not timed_out and time.time() < deadline:
        time.sleep(1)
        timed_out = json.loads(cli(url, "--json", "housekeeper").stdout)["timed_out"]
    assert timed_out == [shown[0]["txn_id"]]
    snap = json.loads(cli(url, "--json", "snapshot", "app.k").stdout)
    assert snap["aborted"] == [1] and snap["open"] == []
    dirs = json.loads(cli(url, "--json", "dirs", "app.k").stdout)["partitions"][0]
    assert dirs["deltas"] == [] and dirs["base"] is None, "whatever the killed job wrote, no reader takes it"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def standalone_cluster(tmp_path_factory):
    """A Spark standalone master and one worker on loopback, from the pyspark install."""
    from airflow_hive_acid.jobs.launcher import job_env, spark_home
    home = Path(spark_home())
    work = tmp_path_factory.mktemp("work")
    env = {**job_env(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(tmp_path_factory.mktemp("logs")),
           "SPARK_WORKER_DIR": str(work)}
    port, web = _free_port(), _free_port()
    cls = str(home / "bin" / "spark-class")
    master = subprocess.Popen([cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                               str(port), "--webui-port", str(web)], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"spark://127.0.0.1:{port}"
    worker = subprocess.Popen([cls, "org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "2g",
                               "--webui-port", str(_free_port()), "--host", "127.0.0.1"], env=env,
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield url, work
    finally:
        for p in (worker, master):
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)


def test_statements_on_a_standalone_cluster(url, tmp_path, standalone_cluster):
    standalone_cluster, _ = standalone_cluster
    pq.write_table(pa.table({"id": list(range(100)), "v": [i * 2 for i in range(100)]}), tmp_path / "a.parquet")
    cli(url, "create-table", "app.c", "--columns", "id bigint, v bigint", "--bucketed-by", "id", "--buckets", "4")
    r = json.loads(cli(url, "--json", "insert", "app.c", "--source", str(tmp_path / "a.parquet"), "--master",
                       standalone_cluster, timeout=400).stdout)
    assert r["rows_inserted"] == 100 and r["spark_app_id"].startswith("app-"), "ran as a cluster application"
    got = {x["id"]: x["v"] for x in rows(url, "app.c", "--master", standalone_cluster)}
    assert len(got) == 100 and got[3] == 6 and got[50] == 100


def test_cluster_deploy_mode_on_a_standalone_cluster(url, tmp_path, standalone_cluster):
    """The driver runs on the cluster's worker, not beside the submitter: the spec travels on the
    command line and the manifest (and a read's rows) come back through the table's filesystem."""
    master, work = standalone_cluster
    pq.write_table(pa.table({"id": list(range(50)), "v": list(range(50))}), tmp_path / "a.parquet")
    cli(url, "create-table", "app.d", "--columns", "id bigint, v bigint", "--bucketed-by", "id", "--buckets", "2")
    on_cluster = ("--master", master, "--deploy-mode", "cluster")
    r = json.loads(cli(url, "--json", "insert", "app.d", "--source", str(tmp_path / "a.parquet"), *on_cluster,
                       timeout=400).stdout)
    assert r["rows_inserted"] == 50 and r["committed"]
    u = json.loads(cli(url, "--json", "update", "app.d", "--set", "v = v + 100", "--where", "id < 10", *on_cluster,
                       timeout=400).stdout)
    assert u["rows_updated"] == 10
    got = {x["id"]: x["v"] for x in rows(url, "app.d", *on_cluster)}
    assert got == {i: i + 100 if i < 10 else i for i in range(50)}
    drivers = sorted(p.name for p in work.iterdir() if p.name.startswith("driver-"))
    assert len(drivers) >= 3, f"each job's driver ran inside the worker: {drivers}"
    staging = Path(json.loads(cli(url, "--json", "describe", "app.d").stdout)["location"]) / "_hive_acid_staging"
    assert not staging.exists() or not any(staging.iterdir()), "manifests and read output are removed"


def test_streaming_ingest_killed_mid_run_restarts_without_loss_or_duplicates(tmp_path):
    """The ingest job through spark-submit, killed (SIGKILL to its whole process group) while
    micro-batches run, then restarted from its checkpoint: the table holds every source row once."""
    import threading

    from tablerows import read_rows

    from airflow_hive_acid.jobs import Ingest, JobFailed, JobSpec, LocalSubmitter, SnapshotSpec, run_job
    from airflow_hive_acid.metastore import Metastore

    ms = Metastore.initialize(f"sqlite:///{tmp_path / 'm.db'}", warehouse=str(tmp_path / "wh"))
    ms.catalog.create_table("s.events", "id bigint, v string", partitioned_by="ds string", bucketed_by="id",
                            buckets=2)
    landing = tmp_path / "landing"
    landing.mkdir()
    for f in range(16):
        ids = list(range(f * 50, f * 50 + 50))
        pq.write_table(pa.table({"id": ids, "v": [f"f{f}"] * 50, "ds": [f"d{f % 3}"] * 50}),
                       landing / f"part-{f:03d}.parquet")

    def spec(trigger, max_duration=None):
        req = Ingest(landing=str(landing), checkpoint=str(tmp_path / "cp"), metastore=ms.url, trigger=trigger,
                     interval=0.2, max_duration=max_duration, max_files_per_trigger=1)
        return JobSpec(table=ms.catalog.get_table("s.events").to_spec(), snapshot=SnapshotSpec("", ""),
                       request=req)

    submit = LocalSubmitter(log=lambda _line: None)

    def kill_after_two_batches():
        deadline = time.time() + 240
        while time.time() < deadline and len(ms.txns.stream_batches("s.events")) < 2:
            time.sleep(0.2)
        submit.kill()

    killer = threading.Thread(target=kill_after_two_batches)
    killer.start()
    with pytest.raises(JobFailed):
        run_job(submit, spec("processing", max_duration=600))
    killer.join()
    first = ms.txns.stream_batches("s.events")
    assert 2 <= len(first) < 16, "killed mid-run"
    ms.housekeep()
    out = run_job(LocalSubmitter(log=lambda _line: None), spec("available_now")).output
    batches = ms.txns.stream_batches("s.events")
    assert len({b.query_id for b in batches}) == 1 and out.query_id == batches[0].query_id
    assert sorted(b.batch_id for b in batches) == list(range(len(batches)))
    got = sorted(r["id"] for r in read_rows(ms, "s.events"))
    assert got == list(range(800)), "every source row once"
    assert sum(b.rows for b in batches) == 800


def test_a_load_that_makes_the_class_archive_leaves_sql_classes_in_it(url, tmp_path, monkeypatch):
    """A load never makes the SQL session, yet when it is the job that dumps the driver's class
    archive (the first on a machine) the archive must also hold what SQL jobs load
    (``session.load_sql_classes``); else every later read, UPDATE and DELETE loads those classes
    from the jars. The class names are symbols in the archive."""
    from airflow_hive_acid.jobs.launcher import FastJvm

    monkeypatch.setenv("HIVE_ACID_CACHE_DIR", str(tmp_path / "cache"))
    pq.write_table(pa.table({"id": list(range(100))}), tmp_path / "src.parquet")
    cli(url, "create-table", "app.nums", "--columns", "id bigint", "--bucketed-by", "id", "--buckets", "2")
    r = json.loads(cli(url, "--json", "insert", "app.nums", "--source", str(tmp_path / "src.parquet")).stdout)
    assert r["rows_inserted"] == 100 and [s["stage"] for s in r["stages"]][0] == "session"
    archive = FastJvm().archive.read_bytes()
    for cls in (b"PythonRDD", b"MapInArrowExec", b"BroadcastHashJoinExec", b"ParquetFileFormat"):
        assert cls in archive, cls
    assert sorted(x["id"] for x in rows(url, "app.nums")) == list(range(100))
