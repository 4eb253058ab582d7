"""Which failures a retry may fix (``errors.is_retryable``), and that jobs and operators act on
it: a filesystem error is left to the task's retries, bad input fails the task at once."""
import shutil
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hive_acid.acid.errors import AcidError, AcidInputError
from airflow_hive_acid.acid.fs import AcidFileError
from airflow_hive_acid.acid.names import NameError_
from airflow_hive_acid.acid.orcfile import OrcFileError
from airflow_hive_acid.errors import (
    AlreadyExistsError,
    CompactionError,
    HeartbeatLost,
    HiveAcidError,
    InvalidInputError,
    JobFailed,
    LockTimeoutError,
    NoSuchObjectError,
    NotInitializedError,
    TableNotFoundError,
    TooManyOpenTxnsError,
    TxnAbortedError,
    TxnError,
    TxnTimedOutError,
    WriteConflictError,
    is_retryable,
)
from airflow_hive_acid.jobs import Insert, SourceSpec
from airflow_hive_acid.jobs.manifest import Manifest
from airflow_hive_acid.jobs.spec import JobSpecError
from airflow_hive_acid.metastore import CompactionState, CompactionType, TxnState, WriteStat


# -- the rule ------------------------------------------------------------------------------------
def test_every_kind_is_retryable_or_not_on_purpose():
    failed = Manifest(job="delete", ok=False, error="x", bad_input=False)
    refused = Manifest(job="delete", ok=False, error="x", bad_input=True)
    kinds = [
        (InvalidInputError("bad"), False),
        (AcidInputError("bad name"), False),
        (NameError_("bad name"), False),
        (JobSpecError("bad spec"), False),
        (NoSuchObjectError("unknown txn 3"), False),
        (TableNotFoundError("unknown table db.t"), False),
        (NotInitializedError("run hive-acid init"), False),
        (AlreadyExistsError("table db.t already exists"), False),
        (CompactionError("compaction 1 already ended"), False),
        (TxnError("transaction 3 is already committed"), False),
        (TooManyOpenTxnsError("too many open transactions"), True),
        (LockTimeoutError("lock not granted in 5 s"), True),
        (TxnAbortedError("aborted", 3, "by hand"), True),       # a new attempt opens a new txn
        (TxnTimedOutError("timed out", 3, "timeout"), True),
        (WriteConflictError("conflict", 3, "conflict"), True),  # and sees the winner's commit
        (HeartbeatLost("heartbeat refused", 3), True),
        (JobFailed("exit status 137"), True),                    # no manifest: killed, out of memory
        (JobFailed("failed", failed), True),
        (JobFailed("refused", refused), False),
        (AcidFileError("cannot list /t: connection reset"), True),
        (OrcFileError("corrupt footer"), True),
        (AcidError("not enough history"), True),
        (OSError("connection reset by peer"), True),
        (FileNotFoundError("gone"), True),
        (ValueError("a library's own complaint"), True),        # only InvalidInputError is bad input
        (RuntimeError("py4j gateway died"), True),
    ]
    assert [(type(e).__name__, is_retryable(e)) for e, _ in kinds] == [(type(e).__name__, r) for e, r in kinds]
    # A task that joined txn 3 (it did not open it) would join the same aborted txn again.
    for lost in (TxnAbortedError("aborted", 3, "x"), WriteConflictError("c", 3, "c"), HeartbeatLost("r", 3)):
        assert is_retryable(lost, joined_txn=3) is False
        assert is_retryable(lost, joined_txn=4) is True
    assert is_retryable(InvalidInputError("bad"), joined_txn=None) is False


def test_the_family_has_one_meaning_for_value_error():
    """An AcidError is no longer a ValueError (a file error is not bad input); the package's own
    validation raises InvalidInputError, which still is one."""
    assert not issubclass(AcidError, ValueError) and not issubclass(AcidFileError, ValueError)
    assert issubclass(AcidInputError, InvalidInputError) and issubclass(InvalidInputError, ValueError)
    from airflow_hive_acid.spark.write import WriteError
    assert issubclass(WriteError, InvalidInputError)
    with pytest.raises(InvalidInputError, match="unknown compaction type 'huge'"):
        CompactionType.parse("huge")
    with pytest.raises(InvalidInputError, match="unknown compaction state 'sleeping'"):
        CompactionState.parse("sleeping")
    with pytest.raises(InvalidInputError, match="unknown write stat fields"):
        WriteStat.from_dict({"db": "d", "bogus": 1})
    from airflow_hive_acid.operators.base import parse_txn_id
    with pytest.raises(InvalidInputError, match="txn_id must be positive"):
        parse_txn_id("-3")
    for kind in (AcidError, NotInitializedError, TooManyOpenTxnsError, JobFailed):
        assert issubclass(kind, HiveAcidError)


# -- operators: fails_fast -------------------------------------------------------------------------
def context(task_id: str, run_id: str = "manual__1") -> dict:
    from collections import defaultdict
    ti = SimpleNamespace(dag_id="d", task_id=task_id, run_id=run_id, map_index=-1)
    return {"ti": ti, "outlet_events": defaultdict(lambda: SimpleNamespace(extra={}))}


@pytest.fixture
def airflow_ms(sqlite_ms, monkeypatch, tmp_path):
    """The SQLite test metastore as the embedded default the operators' hook falls back to."""
    monkeypatch.setenv("HIVE_ACID_METASTORE", sqlite_ms.url)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    sqlite_ms.catalog.create_table("db.t", "id bigint, name string")
    return sqlite_ms


def test_a_bad_identifier_or_the_abort_of_a_joined_txn_fails_the_task_at_once(airflow_ms):
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_hive_acid.operators import AcidCommitTransactionOperator, AcidDeleteOperator
    bad_name = AcidDeleteOperator(task_id="bad", table="db.no-such", where="true", outlets=[])   # as if templated
    with pytest.raises(AirflowFailException, match="InvalidInputError: bad table name 'no-such'") as bad:
        bad_name.execute(context("bad"))
    assert isinstance(bad.value.__cause__, InvalidInputError)
    txn = airflow_ms.txns.open_txn()
    airflow_ms.txns.abort_txn(txn, "the begin task's branch gave up")
    joined = AcidDeleteOperator(task_id="joined", table="db.t", where="true", txn_id=str(txn))
    with pytest.raises(AirflowFailException, match="gave up") as lost:
        joined.execute(context("joined"))
    assert isinstance(lost.value.__cause__, TxnAbortedError)
    with pytest.raises(AirflowFailException, match="gave up"):
        AcidCommitTransactionOperator(task_id="commit", txn_id=txn).execute(context("commit"))


@pytest.mark.spark
def test_a_filesystem_error_in_a_job_is_retried_and_bad_input_is_not(airflow_ms, in_process, runner, tmp_path):
    """The job lists the table and then opens a base's ``_metadata_acid``: when that open fails
    (here the name is a directory; a file deleted between the listing and the read, or a
    store's failed GET, fail the same way) the job reports an AcidFileError, not bad input. The
    task fails normally, so Airflow retries it, and the retry succeeds once the file is fine."""
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_hive_acid.operators import AcidDeleteOperator
    pq.write_table(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), tmp_path / "rows.parquet")
    runner.run(Insert(source=SourceSpec(path=str(tmp_path / "rows.parquet"))), "db.t")
    location = Path(airflow_ms.catalog.get_table("db.t").location)
    unreadable = location / "base_0000009"
    (unreadable / "_metadata_acid").mkdir(parents=True)

    op = AcidDeleteOperator(task_id="del", table="db.t", where="id = 2")
    op.spark_hook = in_process                    # the real job, in the suite's Spark session
    with pytest.raises(JobFailed) as first:
        op.execute(context("del"))
    assert not isinstance(first.value, AirflowFailException)
    manifest = first.value.manifest
    assert (manifest.error_type, manifest.bad_input) == ("AcidFileError", False)
    assert "unreadable _metadata_acid" in manifest.error and is_retryable(first.value)
    [failed_txn] = [t for t in airflow_ms.txns.find_txns("airflow:d.del.manual__1")]
    assert failed_txn.state is TxnState.ABORTED

    shutil.rmtree(unreadable)                     # the store answers again: the retry succeeds
    out = op.execute(context("del"))
    assert (out["rows_deleted"], out["committed"]) == (1, True) and out["txn_id"] != failed_txn.txn_id

    refused = AcidDeleteOperator(task_id="del2", table="db.t", where="no_such_column = 1")
    refused.spark_hook = in_process
    with pytest.raises(AirflowFailException, match="no_such_column") as bad:
        refused.execute(context("del2"))
    assert isinstance(bad.value.__cause__, JobFailed) and bad.value.__cause__.bad_input
