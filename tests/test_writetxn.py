"""The one write-transaction path (``writetxn.WriteTxn``) on SQLite and PostgreSQL: an own txn
commits its writes, a joined one only records them, any exception aborts naming the writes,
the txn heartbeats while the work runs (from a thread, or from a process of its own), and the
snapshot is taken after the lock."""
import os
import pickle
import threading
import time

import pytest

from airflow_hive_acid.errors import InvalidInputError, TxnTimedOutError
from airflow_hive_acid.heartbeat import spawn_heartbeat_process
from airflow_hive_acid.jobs import PartitionStats
from airflow_hive_acid.metastore import LockType, Operation, TxnState, TxnType
from airflow_hive_acid.writetxn import WriteTxn


@pytest.fixture
def tables(ms):
    ms.catalog.create_table("db.t", "id bigint, v string")
    ms.catalog.create_table("db.p", "id bigint, v string", partitioned_by="ds string")
    return ms


def _wrote(partition: str = "", rows: int = 3) -> list[PartitionStats]:
    return [PartitionStats(partition=partition, rows_inserted=rows)]


def test_own_txn_commits_its_writes_and_statement_ids(tables):
    ms = tables
    info = ms.catalog.get_table("db.p")
    with WriteTxn(ms, info, partition="ds=a", statement_key="k", statement_count=3, purpose="insert") as txn:
        assert ms.txns.get_txn(txn.txn_id).state is TxnState.OPEN
        assert txn.write_id == 1 and len(set(txn.statement_ids)) == 3 and txn.statement_ids[0] == 0 and txn.own
        [lock] = [li for li in ms.locks.show_locks("db", "p") if li.txn_id == txn.txn_id]
        assert (lock.partition, lock.type) == ("ds=a", LockType.SHARED_WRITE)
        txn.record(_wrote("ds=a"))
    assert ms.txns.get_txn(txn.txn_id).state is TxnState.COMMITTED
    [w] = ms.txns.writes_of(txn.txn_id)
    assert (w.partition, w.write_id, w.rows_inserted, w.operation) == ("ds=a", 1, 3, Operation.INSERT)
    stmt = ms.txns.statement_of(txn.txn_id, "db.p", "k")
    assert stmt is not None and stmt[0] == 0 and '"high_watermark"' in (stmt[1] or "")
    assert ms.txns.snapshot("db.p").valid_write_ids.is_write_id_valid(1)


def test_joined_txn_records_its_writes_and_leaves_the_commit_to_the_owner(tables):
    ms = tables
    owner = ms.txns.open_txn(agent_info="owner")
    info = ms.catalog.get_table("db.t")
    with WriteTxn(ms, info, txn_id=owner, statement_key="a") as txn:
        txn.record(_wrote())
    assert not txn.own and txn.txn_id == owner
    assert ms.txns.get_txn(owner).state is TxnState.OPEN
    assert [w.rows_inserted for w in ms.txns.writes_of(owner)] == [3]
    assert ms.txns.write_ids_of(owner) == {"db.t": txn.write_id}
    # a second statement of the same txn gets the same write id, its own statement ids
    with WriteTxn(ms, info, txn_id=owner, statement_key="b") as second:
        pass
    assert second.write_id == txn.write_id and second.statement_ids == (1,)
    ms.txns.commit_txn(owner)


def test_a_failure_in_a_joined_txn_does_not_abort_it(tables):
    ms = tables
    owner = ms.txns.open_txn()
    with pytest.raises(RuntimeError):
        with WriteTxn(ms, ms.catalog.get_table("db.t"), txn_id=owner):
            raise RuntimeError("boom")
    assert ms.txns.get_txn(owner).state is TxnState.OPEN


@pytest.mark.parametrize("error", [RuntimeError("job failed"), KeyboardInterrupt()])
def test_any_exception_aborts_and_names_the_writes(tables, error):
    ms = tables
    with pytest.raises(type(error)):
        with WriteTxn(ms, ms.catalog.get_table("db.p"), purpose="insert") as txn:
            txn.record(_wrote("ds=x"))
            raise error
    got = ms.txns.get_txn(txn.txn_id)
    assert got.state is TxnState.ABORTED and got.reason == f"insert failed: {error}"
    assert ("db", "p", "ds=x", [txn.txn_id]) in ms.compactions.aborted_write_targets("db.p")


def test_a_failed_lock_aborts_the_own_txn(tables):
    ms = tables
    info = ms.catalog.get_table("db.t")
    with WriteTxn(ms, info, lock=LockType.EXCL_WRITE):
        with pytest.raises(Exception, match="(?i)lock"):
            WriteTxn(ms, info, lock_wait=0.2, purpose="insert").begin()
    [refused] = [t for t in ms.txns.show_transactions() if t.state is TxnState.ABORTED]
    assert refused.reason is not None and refused.reason.startswith("insert failed:")


def test_the_snapshot_is_taken_after_the_lock(tables):
    """A writer waiting for the lock sees what the holder committed before releasing it."""
    ms = tables
    info = ms.catalog.get_table("db.t")
    holder = WriteTxn(ms, info, lock=LockType.EXCL_WRITE).begin()
    holder.record(_wrote())

    def commit_later() -> None:
        time.sleep(0.5)
        holder.commit()

    t = threading.Thread(target=commit_later)
    t.start()
    with WriteTxn(ms, info, lock_wait=30) as waiter:
        assert waiter.snapshot is not None
        assert waiter.snapshot.valid_write_ids.is_write_id_valid(holder.write_id)
    t.join()


def test_the_txn_heartbeats_while_the_work_runs(tables):
    ms = tables
    ms.set_setting("hive.txn.timeout", "1")
    with WriteTxn(ms, ms.catalog.get_table("db.t"), heartbeat_interval=0.2) as txn:
        time.sleep(1.6)
        assert ms.txns.abort_timed_out() == []
        txn.record(_wrote())
    assert ms.txns.get_txn(txn.txn_id).state is TxnState.COMMITTED
    # without the heartbeat the same work outlives the timeout
    quiet = WriteTxn(ms, ms.catalog.get_table("db.t")).begin(heartbeat="none")
    time.sleep(1.6)
    with pytest.raises(TxnTimedOutError):
        quiet.commit()
    assert ms.txns.get_txn(quiet.txn_id).state is TxnState.ABORTED


def test_a_heartbeat_process_keeps_a_txn_alive_until_it_ends(tables):
    """A txn begun in one process and committed in another (a Spark data source writer)."""
    ms = tables
    ms.set_setting("hive.txn.timeout", "2")
    begun = WriteTxn(ms, ms.catalog.get_table("db.t"), statement_key="ds").begin(heartbeat="process")
    assert begun.handle().heartbeat_file is not None
    # a second one, which only the txn's end stops
    pid = spawn_heartbeat_process(ms, begun.txn_id, 0.3, watch_pid=os.getpid()).pid
    time.sleep(3.0)
    assert ms.txns.abort_timed_out() == []
    handle = pickle.loads(pickle.dumps(begun.handle()))
    resumed = WriteTxn.resume(ms, handle)
    resumed.commit(resumed.record(_wrote(rows=5)))
    assert ms.txns.get_txn(begun.txn_id).state is TxnState.COMMITTED
    assert [w.rows_inserted for w in ms.txns.writes_of(begun.txn_id)] == [5]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:       # the process sees the txn ended and exits
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                break
        except ChildProcessError:             # already reaped
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"heartbeat process {pid} still runs after its txn committed")
    assert not os.path.exists(begun.handle().heartbeat_file), "the commit stopped the first"


def test_a_compaction_txn_has_no_write_id(tables):
    ms = tables
    info = ms.catalog.get_table("db.p")
    with WriteTxn(ms, info, txn_type=TxnType.COMPACTION, lock=LockType.SHARED_READ, operation=None,
                  partition="ds=a") as txn:
        assert txn.write_id == 0 and txn.statement_ids == ()
        assert ms.txns.get_txn(txn.txn_id).txn_type is TxnType.COMPACTION
    assert ms.txns.get_txn(txn.txn_id).state is TxnState.COMMITTED
    assert ms.txns.write_ids_of(txn.txn_id) == {}


def test_bad_arguments_are_refused(tables):
    ms = tables
    info = ms.catalog.get_table("db.t")
    with pytest.raises(InvalidInputError, match="cannot join"):
        WriteTxn(ms, info, txn_type=TxnType.COMPACTION, txn_id=3)
    with pytest.raises(InvalidInputError, match="locks with one of"):
        WriteTxn(ms, info, lock=LockType.EXCLUSIVE)
    with pytest.raises(InvalidInputError, match="statement_count"):
        WriteTxn(ms, info, statement_count=0)
    with pytest.raises(InvalidInputError, match="TableInfo"):
        WriteTxn(ms, "db.t")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="heartbeat is"):
        WriteTxn(ms, info).begin(heartbeat="sometimes")
