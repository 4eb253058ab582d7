"""The example DAGs under a deployed Airflow, as a new user runs them: an api-server, a scheduler
(LocalExecutor), a dag-processor and a triggerer on loopback, Airflow's metadata in a fresh
PostgreSQL database, runs started by ``airflow dags trigger`` (a manual run: in Airflow 3 it has no
logical date and no data interval). ``airflow dags test`` (tests/test_example_dags.py) runs tasks
one by one in one process and triggers inline; here every task is its own process and the
``CompactionSensor`` waits in the triggerer.

The maintenance DAG runs twice: on a day with nothing to compact (its sensor succeeds at once,
without deferring), then with a compaction that a worker outside the DAG (``hive-acid worker``)
is running, held back by a DDL-style EXCLUSIVE lock until the sensor is seen deferred in the
triggerer."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import PG_BASE, REPO, require_pg
from tablerows import read_rows

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.postgres]

BIN = Path(sys.executable).parent
DAGS = ("hive_acid_quickstart", "hive_acid_dimension_upsert", "hive_acid_maintenance")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def airflow_db():
    """A fresh PostgreSQL database for Airflow's metadata, dropped afterwards."""
    require_pg()
    import psycopg
    from psycopg import sql
    name = f"airflow_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = urlsplit(PG_BASE)
    try:
        yield urlunsplit(("postgresql+psycopg", base.netloc, f"/{name}", "", ""))
    finally:
        with psycopg.connect(PG_BASE, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class Deployment:
    """The four services, each in a process group of its own, and what the test asks of them."""

    def __init__(self, root: Path, db_url: str):
        self.root, self.db_url = root, db_url
        self.logs = root / "service-logs"
        self.logs.mkdir()
        port = free_port()
        self.env = {**os.environ,
                    "AIRFLOW_HOME": str(root / "airflow"), "HIVE_ACID_HOME": str(root / "hive-acid"),
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
                    # psycopg 3 does async too (Airflow would otherwise want asyncpg for postgresql)
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": db_url,
                    "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                    "AIRFLOW__CORE__PARALLELISM": "4",
                    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
                    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
                    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
                    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
                    "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
                    # the log servers of the scheduler's tasks and of the triggerer: free ports too
                    "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                    "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
                    "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex,
                    # only the runs the test starts: the scheduled path is tests/test_example_dags.py's
                    "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
                    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
                    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                    "AIRFLOW__OPENLINEAGE__DISABLED": "True",
                    "PATH": f"{BIN}:{os.environ.get('PATH', '')}"}
        for k in ("HIVE_ACID_METASTORE", "HIVE_ACID_DEMO_DATA", "HIVE_ACID_WAREHOUSE"):
            self.env.pop(k, None)
        self.procs: dict[str, subprocess.Popen] = {}

    def cli(self, *args: str, timeout: float = 300) -> str:
        proc = subprocess.run([str(BIN / "airflow"), *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, f"airflow {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")
        self.procs[name] = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, cwd=self.root)
        log.close()
        return self.procs[name]

    def start_services(self) -> None:
        airflow = str(BIN / "airflow")
        self.start("api-server", airflow, "api-server", "--host", "127.0.0.1",
                   "--port", self.env["AIRFLOW__API__PORT"], "--workers", "1")
        self.start("scheduler", airflow, "scheduler")
        self.start("dag-processor", airflow, "dag-processor")
        self.start("triggerer", airflow, "triggerer")

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if name in ("api-server", "scheduler", "dag-processor", "triggerer") and proc.poll() is not None:
                raise AssertionError(f"{name} exited ({proc.returncode}):\n{self.log(name)[-4000:]}")

    def query(self, q: str, *params) -> list[tuple]:
        import psycopg
        with psycopg.connect(self.db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
            return conn.execute(q, params).fetchall()

    def wait(self, what: str, done, timeout: float, every: float = 1.0):
        """Poll ``done()`` until it returns something truthy (bounded; the services must stay up)."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            value = done()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n" + self.diagnosis())
            time.sleep(every)

    def trigger(self, dag_id: str, run_id: str, *args: str) -> None:
        self.cli("dags", "trigger", dag_id, "--run-id", run_id, *args)

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self.query("SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s", dag_id, run_id)
        return rows[0][0] if rows else None

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float) -> None:
        state = self.wait(f"{dag_id} {run_id} to finish",
                          lambda: self.run_state(dag_id, run_id) in ("success", "failed") and
                          self.run_state(dag_id, run_id), timeout)
        assert state == "success", f"{dag_id} {run_id} ended {state}\n" + self.diagnosis(dag_id, run_id)

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        return dict(self.query("SELECT task_id, state FROM task_instance WHERE dag_id = %s AND run_id = %s",
                               dag_id, run_id))

    def task_log(self, dag_id: str, run_id: str, task_id: str, pattern: str = "attempt=*.log") -> str:
        """A task's log as the task wrote it, or (``pattern="*.trigger.*.log"``) as its trigger did
        in the triggerer."""
        found = sorted((self.root / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" /
                        f"task_id={task_id}").glob(pattern))
        return "\n".join(p.read_text(errors="replace") for p in found)

    def xcom(self, dag_id: str, run_id: str, task_id: str):
        rows = self.query("SELECT value FROM xcom WHERE dag_id = %s AND run_id = %s AND task_id = %s "
                          "AND key = 'return_value'", dag_id, run_id, task_id)
        value = rows[0][0] if rows else None
        return json.loads(value) if isinstance(value, str) else value

    def diagnosis(self, dag_id: str | None = None, run_id: str | None = None) -> str:
        out = []
        if dag_id:
            for task, state in self.task_states(dag_id, run_id).items():
                out.append(f"--- {task}: {state}")
                if state not in ("success", None):
                    out.append(self.task_log(dag_id, run_id, task)[-3000:])
        for name in self.procs:
            out.append(f"--- {name} log (tail)\n{self.log(name)[-1500:]}")
        return "\n".join(out)

    def stop(self) -> None:
        """SIGTERM every process group, then SIGKILL what is left; then whatever still carries this
        deployment's AIRFLOW_HOME (a task or Spark process that left the groups) by its pid."""
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 30
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftovers(self) -> list[int]:
        """Live processes started for this deployment: their environment names its AIRFLOW_HOME."""
        marker = f"AIRFLOW_HOME={self.env['AIRFLOW_HOME']}".encode() + b"\0"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes() and b"Z" not in _state(entry):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found


def _state(entry: Path) -> bytes:
    stat = (entry / "stat").read_bytes()
    return stat[stat.rindex(b")") + 2:][:1]


@pytest.mark.timeout(1800)
def test_example_dags_run_by_hand_under_a_deployed_airflow(tmp_path, airflow_db):
    from airflow_hive_acid.metastore import LockComponent, LockType, Metastore

    deployed = Deployment(tmp_path, airflow_db)
    deployed.cli("db", "migrate", timeout=600)
    ms = None
    try:
        deployed.start_services()
        deployed.wait("the DAGs to be parsed", lambda: len(deployed.query(
            "SELECT dag_id FROM serialized_dag WHERE dag_id = ANY(%s)", list(DAGS))) == len(DAGS), timeout=300)
        deployed.cli("dags", "unpause", "--treat-dag-id-as-regex", "-y", "^(" + "|".join(DAGS) + ")$")

        # a manual run of each: the quickstart, and the hourly upsert whose extract needs a date
        deployed.trigger("hive_acid_quickstart", "by_hand_quickstart")
        deployed.trigger("hive_acid_dimension_upsert", "by_hand_upsert")
        deployed.wait_for_run("hive_acid_dimension_upsert", "by_hand_upsert", timeout=600)
        deployed.wait_for_run("hive_acid_quickstart", "by_hand_quickstart", timeout=600)
        ms = Metastore(f"sqlite:///{tmp_path / 'hive-acid' / 'metastore.db'}")
        assert sorted(r["id"] for r in read_rows(ms, "demo.customers")) == [1, 2, 3, 4, 6, 7, 10, 11, 12, 13]
        assert len(read_rows(ms, "dim.customer")) == 12, "the hour it was triggered: 12 customers"

        # maintenance on a day with nothing to compact: the sensor succeeds at once, never deferred
        nothing = ("hive_acid_maintenance", "by_hand_nothing_to_do")
        deployed.trigger(*nothing)
        deployed.wait_for_run(*nothing, timeout=600)
        assert deployed.xcom(*nothing, "compaction_worker") == []
        assert deployed.xcom(*nothing, "wait_for_compaction") == []
        log = deployed.task_log(*nothing, "wait_for_compaction")
        assert "no compactions to wait for" in log and "Pausing task as DEFERRED" not in log
        assert deployed.task_log(*nothing, "wait_for_compaction", "*.trigger.*.log") == ""

        # another hour's changes, by hand for a given logical date: dim.customer has two deltas
        deployed.trigger("hive_acid_dimension_upsert", "by_hand_upsert_0500", "--logical-date", "2026-01-01T05:00:00+00:00")
        deployed.wait_for_run("hive_acid_dimension_upsert", "by_hand_upsert_0500", timeout=600)
        before = sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"])
        assert (tmp_path / "hive-acid" / "incoming" / "dimension" / "customers_2026010105.parquet").exists()

        # a compaction that a worker elsewhere runs, held back by an EXCLUSIVE lock (as DDL takes)
        # until the sensor is seen waiting in the triggerer
        subprocess.run([str(BIN / "hive-acid"), "config", "hive.lock.wait.timeout", "600"], env=deployed.env,
                       check=True, capture_output=True, timeout=120)
        ddl_txn = ms.txns.open_txn(agent_info="test: DDL holding dim.customer")
        ms.locks.lock([LockComponent("dim", "customer", type=LockType.EXCLUSIVE)], ddl_txn, wait=10)
        queued = ms.compactions.enqueue("dim.customer", None, "major", manual=True, reason="test: by hand")
        elsewhere = deployed.start("hive-acid-worker", str(BIN / "hive-acid"), "worker", "--id", str(queued.id))
        deployed.wait("the outside worker to claim the request",
                      lambda: ms.compactions.get(queued.id).state.label == "working", timeout=120)
        waited = ("hive_acid_maintenance", "by_hand_compaction_elsewhere")
        deployed.trigger(*waited)

        def deferred_in_triggerer():
            rows = deployed.query(
                "SELECT ti.state, t.classpath, t.triggerer_id FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
                "WHERE ti.dag_id = %s AND ti.run_id = %s AND ti.task_id = 'wait_for_compaction'", *waited)
            return rows and rows[0][0] == "deferred" and rows[0][2] is not None and rows[0]
        _, classpath, _ = deployed.wait("the sensor to defer to the triggerer", deferred_in_triggerer, timeout=600)
        assert classpath == "airflow_hive_acid.triggers.compaction.CompactionTrigger"
        assert ms.compactions.get(queued.id).state.label == "working", "still held back by the lock"
        ms.txns.commit_txn(ddl_txn)                 # the DDL ends: the worker elsewhere compacts
        deployed.wait_for_run(*waited, timeout=600)
        assert elsewhere.wait(timeout=60) == 0, deployed.log("hive-acid-worker")
        assert deployed.xcom(*waited, "compaction_worker") == [], "the DAG's own worker had nothing to claim"
        assert [c["id"] for c in deployed.xcom(*waited, "wait_for_compaction")] == [queued.id]
        assert "Pausing task as DEFERRED" in deployed.task_log(*waited, "wait_for_compaction")
        assert "Trigger fired event" in deployed.task_log(*waited, "wait_for_compaction", "*.trigger.*.log")
        assert ms.compactions.get(queued.id).state.label == "succeeded", "compacted, then cleaned by the DAG"
        assert sorted(read_rows(ms, "dim.customer"), key=lambda r: r["customer_id"]) == before
    finally:
        deployed.stop()
        if ms is not None:
            ms.close()
    assert deployed.leftovers() == [], "every process of the deployment has ended"
