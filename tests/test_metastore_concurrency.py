"""Many OS processes against one metastore: ids unique and monotonic, first committer wins."""
import multiprocessing as mp
import random
import time

from sqlalchemy import select

from airflow_hive_acid.metastore import Metastore, Operation, WriteConflictError, WriteStat
from airflow_hive_acid.metastore.schema import write_set

PROCS, TXNS_EACH = 6, 25


def _worker(url: str, seed: int, out: "mp.Queue") -> None:
    rnd = random.Random(seed)
    ms = Metastore(url)
    log = []
    try:
        for _ in range(TXNS_EACH):
            txn = ms.txns.open_txn(agent_info=f"proc-{seed}")
            wid = ms.txns.allocate_write_id(txn, "db.p")
            op = rnd.choice([Operation.INSERT, Operation.UPDATE, Operation.DELETE])
            part = f"ds={rnd.randint(1, 3)}"
            if rnd.random() < 0.5:
                time.sleep(rnd.random() * 0.01)   # widen the overlap window
            try:
                if rnd.random() < 0.1:
                    ms.txns.abort_txn(txn)
                    result = "aborted"
                else:
                    ms.txns.commit_txn(txn, [WriteStat("db", "p", part, wid, op, rows_inserted=1)])
                    result = "committed"
            except WriteConflictError:
                result = "conflict"
            log.append((txn, wid, op.value, part, result))
        out.put(("ok", log))
    except BaseException as exc:  # noqa: BLE001 - report to the parent
        out.put(("error", repr(exc)))
    finally:
        ms.close()


def test_many_processes(ms):
    ms.catalog.create_table("db.p", "id int", partitioned_by="ds string")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(ms.url, seed, q)) for seed in range(PROCS)]
    for p in procs:
        p.start()
    results = [q.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(30)
    errors = [r[1] for r in results if r[0] == "error"]
    assert not errors, errors
    logs = [r[1] for r in results]
    all_txns = [e[0] for log in logs for e in log]
    all_wids = [e[1] for log in logs for e in log]
    assert len(set(all_txns)) == len(all_txns) == PROCS * TXNS_EACH
    assert sorted(all_wids) == list(range(1, PROCS * TXNS_EACH + 1)), "write ids unique and gap-free"
    for log in logs:
        assert [e[0] for e in log] == sorted(e[0] for e in log), "txn ids only go up"
        assert [e[1] for e in log] == sorted(e[1] for e in log), "write ids only go up"
    # First committer wins: committed update/delete footprints on one partition never overlap.
    with ms.store.read() as conn:
        rows = conn.execute(select(write_set.c.ws_partition, write_set.c.ws_txnid, write_set.c.ws_commit_id)
                            .order_by(write_set.c.ws_partition, write_set.c.ws_commit_id)).all()
    by_part: dict[str, list[tuple[int, int]]] = {}
    for part, txn, commit_id in rows:
        by_part.setdefault(part, []).append((txn, commit_id))
    for part, seq in by_part.items():
        for (_, prev_commit), (txn, _) in zip(seq, seq[1:]):
            assert txn > prev_commit, f"{part}: txn {txn} overlapped a committed update (commit id {prev_commit})"
    outcomes = {e[4] for log in logs for e in log}
    assert "committed" in outcomes
    assert "conflict" in outcomes, "overlapping updates of one partition must have produced conflicts"
    snap = ms.txns.snapshot("db.p").valid_write_ids
    aborted = sorted(e[1] for log in logs for e in log if e[4] in ("aborted", "conflict"))
    assert list(snap.aborted_ids) == aborted and snap.open_ids == ()


def _open_and_die(url: str, out: "mp.Queue") -> None:
    from airflow_hive_acid.metastore import LockComponent, LockType
    ms = Metastore(url)
    txn = ms.txns.open_txn(agent_info="doomed")
    ms.txns.allocate_write_id(txn, "db.t")
    ms.locks.lock([LockComponent("db", "t", type=LockType.SHARED_WRITE, operation=Operation.UPDATE)], txn)
    out.put(txn)
    out.close()
    out.join_thread()
    import os
    os._exit(0)   # no heartbeat, no commit, no abort


def test_heartbeatless_txn_of_dead_process_is_reaped(ms):
    from airflow_hive_acid.metastore import TxnState
    ms.catalog.create_table("db.t", "id int")
    ms.set_setting("hive.txn.timeout", "1")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_open_and_die, args=(ms.url, q))
    p.start()
    txn = q.get(timeout=60)
    p.join(30)
    assert ms.txns.get_txn(txn).state is TxnState.OPEN and len(ms.locks.show_locks()) == 1
    time.sleep(1.3)
    report = ms.housekeep()
    assert report.timed_out == [txn]
    info = ms.txns.get_txn(txn)
    assert info.state is TxnState.ABORTED and info.reason == "timed out"
    assert ms.locks.show_locks() == []
    assert ms.txns.snapshot("db.t").valid_write_ids.aborted_ids == (1,)


def _initialize(url: str, warehouse: str, start: float, out: "mp.Queue") -> None:
    while time.time() < start:      # all at once, as the first tasks of DAGs started together do
        time.sleep(0.001)
    try:
        Metastore.initialize(url, warehouse=warehouse).close()
        out.put("ok")
    except BaseException as exc:  # noqa: BLE001 - report to the parent
        out.put(repr(exc))


def test_processes_creating_the_schema_at_once_all_succeed(metastore_url, warehouse):
    """Two DAGs triggered together on a fresh metastore both create its schema first: the ones
    that come second wait for the first and find the schema there (they used to fail with
    'database is locked' on SQLite and a unique violation on PostgreSQL)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + 4
    procs = [ctx.Process(target=_initialize, args=(metastore_url, str(warehouse), start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == ["ok"] * 4
    ms = Metastore(metastore_url)
    try:
        assert ms.txns.open_txn() == 1, "the id sequences were seeded once"
    finally:
        ms.close()


def _connect_and_write(path: str, start: float, out: "mp.Queue") -> None:
    from airflow_hive_acid.metastore.db import Store
    while time.time() < start:
        pass
    try:
        store = Store(f"sqlite:///{path}")
        with store.write() as conn:
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        store.dispose()
        out.put("ok")
    except BaseException as exc:  # noqa: BLE001 - report to the parent
        out.put(repr(exc))


def test_processes_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path):
    """Switching a new file to WAL from several processes at once deadlocks inside SQLite, which
    answers "database is locked" without waiting; each connection retries the switch (about 2%
    of such openings failed before, so 180 of them fail nearly surely without the retry)."""
    ctx = mp.get_context("fork")
    for round_ in range(30):
        out = ctx.Queue()
        start = time.time() + 0.2
        path = str(tmp_path / f"m{round_}.db")
        procs = [ctx.Process(target=_connect_and_write, args=(path, start, out)) for _ in range(6)]
        for p in procs:
            p.start()
        results = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        assert results == ["ok"] * 6, f"round {round_}"
