"""Shared fixtures: a fresh metastore per test on SQLite and on PostgreSQL.

PostgreSQL tests use the server at 127.0.0.1:5432 (database ``test``), each in a schema of its
own. Without the server they skip locally; under ``CI=true`` they fail instead, so CI can never
pass without having run them.
"""
from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest

PG_BASE = os.environ.get("HIVE_ACID_TEST_PG", "postgresql://127.0.0.1:5432/test")
# Short-lived test JVMs start faster with the C1 compiler only.
os.environ.setdefault("HIVE_ACID_SPARK_CONF", "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 "
                                              "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1")
# py4j logs "Closing down clientserver connection" from __del__ at interpreter exit, after
# pytest closed the stream: noise that looks like an error at the end of every run.
logging.getLogger("py4j").setLevel(logging.WARNING)
REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "acid_corpus"


def _pg_available() -> str | None:
    try:
        import psycopg
        with psycopg.connect(PG_BASE.replace("postgresql://", "postgresql://", 1), connect_timeout=3):
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        return f"{type(exc).__name__}: {exc}"


_PG_PROBLEM: str | None | bool = False


def pg_problem() -> str | None:
    global _PG_PROBLEM
    if _PG_PROBLEM is False:
        _PG_PROBLEM = _pg_available()
    return _PG_PROBLEM  # type: ignore[return-value]


def require_pg() -> None:
    problem = pg_problem()
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"PostgreSQL is required under CI=true but unavailable: {problem}")
        pytest.skip(f"PostgreSQL unavailable: {problem}")


def pg_schema_url() -> tuple[str, str]:
    """A URL whose search_path is a brand-new schema, and the schema name."""
    import psycopg
    schema = f"ha_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')  # name is generated above, never user input
    sep = "&" if "?" in PG_BASE else "?"
    return f"{PG_BASE}{sep}options=-csearch_path%3D{schema}", schema


def drop_pg_schema(schema: str) -> None:
    import psycopg
    with psycopg.connect(PG_BASE, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def metastore_url(request: pytest.FixtureRequest, tmp_path: Path):
    """The URL of an empty, uninitialized metastore on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'metastore.db'}"
        return
    require_pg()
    url, schema = pg_schema_url()
    try:
        yield url
    finally:
        drop_pg_schema(schema)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    p = tmp_path / "warehouse"
    p.mkdir()
    return p


@pytest.fixture
def ms(metastore_url: str, warehouse: Path):
    from airflow_hive_acid.metastore import Metastore
    m = Metastore.initialize(metastore_url, warehouse=str(warehouse))
    try:
        yield m
    finally:
        m.close()


# -- Spark ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def spark():
    """One local SparkSession for the in-process Spark tests (end-to-end tests use spark-submit)."""
    import sys

    from airflow_hive_acid.jobs.launcher import job_env
    os.environ.update({k: v for k, v in job_env().items() if k in ("SPARK_HOME", "PYSPARK_PYTHON",
                                                                    "PYSPARK_DRIVER_PYTHON")})
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from airflow_hive_acid.spark.session import get_session
    builder = (SparkSession.builder.master("local[2]").appName("hive-acid-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2").config("spark.speculation", "false")
               .config("spark.driver.memory", "1g").config("spark.ui.showConsoleProgress", "false"))
    s = builder.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    s = get_session()
    yield s
    s.stop()


@pytest.fixture
def in_process(spark):
    """A ``Submit`` that runs job specs in the shared session instead of spark-submit."""
    from airflow_hive_acid.jobs import Manifest
    from airflow_hive_acid.spark.runner import run_job

    class InProcess:
        def __call__(self, spec):
            run_job(spark, spec).save(spec.manifest_path)     # the manifest's round trip, as spark-submit's
            m = Manifest.load(spec.manifest_path)
            m.raise_for_failure()
            return m

        def kill(self):
            spark.sparkContext.cancelAllJobs()

    return InProcess()


@pytest.fixture
def sqlite_ms(tmp_path: Path, warehouse: Path):
    """An SQLite metastore: the data-path tests are about files, not about the backend."""
    from airflow_hive_acid.metastore import Metastore
    m = Metastore.initialize(f"sqlite:///{tmp_path / 'metastore.db'}", warehouse=str(warehouse))
    try:
        yield m
    finally:
        m.close()


@pytest.fixture
def runner(sqlite_ms, in_process):
    """A StatementRunner over an SQLite metastore, running jobs in the shared SparkSession."""
    from airflow_hive_acid.statements import StatementRunner
    return StatementRunner(sqlite_ms, in_process, lock_wait=5)


# -- the reference Java ORC reader -------------------------------------------------------------
@pytest.fixture(scope="session")
def java_orc(tmp_path_factory):
    """``tests/java/OrcCheck.java`` compiled against pyspark's jars (see ``javaorc.py``)."""
    from javaorc import JavaOrc
    return JavaOrc(tmp_path_factory.mktemp("javaorc-classes"))


def pytest_collection_modifyitems(config, items):
    """The sweep over every file the session wrote runs after everything else."""
    last = [i for i in items if i.name == "test_every_file_the_suite_wrote_reads_in_java"]
    items[:] = [i for i in items if i not in last] + last
