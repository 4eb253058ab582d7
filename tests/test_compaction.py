"""Compaction and cleaning with the Spark jobs run in the shared local SparkSession (the
end-to-end test goes through spark-submit): identical scans before and after minor and major
compaction at the latest and an older open snapshot, writers during compaction, aborted writes
(HIVE-25502), a cleaner that never claims success while files remain (HIVE-24302), dead and
failing workers, and the initiator's thresholds."""
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pyarrow.parquet as pq
import pytest

from airflow_hive_acid.acid.stats import WriteCounts
from airflow_hive_acid.compactor import Compactor
from airflow_hive_acid.jobs.spec import Compact, Delete, Insert, JobSpec, Read, SnapshotSpec, Update
from airflow_hive_acid.metastore import (
    CompactionState,
    InvalidInputError,
    LockComponent,
    LockType,
    NoSuchObjectError,
    Operation,
    TxnState,
    TxnType,
    WriteStat,
)
from airflow_hive_acid.spark import compact as compact_job
from airflow_hive_acid.statements import StatementRunner

S = CompactionState


def source(tmp_path: Path, name: str, **cols) -> dict:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.table(cols), path)
    return {"path": str(path)}


def scan(runner, table, tmp_path, txn_id=None):
    out = tmp_path / f"read-{time.monotonic_ns()}.jsonl"
    runner.read(table, Read.from_dict({"output": str(out)}), txn_id=txn_id)
    return sorted(json.dumps(json.loads(x), sort_keys=True) for x in out.read_text().splitlines())


def dirs(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir() if not p.name.startswith("_"))


def insert(runner, table, tmp_path, ids, ds=None, tag="v"):
    cols = {"id": ids, "v": [f"{tag}{i}" for i in ids]}
    if ds is not None:
        cols["ds"] = [ds] * len(ids)
    return runner.run(Insert.from_dict({"source": source(tmp_path, f"s{time.monotonic_ns()}", **cols)}), table)


@pytest.fixture
def prunner(ms, in_process):
    """A statement runner over the parametrized (SQLite and PostgreSQL) metastore."""
    return StatementRunner(ms, in_process, lock_wait=5)


def test_minor_then_major_scans_identical_latest_and_old_snapshot_cleaner_waits(prunner, in_process, tmp_path,
                                                                                warehouse):
    ms = prunner.ms
    t = "db.events"
    ms.catalog.create_table(t, "id bigint, v string", partitioned_by="ds string", bucketed_by="id", buckets=2)
    insert(prunner, t, tmp_path, list(range(40)), "d1")
    insert(prunner, t, tmp_path, list(range(40, 60)), "d1")
    insert(prunner, t, tmp_path, list(range(100, 110)), "d2")
    prunner.run(Update.from_dict({"set": {"v": "upper(v)"}, "where": "id % 7 = 0"}), t)
    prunner.run(Delete.from_dict({"where": "id % 5 = 1 and ds = 'd1'"}), t)
    before = scan(prunner, t, tmp_path)
    part = Path(ms.catalog.get_table(t).location) / "ds=d1"
    d2 = next(p for p in warehouse.rglob("ds=d2"))
    d2_before = dirs(d2)
    reader = ms.txns.open_txn(txn_type=TxnType.READ_ONLY)     # an older snapshot, open throughout
    assert scan(prunner, t, tmp_path, reader) == before
    c = Compactor(ms, in_process, worker_id="test-worker")

    with pytest.raises(InvalidInputError, match="name the partition"):
        c.compact(t, type="minor")
    with pytest.raises(InvalidInputError, match="no partition"):
        c.compact(t, "ds=zz", "minor")
    with pytest.raises(ValueError, match="unknown compaction type"):
        c.compact(t, "ds=d1", "medium")
    with pytest.raises(NoSuchObjectError):
        c.compact("db.nosuch", None, "major")

    minor = c.compact(t, "ds=d1", "minor")
    assert minor["state"] == "initiated" and minor["accepted"]
    assert c.compact(t, "ds=d1", "major")["accepted"] is False, "no duplicate of a queued request"
    res = c.run_worker(table=t)
    assert res.state == "ready for cleaning", res.to_dict()
    hwm, txn = res.highest_write_id, res.txn_id
    assert hwm == 5 and res.output == [f"delta_0000001_{hwm:07d}_v{txn:07d}",
                                       f"delete_delta_0000001_{hwm:07d}_v{txn:07d}"]
    assert scan(prunner, t, tmp_path) == before
    assert scan(prunner, t, tmp_path, reader) == before
    # the reader's snapshot may still need the old deltas: the cleaner leaves them alone
    assert [r.kind for r in c.clean()] == [] and ms.compactions.get(minor["id"]).state is S.READY_FOR_CLEANING
    assert "delta_0000001_0000001_0000" in dirs(part)

    major = c.compact(t, "ds=d1", "major")
    res = c.run_worker(cq_id=major["id"])
    assert res.state == "ready for cleaning" and res.output == [f"base_{hwm:07d}_v{res.txn_id:07d}"]
    assert res.rows == len([r for r in before if json.loads(r)["ds"] == "d1"])
    assert scan(prunner, t, tmp_path) == before
    assert scan(prunner, t, tmp_path, reader) == before, "old snapshot still reads the old files"
    assert c.clean() == []
    ms.txns.commit_txn(reader)

    cleaned = c.clean()
    assert [(r.id, r.state) for r in cleaned] == [(minor["id"], "succeeded"), (major["id"], "succeeded")]
    assert dirs(part) == [f"base_{hwm:07d}_v{res.txn_id:07d}"]
    assert scan(prunner, t, tmp_path) == before
    assert dirs(d2) == d2_before, "other partitions are not touched"
    shown = {x.id: x for x in ms.compactions.show(table="events")}
    assert shown[major["id"]].state is S.SUCCEEDED and shown[major["id"]].manual
    assert shown[major["id"]].highest_write_id == hwm and shown[major["id"]].end >= shown[major["id"]].start


def _begin_dp_write(ms, in_process, table, tmp_path, ids, ds_values, lock_partition=""):
    """A write whose partitions come from the rows (dynamic partitioning): the txn only locks
    the table, so nothing says which partitions it wrote."""
    info = ms.catalog.get_table(table)
    txn, wids = ms.txns.begin_write([table])
    ms.locks.lock([LockComponent(info.db, info.name, lock_partition, LockType.SHARED_WRITE, Operation.INSERT)], txn)
    snap = ms.txns.snapshot(table, txn_id=txn)
    spec = JobSpec(table=info.to_spec(),
                   snapshot=SnapshotSpec.of(snap),
                   request=Insert.from_dict({"source": source(tmp_path, f"dp{txn}", id=ids, v=[f"x{i}" for i in ids],
                                                              ds=ds_values)}),
                   manifest_path=str(tmp_path / f"m{txn}.json"), txn_id=txn, write_id=wids[table], statement_id=0)
    in_process(spec)
    return txn, wids[table]


def test_writer_during_compaction_loses_nothing_and_no_open_or_aborted_rows_compacted(runner, in_process,
                                                                                         tmp_path, warehouse):
    ms = runner.ms
    t = "db.flat"
    ms.catalog.create_table(t, "id bigint, v string", bucketed_by="id", buckets=2)
    for k in range(3):
        insert(runner, t, tmp_path, list(range(k * 10, k * 10 + 10)))
    info = ms.catalog.get_table(t)
    # write id 4: aborted after writing its files; write id 5: open while the compaction runs
    aborted_txn, aborted_wid = _begin_dp_write_flat(ms, in_process, t, tmp_path, [900, 901])
    ms.txns.abort_txn(aborted_txn, "killed")
    open_txn, open_wid = _begin_dp_write_flat(ms, in_process, t, tmp_path, [500, 501, 502])
    assert (aborted_wid, open_wid) == (4, 5)
    expected = scan(runner, t, tmp_path)

    def submit(spec):
        m = in_process(spec)
        if spec.job == "compact":       # the writer commits while the compaction is running
            ms.txns.commit_txn(open_txn, [WriteStat(info.db, info.name, "", open_wid, rows_inserted=3)])
        return m

    c = Compactor(ms, submit)
    job = c.compact(t, type="major")
    res = c.run_worker(cq_id=job["id"])
    assert res.state == "ready for cleaning" and res.highest_write_id == 4
    root = Path(info.location)
    base = root / f"base_0000004_v{res.txn_id:07d}"
    write_ids = set()
    for f in base.glob("bucket_*"):
        write_ids |= set(po.ORCFile(str(f)).read(columns=["originalTransaction", "currentTransaction"])
                         .column(0).to_pylist())
    assert write_ids == {1, 2, 3}, "neither the aborted (4) nor the open (5) write id is in the base"
    after = scan(runner, t, tmp_path)
    assert after == sorted(expected + [json.dumps({"id": i, "v": f"x{i}"}, sort_keys=True) for i in (500, 501, 502)])
    out = c.clean(table=t)
    assert [r.state for r in out if r.kind == "compaction"] == ["succeeded"]
    assert dirs(root) == [base.name, "delta_0000005_0000005_0000"], "aborted delta_4 cleaned, open-then-committed kept"
    assert scan(runner, t, tmp_path) == after


def _begin_dp_write_flat(ms, in_process, table, tmp_path, ids):
    info = ms.catalog.get_table(table)
    txn, wids = ms.txns.begin_write([table])
    ms.locks.lock([LockComponent(info.db, info.name, "", LockType.SHARED_WRITE, Operation.INSERT)], txn)
    snap = ms.txns.snapshot(table, txn_id=txn)
    spec = JobSpec(table=info.to_spec(),
                   snapshot=SnapshotSpec.of(snap),
                   request=Insert.from_dict({"source": source(tmp_path, f"w{txn}", id=ids, v=[f"x{i}" for i in ids])}),
                   manifest_path=str(tmp_path / f"m{txn}.json"), txn_id=txn, write_id=wids[table], statement_id=0)
    in_process(spec)
    return txn, wids[table]


def test_aborted_dynamic_partition_write_cleanup_keeps_live_data_hive_25502(runner, in_process, tmp_path, warehouse):
    ms = runner.ms
    t = "db.dp"
    ms.catalog.create_table(t, "id bigint, v string", partitioned_by="ds string")
    insert(runner, t, tmp_path, [1, 2, 3], "a")
    insert(runner, t, tmp_path, [4, 5], "b")
    insert(runner, t, tmp_path, [6], "a")
    c = Compactor(ms, in_process)
    job = c.compact(t, "ds=a", "major")
    assert c.run_worker(cq_id=job["id"]).state == "ready for cleaning"
    assert [r.state for r in c.clean(table=t)] == ["succeeded"]
    live = scan(runner, t, tmp_path)
    root = Path(ms.catalog.get_table(t).location)
    layout = {p: dirs(root / p) for p in ("ds=a", "ds=b")}
    assert layout["ds=a"][0].startswith("base_0000003_v") and len(layout["ds=a"]) == 1
    # an aborted write into a, b and a new partition c, recorded only at table level
    txn, wid = _begin_dp_write(ms, in_process, t, tmp_path, [7, 8, 9], ["a", "b", "c"])
    ms.txns.abort_txn(txn, "task killed")
    aborted_dir = f"delta_{wid:07d}_{wid:07d}_0000"
    assert all(aborted_dir in dirs(root / p) for p in ("ds=a", "ds=b", "ds=c"))
    assert scan(runner, t, tmp_path) == live
    # a reader with an open snapshot does not stop aborted files from going: no snapshot reads them
    reader = ms.txns.open_txn(txn_type=TxnType.READ_ONLY)
    results = c.clean(table=t)
    aborted = [r for r in results if r.kind == "aborted"]
    assert len(aborted) == 1 and aborted[0].partitions is None and not aborted[0].remaining
    assert sorted(aborted[0].deleted) == sorted(f"{p}/{aborted_dir}" for p in ("ds=a", "ds=b", "ds=c"))
    assert {p: dirs(root / p) for p in ("ds=a", "ds=b")} == layout, "live data untouched"
    assert dirs(root / "ds=c") == []
    assert scan(runner, t, tmp_path, reader) == live and scan(runner, t, tmp_path) == live
    ms.txns.commit_txn(reader)
    assert [r for r in c.clean(table=t) if r.kind == "compaction"] == []


def test_cleaner_succeeds_only_when_files_are_gone_hive_24302(runner, in_process, tmp_path, monkeypatch):
    ms = runner.ms
    t = "db.c24302"
    ms.catalog.create_table(t, "id bigint, v string")
    for k in range(3):
        insert(runner, t, tmp_path, [k])
    c = Compactor(ms, in_process)
    job = c.compact(t, type="major")
    c.run_worker(cq_id=job["id"])
    root = Path(ms.catalog.get_table(t).location)
    real = compact_job._delete_path

    def stubborn(fs, path, is_dir):      # a delete that silently does nothing for one directory
        if path.endswith("delta_0000002_0000002_0000"):
            return
        real(fs, path, is_dir)

    monkeypatch.setattr(compact_job, "_delete_path", stubborn)
    [r] = [r for r in c.clean() if r.kind == "compaction"]
    assert r.state == "ready for cleaning" and r.remaining == ["delta_0000002_0000002_0000"]
    info = ms.compactions.get(job["id"])
    assert info.state is S.READY_FOR_CLEANING and "still present" in info.error_message
    assert "delta_0000002_0000002_0000" in dirs(root)
    monkeypatch.setattr(compact_job, "_delete_path", real)
    [r] = [r for r in c.clean() if r.kind == "compaction"]
    assert r.state == "succeeded" and ms.compactions.get(job["id"]).state is S.SUCCEEDED
    assert [n for n in dirs(root) if n.startswith("delta_")] == []


def test_dead_worker_is_recovered_and_failures_stop_the_initiator(runner, in_process, tmp_path):
    ms = runner.ms
    t = "db.dead"
    ms.catalog.create_table(t, "id bigint, v string", properties={
        "compactorthreshold.hive.compactor.delta.num.threshold": "2",
        "compactorthreshold.hive.compactor.delta.pct.threshold": "100"})
    for k in range(3):
        insert(runner, t, tmp_path, [k, k + 10])
    expected = scan(runner, t, tmp_path)
    root = Path(ms.catalog.get_table(t).location)
    c = Compactor(ms, in_process, worker_id="w-test")
    [d] = c.initiate()
    assert (d.action, d.type.name) == ("initiated", "MAJOR") and "no base yet" in d.reason

    # a worker that dies mid-job: its output exists but its txn never commits or heartbeats
    ms.set_setting("hive.txn.timeout", "1")
    req = ms.compactions.claim("doomed-worker")
    txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    snap = ms.txns.snapshot(t, txn_id=txn)
    cwl = snap.valid_write_ids.for_compactor()
    ms.compactions.set_compactor_txn(req.id, txn, cwl.high_watermark)
    info = ms.catalog.get_table(t)
    in_process(JobSpec(table=info.to_spec(), snapshot=SnapshotSpec.of(snap, cwl),
                       request=Compact(type="major"), manifest_path=str(tmp_path / "dead.json"), txn_id=txn,
                       write_id=cwl.high_watermark))
    dead_base = f"base_0000003_v{txn:07d}"
    assert dead_base in dirs(root)
    assert scan(runner, t, tmp_path) == expected, "uncommitted compactor output is invisible"
    time.sleep(1.3)
    report = ms.housekeep()
    assert txn in report.timed_out and req.id in report.requeued_compactions
    again = ms.compactions.get(req.id)
    assert again.state is S.INITIATED and "aborted" in again.error_message
    ms.set_setting("hive.txn.timeout", "300")

    # a failing compaction: a corrupt file; marked failed with the error, twice
    victim = next(root.glob("delta_0000001_0000001_0000/bucket_*"))
    good = victim.read_bytes()
    victim.write_bytes(b"not an orc file")
    res = c.run_worker(cq_id=req.id)
    assert res.state == "failed" and "corrupt" in res.error
    assert ms.compactions.get(req.id).state is S.FAILED and "corrupt" in ms.compactions.get(req.id).error_message
    [d] = c.initiate()
    assert d.action == "initiated"
    res2 = c.run_worker()
    assert res2.state == "failed"
    [d] = c.initiate()
    assert d.action == "did not initiate" and "2 consecutive compaction attempts failed" in d.reason
    assert ms.compactions.get(d.compaction_id).state is S.DID_NOT_INITIATE
    victim.write_bytes(good)
    assert scan(runner, t, tmp_path) == expected

    # a manual compaction succeeds: auto-initiation resumes once new deltas call for it
    out = c.compact(t, type="major", wait=True)
    assert out["state"] == "succeeded", out
    assert dead_base not in dirs(root), "the dead worker's output was cleaned"
    assert scan(runner, t, tmp_path) == expected
    [d] = c.initiate()
    assert d.action == "skipped"
    for k in range(3):
        insert(runner, t, tmp_path, [100 + k])
    [d] = c.initiate()
    assert (d.action, d.type.name) == ("initiated", "MINOR"), d.to_dict()


def test_killed_worker_between_compact_and_commit_fails_not_stuck(runner, in_process, tmp_path):
    """A worker that dies after marking the request ready for cleaning but before committing
    leaves it failed (never stuck in ready for cleaning), and its output is never read."""
    ms = runner.ms
    t = "db.stuck"
    ms.catalog.create_table(t, "id bigint, v string")
    for k in range(2):
        insert(runner, t, tmp_path, [k])
    expected = scan(runner, t, tmp_path)

    class Crash(BaseException):
        pass

    c = Compactor(ms, in_process)
    job = c.compact(t, type="major")
    real_commit = ms.txns.commit_txn

    def dying_commit(txn_id, writes=(), *, stream=None):
        if ms.txns.get_txn(txn_id).txn_type is TxnType.COMPACTION:
            raise Crash()
        return real_commit(txn_id, writes, stream=stream)

    ms.txns.commit_txn = dying_commit
    # the process "dies" right there: no cleanup of its own reaches the metastore
    c._fail = lambda *a: None
    with pytest.raises(Crash):
        c.run_worker(cq_id=job["id"])
    ms.txns.commit_txn = real_commit
    stuck = ms.compactions.get(job["id"])
    assert stuck.state is S.READY_FOR_CLEANING and stuck.next_txn_id is None
    assert scan(runner, t, tmp_path) == expected
    ms.txns.abort_txns([stuck.txn_id], "timed out")
    report = ms.housekeep()
    assert job["id"] in report.failed_compactions
    assert ms.compactions.get(job["id"]).state is S.FAILED
    assert ms.txns.get_txn(stuck.txn_id).state is TxnState.ABORTED, "kept: its _v output must stay invisible"
    Compactor(ms, in_process).clean(table=t)
    assert not [p for p in Path(ms.catalog.get_table(t).location).iterdir() if p.name.startswith("base_")]
    assert scan(runner, t, tmp_path) == expected


# -- initiator (metastore only) ----------------------------------------------------------------------
def _commit(ms, table, part="", **stat):
    txn, wids = ms.txns.begin_write([table])
    db, name = table.split(".")
    ms.txns.commit_txn(txn, [WriteStat(db, name, part, wids[table], **stat)])
    return wids[table]


def test_initiator_thresholds_overrides_and_no_duplicates(ms):
    ms.catalog.create_table("db.p", "id bigint", partitioned_by="ds string")
    ms.catalog.create_table("db.off", "id bigint", properties={"NO_AUTO_COMPACTION": "true"})
    ms.catalog.create_table("db.over", "id bigint",
                            properties={"compactorthreshold.hive.compactor.delta.num.threshold": "20"})
    for _ in range(11):
        _commit(ms, "db.p", "ds=nobase", delta_files=1, delta_bytes=100, rows_inserted=1)
        _commit(ms, "db.off", delta_files=1, delta_bytes=100)
        _commit(ms, "db.over", delta_files=1, delta_bytes=100)
    _commit(ms, "db.p", "ds=based", base_files=1, base_bytes=100_000, rows_inserted=1)   # INSERT OVERWRITE
    for _ in range(11):
        _commit(ms, "db.p", "ds=based", delta_files=1, delete_delta_files=1, delta_bytes=100, delete_delta_bytes=50)
    _commit(ms, "db.p", "ds=big", base_files=1, base_bytes=1000)
    _commit(ms, "db.p", "ds=big", delta_files=1, delta_bytes=200)
    _commit(ms, "db.p", "ds=quiet", base_files=1, base_bytes=1000)
    _commit(ms, "db.p", "ds=quiet", delta_files=1, delta_bytes=10)
    got = {(d.table, d.partition): d for d in ms.initiator.run(initiator_id="init-1")}
    assert (got[("db.p", "ds=nobase")].action, got[("db.p", "ds=nobase")].type.name) == ("initiated", "MAJOR")
    b = got[("db.p", "ds=based")]
    assert (b.action, b.type.name) == ("initiated", "MINOR") and b.stats.deltas == 22 and "22 deltas" in b.reason
    assert (got[("db.p", "ds=big")].type.name, got[("db.p", "ds=big")].action) == ("MAJOR", "initiated")
    assert "0.200 > delta.pct.threshold 0.1" in got[("db.p", "ds=big")].reason
    assert got[("db.p", "ds=quiet")].action == "skipped" and "no threshold met" in got[("db.p", "ds=quiet")].reason
    assert got[("db.off", "")].action == "skipped" and "no_auto_compaction" in got[("db.off", "")].reason
    assert got[("db.over", "")].action == "skipped" and "threshold 20" in got[("db.over", "")].reason
    queued = ms.compactions.show(states=[S.INITIATED])
    assert len(queued) == 3 and all(q.initiator_id == "init-1" and q.meta_info for q in queued)
    again = {(d.table, d.partition): d for d in ms.initiator.run()}
    assert again[("db.p", "ds=based")].action == "already queued"
    assert len(ms.compactions.show(states=[S.INITIATED])) == 3, "never a duplicate"

    # a minor compaction's recorded output replaces the deltas it covered
    req = ms.compactions.claim("w", cq_id=b.compaction_id)
    txn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    hwm = ms.txns.snapshot("db.p", txn_id=txn).valid_write_ids.for_compactor().high_watermark
    ms.compactions.set_compactor_txn(req.id, txn, hwm)
    ms.compactions.mark_compacted(req.id, WriteCounts(delta_files=1, delta_bytes=1000, delete_delta_files=1,
                                                      delete_delta_bytes=500))
    ms.txns.commit_txn(txn)
    after = {(d.table, d.partition): d for d in ms.initiator.run()}
    st = after[("db.p", "ds=based")]
    assert st.action == "skipped" and (st.stats.deltas, st.stats.delta_bytes, st.stats.base_bytes) == (2, 1500, 100_000)


def test_initiator_on_aborted_writes_and_failed_threshold(ms):
    ms.catalog.create_table("db.ab", "id bigint")
    ms.set_setting("hive.compactor.abortedtxn.threshold", "2")
    info = ms.catalog.get_table("db.ab")
    for _ in range(3):
        txn, wids = ms.txns.begin_write(["db.ab"])
        ms.txns.abort_txn(txn, "failed", [WriteStat(info.db, info.name, "", wids["db.ab"])])
    [d] = ms.initiator.run()
    assert (d.action, d.type.name) == ("initiated", "MAJOR") and "3 aborted transactions" in d.reason
    for _ in range(2):
        req = ms.compactions.claim("w")
        ms.compactions.mark_failed(req.id, "boom")
        [d] = ms.initiator.run()
    assert d.action == "did not initiate" and d.type.name == "MAJOR"
    assert ms.compactions.show(states=[S.INITIATED]) == []
    ms.set_setting("hive.compactor.aborted.txn.time.threshold", "0.001")
    ms.set_setting("hive.compactor.abortedtxn.threshold", "1000")
    ms.set_setting("metastore.compactor.initiator.failed.compacts.threshold", "5")
    [d] = ms.initiator.run()
    assert (d.action, d.type.name) == ("initiated", "MINOR") and "aborted write" in d.reason


def test_cli_compact_show_and_validation(ms, capsys):
    from airflow_hive_acid import cli
    ms.catalog.create_table("db.c", "id bigint", partitioned_by="ds string")
    url = ms.url
    assert cli.main(["--metastore", url, "compact", "db.c", "--type", "major"]) == 1
    assert "name the partition" in capsys.readouterr().err
    assert cli.main(["--metastore", url, "compact", "db.nosuch", "--type", "minor"]) == 1
    assert "db.nosuch" in capsys.readouterr().err
    assert cli.main(["--metastore", url, "compact", "db.c", "--partition", "bad", "--type", "minor"]) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["--metastore", url, "compact", "db.c", "--type", "medium"])
    capsys.readouterr()
    _commit(ms, "db.c", "ds=1", delta_files=1, delta_bytes=1)
    assert cli.main(["--metastore", url, "compact", "db.c", "--partition", "ds=1", "--type", "minor"]) == 0
    assert capsys.readouterr().out.startswith("Compaction enqueued with id ")
    assert cli.main(["--metastore", url, "compact", "db.c", "--partition", "ds=1", "--type", "major"]) == 0
    assert "already enqueued" in capsys.readouterr().out
    assert cli.main(["--metastore", url, "show", "compactions"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split("\t")
    assert header[:10] == ["CompactionId", "Database", "Table", "Partition", "Type", "State", "Worker",
                           "Enqueue Time", "Start Time", "Duration(ms)"] and "Error message" in header
    assert lines[1].split("\t")[3:6] == ["ds=1", "MINOR", "initiated"]
    assert cli.main(["--metastore", url, "--json", "initiator"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["action"] == "already queued"
