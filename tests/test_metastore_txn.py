"""Transactions, write ids, snapshots, heartbeats, timeouts and write-write conflicts."""
import pytest

from airflow_hive_acid.acid.writeids import ValidWriteIdList
from airflow_hive_acid.metastore import (
    InvalidInputError,
    Metastore,
    NoSuchObjectError,
    Operation,
    TooManyOpenTxnsError,
    TxnAbortedError,
    TxnError,
    TxnState,
    TxnTimedOutError,
    WriteConflictError,
    WriteStat,
)


class FakeClock:
    def __init__(self, start: int = 1_700_000_000_000):
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture
def clocked(ms):
    """The same metastore seen through a clock the test moves."""
    clock = FakeClock(ms.store.clock())
    m = Metastore(ms.url, clock=clock)
    m.catalog.create_table("db.t", "id bigint, v string")
    m.catalog.create_table("db.p", "id bigint, v string", partitioned_by="ds string")
    yield m, clock
    m.close()


def test_open_allocate_commit(ms):
    ms.catalog.create_table("db.t", "id int")
    ms.catalog.create_table("db.u", "id int")
    t1, t2 = ms.txns.open_txn(), ms.txns.open_txn()
    assert t2 == t1 + 1
    assert ms.txns.allocate_write_id(t2, "db.t") == 1
    assert ms.txns.allocate_write_id(t1, "db.t") == 2
    assert ms.txns.allocate_write_id(t1, "db.t") == 2, "a txn keeps its write id per table"
    assert ms.txns.allocate_write_ids(t1, ["db.u", "db.t"]) == {"db.u": 1, "db.t": 2}
    assert ms.txns.write_ids_of(t1) == {"db.t": 2, "db.u": 1}
    ms.txns.commit_txn(t1)
    assert ms.txns.get_txn(t1).state is TxnState.COMMITTED
    assert ms.txns.commit_txn(t1).already_committed, "committing twice is a no-op"
    ms.txns.abort_txn(t2, "changed my mind")
    info = ms.txns.get_txn(t2)
    assert info.state is TxnState.ABORTED and info.reason == "changed my mind"
    with pytest.raises(TxnAbortedError, match="changed my mind"):
        ms.txns.commit_txn(t2)
    with pytest.raises(TxnAbortedError):
        ms.txns.allocate_write_id(t2, "db.u")
    with pytest.raises(TxnError, match="already committed"):
        ms.txns.abort_txn(t1)
    with pytest.raises(NoSuchObjectError, match="unknown transaction 999"):
        ms.txns.heartbeat(999)
    with pytest.raises(NoSuchObjectError, match="unknown table"):
        ms.txns.allocate_write_id(ms.txns.open_txn(), "db.nope")
    assert [t.txn_id for t in ms.txns.show_transactions()] == [t2, t2 + 1]


def test_batch_open_and_cap(ms):
    ids = ms.txns.open_txns(5)
    assert ids == list(range(ids[0], ids[0] + 5))
    ms.set_setting("metastore.max.open.txns", "6")
    ms.txns.open_txn()
    with pytest.raises(TooManyOpenTxnsError, match="max_open_txns=6"):
        ms.txns.open_txn()
    ms.txns.abort_txns(ids)
    ms.txns.open_txn()
    with pytest.raises(InvalidInputError):
        ms.txns.open_txns(0)


def test_snapshot_excludes_open_and_aborted_writes(ms):
    ms.catalog.create_table("db.t", "id int")
    a, b, c = ms.txns.open_txns(3)
    wa, wb, wc = (ms.txns.allocate_write_id(x, "db.t") for x in (a, b, c))
    ms.txns.abort_txn(b)
    before = ms.txns.snapshot("db.t")
    assert before.valid_write_ids.to_string() == f"db.t:3:{wa}:{wa},{wc}:{wb}"
    ms.txns.commit_txn(a)
    # A snapshot taken while `a` was open keeps excluding its write id after `a` commits.
    kept = ValidWriteIdList.parse(before.to_dict()["valid_write_ids"])
    assert not kept.is_write_id_valid(wa)
    after = ms.txns.snapshot("db.t").valid_write_ids
    assert after.is_write_id_valid(wa) and not after.is_write_id_valid(wb) and not after.is_write_id_valid(wc)
    assert after.min_open == wc and after.aborted_ids == (wb,)
    # A txn sees its own write and not those committed by txns opened after it.
    d = ms.txns.open_txn()
    wd = ms.txns.allocate_write_id(d, "db.t")
    e = ms.txns.open_txn()
    we = ms.txns.allocate_write_id(e, "db.t")
    ms.txns.commit_txn(e)
    mine = ms.txns.snapshot("db.t", txn_id=d)
    assert mine.valid_write_ids.is_write_id_valid(wd) and not mine.valid_write_ids.is_write_id_valid(we)
    assert mine.valid_txns.high_watermark == d and not mine.valid_txns.is_txn_valid(e)
    ms.txns.commit_txn(c)
    ms.txns.commit_txn(d)
    with pytest.raises(TxnError):
        ms.txns.snapshot("db.t", txn_id=d)


def test_write_ids_never_repeat_or_go_back(ms):
    ms.catalog.create_table("db.t", "id int")
    seen = []
    for i in range(30):
        t = ms.txns.open_txn()
        seen.append(ms.txns.allocate_write_id(t, "db.t"))
        (ms.txns.commit_txn if i % 3 else ms.txns.abort_txn)(t)
    assert seen == list(range(1, 31))


def test_heartbeat_keeps_alive_and_timeout_aborts(clocked):
    m, clock = clocked
    m.set_setting("hive.txn.timeout", "10")
    t = m.txns.open_txn()
    m.txns.allocate_write_id(t, "db.t")
    for _ in range(5):
        clock.advance(8)
        m.txns.heartbeat(t)
    clock.advance(11)
    with pytest.raises(TxnTimedOutError, match="timed out"):
        m.txns.commit_txn(t)
    info = m.txns.get_txn(t)
    assert info.state is TxnState.ABORTED and info.reason == "timed out"
    with pytest.raises(TxnTimedOutError):
        m.txns.heartbeat(t)
    snap = m.txns.snapshot("db.t").valid_write_ids
    assert snap.aborted_ids == (1,)


def test_housekeeper_reaps_silent_txns_and_their_locks(clocked):
    from airflow_hive_acid.metastore import LockComponent, LockType
    m, clock = clocked
    m.set_setting("hive.txn.timeout", "10")
    silent, alive = m.txns.open_txns(2)
    m.locks.lock([LockComponent("db", "t", type=LockType.SHARED_WRITE)], silent)
    clock.advance(8)
    m.txns.heartbeat(alive)
    clock.advance(5)
    report = m.housekeep()
    assert report.timed_out == [silent]
    assert m.txns.get_txn(alive).state is TxnState.OPEN
    assert m.locks.show_locks() == []


def test_commit_records_stats_components_and_partitions(clocked):
    m, _ = clocked
    from sqlalchemy import select

    from airflow_hive_acid.metastore.schema import completed_txn_components, write_stats
    t = m.txns.open_txn()
    w = m.txns.allocate_write_id(t, "db.p")
    stats = [WriteStat("db", "p", "ds=2024-01-01", w, Operation.INSERT, rows_inserted=10, delta_files=2,
                       delta_bytes=2048),
             WriteStat("db", "p", "ds=2024-01-02", w, Operation.UPDATE, rows_updated=3, delta_files=1,
                       delta_bytes=300, delete_delta_files=1, delete_delta_bytes=120)]
    with pytest.raises(InvalidInputError, match="write id"):
        m.txns.commit_txn(t, [WriteStat("db", "p", "ds=x", w + 5)])
    with pytest.raises(InvalidInputError, match="not match"):
        m.txns.commit_txn(t, [WriteStat("db", "p", "zz=1", w)])
    m.txns.commit_txn(t, stats)
    assert m.catalog.list_partitions("db.p") == ["ds=2024-01-01", "ds=2024-01-02"]
    with m.store.read() as conn:
        rows = conn.execute(select(write_stats.c.ws_partition, write_stats.c.rows_inserted,
                                   write_stats.c.delete_delta_bytes).order_by(write_stats.c.ws_partition)).all()
        ctc = conn.execute(select(completed_txn_components.c.ctc_partition,
                                  completed_txn_components.c.ctc_update_delete)
                           .order_by(completed_txn_components.c.ctc_partition)).all()
    assert [tuple(r) for r in rows] == [("ds=2024-01-01", 10, 0), ("ds=2024-01-02", 0, 120)]
    assert [tuple(r) for r in ctc] == [("ds=2024-01-01", "N"), ("ds=2024-01-02", "Y")]


def _update(m, txn, table, part, op=Operation.UPDATE):
    db, tbl = table.split(".")
    return [WriteStat(db, tbl, part, m.txns.allocate_write_id(txn, table), op, rows_updated=1)]


def test_write_write_conflict_second_committer_aborts(clocked):
    m, _ = clocked
    a, b = m.txns.open_txns(2)
    wa, wb = _update(m, a, "db.p", "ds=1"), _update(m, b, "db.p", "ds=1", Operation.DELETE)
    m.txns.commit_txn(b, wb)
    with pytest.raises(WriteConflictError, match="write conflict on db.p/ds=1") as exc:
        m.txns.commit_txn(a, wa)
    assert exc.value.reason.startswith("write conflict")
    info = m.txns.get_txn(a)
    assert info.state is TxnState.ABORTED and info.reason.startswith("write conflict")
    # The aborted txn's write id is invalid for readers.
    assert m.txns.snapshot("db.p").valid_write_ids.is_write_id_aborted(wa[0].write_id)


def test_no_conflict_for_inserts_other_partitions_or_sequential_txns(clocked):
    m, _ = clocked
    a, b = m.txns.open_txns(2)
    m.txns.commit_txn(b, _update(m, b, "db.p", "ds=1"))
    m.txns.commit_txn(a, _update(m, a, "db.p", "ds=1", Operation.INSERT))       # insert never conflicts
    c, d = m.txns.open_txns(2)
    m.txns.commit_txn(c, _update(m, c, "db.p", "ds=1"))
    m.txns.commit_txn(d, _update(m, d, "db.p", "ds=2"))                         # other partition
    e = m.txns.open_txn()
    m.txns.commit_txn(e, _update(m, e, "db.p", "ds=1"))
    f = m.txns.open_txn()                                                        # opened after e committed
    m.txns.commit_txn(f, _update(m, f, "db.p", "ds=1"))
    g, h = m.txns.open_txns(2)                                                   # unpartitioned table
    m.txns.commit_txn(g, _update(m, g, "db.t", ""))
    with pytest.raises(WriteConflictError, match="db.t with transaction"):
        m.txns.commit_txn(h, _update(m, h, "db.t", "", Operation.DELETE))


def test_add_write_components_feed_conflicts_and_abort_cleanup(clocked):
    m, _ = clocked
    from sqlalchemy import select

    from airflow_hive_acid.metastore.schema import txn_components
    a, b = m.txns.open_txns(2)
    m.txns.allocate_write_id(a, "db.p")
    m.txns.allocate_write_id(b, "db.p")
    with pytest.raises(InvalidInputError):
        m.txns.add_write_components(a, "db.p", ["ds=../etc"], Operation.UPDATE)
    m.txns.add_write_components(a, "db.p", ["ds=1", "ds=2"], Operation.UPDATE)
    m.txns.add_write_components(b, "db.p", ["ds=2"], Operation.DELETE)
    m.txns.commit_txn(a)
    with pytest.raises(WriteConflictError):
        m.txns.commit_txn(b)
    with m.store.read() as conn:
        kept = conn.execute(select(txn_components.c.tc_partition).where(txn_components.c.tc_txnid == b)).all()
    assert [r[0] for r in kept] == ["ds=2"], "an aborted txn's components stay for the cleaner"


def test_statement_ids_count_on_and_extra_ids_come_from_the_top(ms):
    """A load's writer tasks each need a statement id: the statement keeps its dense id, the
    extra ones come from the top of the 0..4095 range, and a retry gets the same ids back."""
    ms.catalog.create_table("db.t", "id bigint")
    txn, _ = ms.txns.begin_write(["db.t"])
    assert ms.txns.statement_id(txn, "db.t", "a") == 0
    assert ms.txns.statement_ids(txn, "db.t", "load", 3) == [1, 4095, 4094]
    assert ms.txns.statement_id(txn, "db.t", "b") == 2, "statements keep counting 0, 1, 2"
    assert ms.txns.statement_ids(txn, "db.t", "load", 3) == [1, 4095, 4094], "a retry gets its ids back"
    assert ms.txns.statement_ids(txn, "db.t", "more", 2) == [3, 4093]
    with pytest.raises(InvalidInputError, match="no 4090 statement ids left"):
        ms.txns.statement_ids(txn, "db.t", "huge", 4090)
    with pytest.raises(InvalidInputError, match="statement key"):
        ms.txns.statement_ids(txn, "db.t", "bad\x1fkey")


def test_stream_batches_commit_exactly_once_and_are_purged(clocked):
    from airflow_hive_acid.metastore import StreamBatch
    m, clock = clocked
    q = "4f1c2a0e-0000-4000-8000-000000000001"
    for batch in (0, 1):
        txn, wids = m.txns.begin_write(["db.t"])
        m.txns.commit_txn(txn, [WriteStat("db", "t", "", wids["db.t"], Operation.INSERT, rows_inserted=10 + batch)],
                          stream=StreamBatch("db.t", q, batch))
    got = m.txns.stream_batches("db.t", q)
    assert [(b.batch_id, b.rows, b.write_id) for b in got] == [(0, 10, 1), (1, 11, 2)]
    assert m.txns.stream_batch("db.t", q, 1).txn_id == got[1].txn_id
    assert m.txns.stream_batch("db.t", q, 2) is None and m.txns.stream_batch("db.p", q, 1) is None
    # Spark replays batch 1 after a crash: the commit is refused and nothing of it is visible
    txn, wids = m.txns.begin_write(["db.t"])
    with pytest.raises(TxnError, match=f"batch 1 of streaming query {q} is already committed into db.t"):
        m.txns.commit_txn(txn, [WriteStat("db", "t", "", wids["db.t"], Operation.INSERT, rows_inserted=11)],
                          stream=StreamBatch("db.t", q, 1))
    assert m.txns.get_txn(txn).state is TxnState.OPEN
    m.txns.abort_txn(txn, "replayed batch")
    assert m.txns.snapshot("db.t").valid_write_ids.high_watermark == 3
    assert m.txns.snapshot("db.t").valid_write_ids.aborted_ids == (3,)
    with pytest.raises(InvalidInputError, match="bad stream batch"):
        m.txns.commit_txn(m.txns.open_txn(), stream=StreamBatch("db.t", "", 0))
    # housekeeping forgets old batches but each query's latest, which a replay is checked against
    clock.advance(8 * 86400)
    assert m.housekeep().purged_stream_batches == 1
    assert [b.batch_id for b in m.txns.stream_batches("db.t")] == [1]


def test_settings_take_their_field_types_and_refuse_non_positive_numbers():
    from airflow_hive_acid.metastore.config import MetastoreConfig
    c = MetastoreConfig()
    c.set("hive.txn.timeout", "2.5")
    c.set("metastore.max.open.txns", "7")
    c.set("hive.metastore.warehouse.dir", "/w")
    assert (c.txn_timeout, c.max_open_txns, c.warehouse) == (2.5, 7, "/w")
    for bad in ("0", "-1", "nan"):
        with pytest.raises(InvalidInputError, match="must be positive"):
            c.set("hive.txn.timeout", bad)
    with pytest.raises(InvalidInputError, match="needs a number"):
        c.set("metastore.max.open.txns", "1.5")
    with pytest.raises(InvalidInputError, match="unknown setting"):
        c.set("hive.no.such.setting", "1")
    assert c.txn_timeout == 2.5
