"""Hive's lock compatibility, FIFO waiting, timeouts and release with the txn."""
import threading
import time

import pytest

from airflow_hive_acid.metastore import (
    LockComponent,
    LockState,
    LockTimeoutError,
    LockType,
    NoSuchObjectError,
    Operation,
    TxnAbortedError,
    TxnError,
)
from airflow_hive_acid.metastore.locks import conflicts

R, W, X, E = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE


@pytest.mark.parametrize("req, ex, waits", [
    (R, R, False), (R, W, False), (R, X, False), (R, E, True),
    (W, R, False), (W, W, False), (W, X, True), (W, E, True),
    (X, R, False), (X, W, True), (X, X, True), (X, E, True),
    (E, R, True), (E, W, True), (E, X, True), (E, E, True),
])
def test_hive4_compatibility_matrix(req, ex, waits):
    assert conflicts(req, ("db", "t", ""), ex, ("db", "t", "")) is waits


def test_overlap_rules():
    assert not conflicts(E, ("db", "t", "p=1"), E, ("db", "t", "p=2"))
    assert conflicts(E, ("db", "t", "p=1"), E, ("db", "t", ""))
    assert conflicts(E, ("db", "", ""), R, ("db", "t", ""))
    assert not conflicts(E, ("db", "t", ""), E, ("db", "u", ""))
    assert not conflicts(E, ("db", "t", ""), E, ("other", "t", ""))
    # Hive's exceptions between database-level reads and table-level EXCLUSIVE
    assert not conflicts(R, ("db", "", ""), E, ("db", "t", ""))
    assert not conflicts(E, ("db", "t", ""), R, ("db", "", ""))


@pytest.fixture
def tables(ms):
    ms.catalog.create_table("db.t", "id int")
    ms.catalog.create_table("db.p", "id int", partitioned_by="ds string")
    ms.set_setting("hive.lock.wait.timeout", "5")
    return ms


def test_shared_locks_coexist_exclusive_waits_then_times_out(tables):
    ms = tables
    a, b, c = ms.txns.open_txns(3)
    ms.txns.allocate_write_id(a, "db.t")
    ms.txns.allocate_write_id(b, "db.t")
    ms.locks.lock([LockComponent("db", "t", type=W, operation=Operation.UPDATE)], a)
    ms.locks.lock([LockComponent("db", "t", type=W, operation=Operation.INSERT)], b)
    t0 = time.monotonic()
    with pytest.raises(LockTimeoutError, match=r"blocked by lock 1\.1 \(SHARED_WRITE on db\.t, transaction"):
        ms.locks.lock([LockComponent("db", "t", type=X)], c, wait=0.4)
    assert 0.35 <= time.monotonic() - t0 < 3
    assert [li.state for li in ms.locks.show_locks()] == [LockState.ACQUIRED, LockState.ACQUIRED]
    ms.txns.commit_txn(a)
    ms.txns.commit_txn(b)
    assert ms.locks.show_locks() == []
    ms.locks.lock([LockComponent("db", "t", type=X)], c, wait=0.1)


def test_waiter_acquires_once_holder_ends_fifo(tables):
    ms = tables
    holder, waiter = ms.txns.open_txns(2)
    ms.locks.lock([LockComponent("db", "t", type=E)], holder)
    got = {}

    def wait_for_it():
        got["ext"] = ms.locks.lock([LockComponent("db", "t", type=R)], waiter, wait=5)
        got["at"] = time.monotonic()

    th = threading.Thread(target=wait_for_it)
    th.start()
    time.sleep(0.3)
    locks = ms.locks.show_locks()
    assert [(li.state, li.type) for li in locks] == [(LockState.ACQUIRED, E), (LockState.WAITING, R)]
    assert locks[1].blocked_by == (locks[0].ext_id, 1)
    released = time.monotonic()
    ms.txns.abort_txn(holder)
    th.join(5)
    assert got["at"] >= released and ms.locks.show_locks()[0].state is LockState.ACQUIRED


def test_waiter_whose_txn_is_aborted_gets_txn_aborted(tables):
    ms = tables
    holder, waiter = ms.txns.open_txns(2)
    ms.locks.lock([LockComponent("db", "t", type=E)], holder)
    got = {}

    def wait_for_it():
        try:
            ms.locks.lock([LockComponent("db", "t", type=R)], waiter, wait=5)
        except Exception as exc:   # the test checks which error it was
            got["error"] = exc

    th = threading.Thread(target=wait_for_it)
    th.start()
    time.sleep(0.3)
    ms.txns.abort_txn(waiter)
    th.join(5)
    assert isinstance(got.get("error"), TxnAbortedError), got
    assert got["error"].txn_id == waiter
    assert f"transaction {waiter} was aborted while waiting for lock" in str(got["error"])


def test_partition_locks_and_txnless_locks(tables):
    ms = tables
    a = ms.txns.open_txn()
    ms.locks.lock([LockComponent("db", "p", "ds=1", type=E)], a)
    ext = ms.locks.lock([LockComponent("db", "p", "ds=2", type=E)], wait=0.2)   # no txn
    with pytest.raises(LockTimeoutError):
        ms.locks.lock([LockComponent("db", "p", type=R)], wait=0.2)             # table covers ds=1
    ms.locks.heartbeat_lock(ext)
    with pytest.raises(TxnError, match="belongs to transaction"):
        ms.locks.unlock(ms.locks.show_locks()[0].ext_id if ms.locks.show_locks()[0].txn_id else
                        ms.locks.show_locks()[1].ext_id)
    ms.locks.unlock(ext)
    with pytest.raises(NoSuchObjectError):
        ms.locks.unlock(ext)


def test_lock_validation(tables):
    ms = tables
    from airflow_hive_acid.metastore import InvalidInputError
    with pytest.raises(NoSuchObjectError):
        ms.locks.lock([LockComponent("db", "nope", type=R)], wait=0.1)
    with pytest.raises(InvalidInputError):
        ms.locks.lock([LockComponent("db", "p", "ds=..", type=R)], wait=0.1)
    with pytest.raises(InvalidInputError):
        ms.locks.lock([LockComponent("db;x", "p", type=R)], wait=0.1)
    with pytest.raises(InvalidInputError):
        ms.locks.lock([], wait=0.1)
