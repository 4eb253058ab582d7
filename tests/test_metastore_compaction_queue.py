import pytest

from airflow_hive_acid.metastore import (
    CompactionError,
    CompactionState,
    CompactionType,
    InvalidInputError,
    TxnType,
)


@pytest.fixture
def tbl(ms):
    ms.catalog.create_table("db.t", "id int")
    ms.catalog.create_table("db.p", "id int", partitioned_by="ds string")
    return ms


def test_enqueue_claim_finish_and_history(tbl):
    ms = tbl
    r = ms.compactions.enqueue("db.t", type="major", manual=True, reason="manual request")
    assert r.accepted and r.state is CompactionState.INITIATED and r.message == f"Compaction enqueued with id {r.id}"
    dup = ms.compactions.enqueue("db.t", type="minor")
    assert not dup.accepted and dup.id == r.id and "already enqueued" in dup.message
    other = ms.compactions.enqueue("db.p", "ds=1", CompactionType.MINOR)
    assert other.accepted
    first = ms.compactions.claim("worker-1")
    second = ms.compactions.claim("worker-2")
    assert (first.id, second.id) == (r.id, other.id) and ms.compactions.claim("worker-3") is None
    assert first.state is CompactionState.WORKING and first.worker_id == "worker-1"
    txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(first.id, txn, highest_write_id=0)
    ms.txns.commit_txn(txn)
    ms.compactions.mark_compacted(first.id)
    got = ms.compactions.get(first.id)
    assert got.state is CompactionState.READY_FOR_CLEANING and got.next_txn_id == txn + 1
    ms.compactions.mark_failed(second.id, "boom: disk full")
    with pytest.raises(CompactionError):
        ms.compactions.mark_cleaned(second.id)
    ms.compactions.mark_cleaned(first.id)
    shown = {c.id: c for c in ms.compactions.show()}
    assert shown[first.id].state is CompactionState.SUCCEEDED and shown[first.id].end is not None
    assert shown[second.id].state is CompactionState.FAILED and shown[second.id].error_message == "boom: disk full"
    assert [c.id for c in ms.compactions.show(table="p")] == [second.id]
    assert ms.compactions.latest("db.t").id == first.id


def test_ready_for_cleaning_waits_for_txns_open_at_compactor_commit(tbl):
    ms = tbl
    reader = ms.txns.open_txn()
    r = ms.compactions.enqueue("db.t")
    c = ms.compactions.claim("w")
    txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(c.id, txn, 0)
    ms.txns.commit_txn(txn)
    ms.compactions.mark_compacted(r.id)
    later = ms.txns.open_txn()
    assert ms.compactions.ready_for_cleaning() == []
    ms.txns.commit_txn(reader)
    assert [x.id for x in ms.compactions.ready_for_cleaning()] == [r.id], "a txn opened after commit does not block"
    ms.txns.commit_txn(later)


def test_requeue_did_not_initiate_and_purge(tbl):
    ms = tbl
    r = ms.compactions.enqueue("db.t")
    ms.compactions.claim("dead-worker")
    ms.compactions.requeue(r.id, "worker died")
    again = ms.compactions.claim("w2")
    assert again.id == r.id and again.worker_id == "w2"
    for i in range(4):
        ms.compactions.record_did_not_initiate("db.t", None, "minor", f"no deltas ({i})")
    assert ms.compactions.purge_history() == 2
    left = ms.compactions.show(states=[CompactionState.DID_NOT_INITIATE])
    assert [c.meta_info for c in left] == ["no deltas (2)", "no deltas (3)"]


def test_enqueue_validation(tbl):
    ms = tbl
    with pytest.raises(InvalidInputError, match="name the partition"):
        ms.compactions.enqueue("db.p")
    with pytest.raises(InvalidInputError):
        ms.compactions.enqueue("db.p", "ds=../x")
    with pytest.raises(ValueError, match="unknown compaction type"):
        ms.compactions.enqueue("db.t", type="medium")


def test_a_compaction_waiting_for_the_cleaner_outlives_the_committed_txn_retention(metastore_url, warehouse):
    """The housekeeper forgets committed txns after a week, but not a compactor txn whose request
    still waits for the cleaner: that request would read as 'txn aborted' and be failed."""
    from airflow_hive_acid.metastore import Metastore
    now = [1_700_000_000_000]
    ms = Metastore.initialize(metastore_url, warehouse=str(warehouse), clock=lambda: now[0])
    try:
        ms.catalog.create_table("db.t", "id int")
        r = ms.compactions.enqueue("db.t")
        ms.compactions.claim("w")
        txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
        ms.compactions.set_compactor_txn(r.id, txn, 0)
        ms.compactions.mark_compacted(r.id)
        ms.txns.commit_txn(txn)
        now[0] += 8 * 86_400_000
        report = ms.housekeep()
        assert report.failed_compactions == [] and ms.compactions.get(r.id).state is CompactionState.READY_FOR_CLEANING
        ms.compactions.mark_cleaned(r.id)
        assert ms.housekeep().purged_committed_txns == 1, "once cleaned, the txn is forgotten"
    finally:
        ms.close()
