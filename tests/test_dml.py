"""INSERT / INSERT OVERWRITE / DELETE / UPDATE / MERGE through the statement runner, with the
Spark jobs run in a shared local SparkSession (the end-to-end tests use spark-submit)."""
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hive_acid.acid.bucket_codec import decode_bucket, decode_statement
from airflow_hive_acid.acid.bucketing import bucket_id
from airflow_hive_acid.errors import JobFailed
from airflow_hive_acid.jobs.spec import Delete, Insert, Merge, Read, SnapshotSpec, Update, request
from airflow_hive_acid.metastore import TxnState

pytestmark = pytest.mark.spark


def source(tmp_path: Path, file_name: str, **cols) -> dict:
    path = tmp_path / f"{file_name}.parquet"
    pq.write_table(pa.table(cols), path)
    return {"path": str(path)}


def rows(runner, table, tmp_path, at=None, **args):
    return runner.read_rows(table, Read(**args), at_write_id=at)


def by_id(rs):
    return {r["id"]: r for r in rs}


@pytest.fixture
def orders(runner, tmp_path):
    ms = runner.ms
    ms.catalog.create_table("sales.orders", "id bigint, name string, amount double",
                            partitioned_by="ds string", bucketed_by="id", buckets=4)
    runner.run(Insert.from_dict({"source": source(
        tmp_path, "init", id=list(range(1, 21)), name=[f"n{i}" for i in range(1, 21)],
        amount=[float(i) for i in range(1, 21)], ds=["2024-01-01"] * 10 + ["2024-01-02"] * 10)}), "sales.orders")
    return "sales.orders"


def test_insert_layout_bucketing_and_read(runner, orders, tmp_path, warehouse):
    part = warehouse / "sales.db" / "orders" / "ds=2024-01-01" / "delta_0000001_0000001_0000"
    assert (part / "_orc_acid_version").read_bytes() == b"2"
    files = sorted(p.name for p in part.iterdir() if p.name.startswith("bucket_"))
    assert files and set(files) <= {f"bucket_{b:05d}" for b in range(4)}
    got = rows(runner, orders, tmp_path, with_row_id=True)
    assert sorted(r["id"] for r in got) == list(range(1, 21))
    for r in got:
        rid = r["ROW__ID"]
        assert rid["writeId"] == 1 and decode_statement(rid["bucketId"]) == 0
        assert decode_bucket(rid["bucketId"]) == bucket_id((r["id"],), ["bigint"], 4), "Hive's bucket for the key"
    assert not (warehouse / "sales.db" / "orders" / "_hive_acid_staging").exists() or not any(
        (warehouse / "sales.db" / "orders" / "_hive_acid_staging").iterdir())
    stats = runner.ms.catalog.list_partitions(orders)
    assert stats == ["ds=2024-01-01", "ds=2024-01-02"]


def test_update_delete_and_older_snapshots(runner, orders, tmp_path):
    r1 = runner.run(Update.from_dict({"set": {"amount": "amount * 10", "name": "upper(name)"}, "where": "id % 5 = 0"}), orders)
    assert (r1.manifest.rows_updated, r1.manifest.rows_inserted, r1.manifest.rows_deleted) == (4, 0, 0)
    r2 = runner.run(Delete.from_dict({"where": "ds = '2024-01-02' and amount < 15"}), orders)
    assert r2.manifest.rows_deleted == 4
    now = by_id(rows(runner, orders, tmp_path))
    assert sorted(now) == list(range(1, 11)) + [15, 16, 17, 18, 19, 20]
    assert now[5]["amount"] == 50.0 and now[5]["name"] == "N5" and now[4]["amount"] == 4.0
    v1 = by_id(rows(runner, orders, tmp_path, at=1))
    assert len(v1) == 20 and v1[5]["amount"] == 5.0
    v2 = by_id(rows(runner, orders, tmp_path, at=2))
    assert len(v2) == 20 and v2[15]["amount"] == 150.0
    snap = runner.ms.txns.snapshot(orders).valid_write_ids
    assert snap.high_watermark == 3 and not snap.exceptions


def test_merge_clauses_in_sql_order(runner, orders, tmp_path):
    src = source(tmp_path, "chg", id=[1, 2, 3, 21, 22], name=["one", "two", "three", "x21", "x22"],
                 amount=[100.0, 200.0, 300.0, 21.0, 22.0], ds=["2024-01-01"] * 3 + ["2024-01-02"] * 2,
                 op=["U", "D", "U", "I", "SKIP"])
    res = runner.run(Merge.from_dict({"source": src, "on": ["id"], "clauses": [
        "WHEN MATCHED AND s.op = 'D' THEN DELETE",
        "WHEN MATCHED AND s.amount > 250 THEN UPDATE SET name = s.name",
        "WHEN MATCHED THEN UPDATE SET amount = s.amount, name = s.name",
        "WHEN NOT MATCHED AND s.op = 'I' THEN INSERT *",
    ]}), orders)
    m = res.manifest
    assert (m.rows_updated, m.rows_deleted, m.rows_inserted) == (2, 1, 1)
    got = by_id(rows(runner, orders, tmp_path))
    assert 2 not in got and 22 not in got and got[21]["name"] == "x21"
    assert (got[1]["name"], got[1]["amount"]) == ("one", 100.0)
    assert (got[3]["name"], got[3]["amount"]) == ("three", 3.0), "first matching clause wins"
    # only the changed rows were written: one insert event per update/insert, one delete per update/delete
    assert sum(p.delta_files for p in m.partitions) >= 1 and m.rows_inserted + m.rows_updated == 3


def test_merge_not_matched_by_source_and_source_table(runner, orders, tmp_path):
    runner.ms.catalog.create_table("sales.keep", "id bigint, name string, amount double, ds string")
    runner.run(Insert.from_dict({"source": source(
        tmp_path, "k", id=[1, 2, 3], name=["a", "b", "c"], amount=[1.0, 2.0, 3.0], ds=["2024-01-01"] * 3)}), "sales.keep")
    info = runner.ms.catalog.get_table("sales.keep")
    snap = runner.ms.txns.snapshot("sales.keep")
    src = {"table": asdict(info.to_spec()), "snapshot": asdict(SnapshotSpec.of(snap))}   # as a JSON spec carries it
    runner.run(Merge.from_dict({"source": src, "on": ["id"], "clauses": [
        "WHEN MATCHED THEN UPDATE SET name = s.name",
        "WHEN NOT MATCHED BY SOURCE AND t.ds = '2024-01-02' THEN DELETE",
        "WHEN NOT MATCHED BY SOURCE THEN UPDATE SET amount = -1"]}), orders)
    got = by_id(rows(runner, orders, tmp_path))
    assert sorted(got) == list(range(1, 11))
    assert [got[i]["name"] for i in (1, 2, 3)] == ["a", "b", "c"]
    assert all(got[i]["amount"] == -1 for i in range(4, 11))


def test_merge_cardinality_violation_writes_nothing(runner, orders, tmp_path, warehouse):
    src = source(tmp_path, "dup", id=[1, 1], name=["a", "b"], amount=[1.0, 2.0], ds=["2024-01-01"] * 2)
    with pytest.raises(JobFailed, match="cardinality violation.*matched by more than one source row"):
        runner.run(Merge.from_dict({"source": src, "on": ["id"],
                                     "clauses": ["WHEN MATCHED THEN UPDATE SET name = s.name"]}), orders)
    assert not list((warehouse / "sales.db/orders").glob("*/delta_0000002*"))
    last = runner.ms.txns.show_transactions()[-1]
    assert last.state is TxnState.ABORTED and "cardinality" in last.reason
    assert runner.ms.txns.snapshot(orders).valid_write_ids.aborted_ids == (2,)


@pytest.mark.parametrize("job, args, message", [
    ("update", {"set": {"ds": "'x'"}}, "cannot update partition column 'ds'"),
    ("update", {"set": {"id": "id + 1"}}, "cannot update bucket column 'id'"),
    ("update", {"set": {"amount": "nosuch + 1"}}, "nosuch"),
    ("update", {"set": {"amount": "'text'"}}, "column 'amount' is double but the value is string"),
    ("delete", {"where": "amount >"}, "Syntax error"),
    ("delete", {"where": "nosuch = 1"}, "nosuch"),
    ("merge", {"on": ["id"], "clauses": ["WHEN MATCHED THEN UPDATE SET amount = s.name"]},
     "column 'amount' is double but the value is string"),
    ("merge", {"on": ["nokey"], "clauses": ["WHEN MATCHED THEN DELETE"]}, "ON keys"),
    ("merge", {"on": ["id"], "clauses": ["WHEN NOT MATCHED THEN INSERT *"]}, "INSERT \\* needs source column 'amount'"),
])
def test_bad_statements_fail_cleanly(runner, orders, tmp_path, warehouse, job, args, message):
    if job == "merge":
        args = {**args, "source": source(tmp_path, "s", id=[1], name=["x"], ds=["2024-01-01"])}
    before = sorted(p.name for p in (warehouse / "sales.db/orders/ds=2024-01-01").iterdir())
    with pytest.raises((JobFailed, ValueError), match=message):
        runner.run(request(job, args), orders)
    assert sorted(p.name for p in (warehouse / "sales.db/orders/ds=2024-01-01").iterdir()) == before
    assert runner.ms.txns.snapshot(orders).valid_write_ids.high_watermark in (1, 2)


def test_insert_type_mismatch_and_unknown_columns(runner, orders, tmp_path):
    with pytest.raises(JobFailed, match="column 'id' is bigint but the value is string"):
        runner.run(Insert.from_dict({"source": source(tmp_path, "a", id=["x"], name=["n"], amount=[1.0],
                                                        ds=["2024-01-01"])}), orders)
    with pytest.raises(JobFailed, match=r"source columns \['extra'\] are not columns"):
        runner.run(Insert.from_dict({"source": source(tmp_path, "b", id=[1], name=["n"], amount=[1.0],
                                                        ds=["2024-01-01"], extra=[1])}), orders)


def test_bad_partition_value_fails_the_job_and_publishes_nothing(runner, orders, tmp_path, warehouse):
    with pytest.raises(JobFailed, match="contains a path separator"):
        runner.run(Insert.from_dict({"source": source(tmp_path, "p", id=[99], name=["n"], amount=[1.0],
                                                        ds=["../../etc"])}), orders)
    table_dir = warehouse / "sales.db/orders"
    assert sorted(p.name for p in table_dir.iterdir() if not p.name.startswith("_")) == [
        "ds=2024-01-01", "ds=2024-01-02"]
    staging = table_dir / "_hive_acid_staging"
    assert not staging.exists() or not any(staging.iterdir())
    assert runner.ms.txns.show_transactions()[-1].state is TxnState.ABORTED


def test_insert_overwrite_partition_and_table(runner, orders, tmp_path):
    runner.run(Insert.from_dict({"overwrite": True, "partition": {"ds": "2024-01-02"},
                                  "source": source(tmp_path, "o", id=[100, 101], name=["a", "b"], amount=[1.0, 2.0])}), orders)
    got = by_id(rows(runner, orders, tmp_path))
    assert sorted(i for i, r in got.items() if r["ds"] == "2024-01-02") == [100, 101]
    assert len([r for r in got.values() if r["ds"] == "2024-01-01"]) == 10
    runner.ms.catalog.create_table("sales.flat", "id bigint, v string")
    runner.run(Insert.from_dict({"source": source(tmp_path, "f1", id=[1, 2], v=["a", "b"])}), "sales.flat")
    runner.run(Insert.from_dict({"overwrite": True, "source": source(tmp_path, "f2", id=pa.array([], pa.int64()),
                                                                             v=pa.array([], pa.string()))}), "sales.flat")
    assert rows(runner, "sales.flat", tmp_path) == []
    assert len(rows(runner, "sales.flat", tmp_path, at=1)) == 2


def test_insert_only_table(runner, tmp_path, warehouse):
    runner.ms.catalog.create_table("logs.events", "id bigint, msg string", partitioned_by="ds string",
                                   properties={"transactional_properties": "insert_only"})
    runner.run(Insert.from_dict({"source": source(tmp_path, "e", id=[1, 2], msg=["a", "b"], ds=["d1", "d2"])}), "logs.events")
    runner.run(Insert.from_dict({"source": source(tmp_path, "e2", id=[3], msg=["c"], ds=["d1"])}), "logs.events")
    assert sorted(r["id"] for r in rows(runner, "logs.events", tmp_path)) == [1, 2, 3]
    d = warehouse / "logs.db/events/ds=d1/delta_0000001_0000001_0000"
    assert [p.name for p in d.iterdir()] == ["000000_0"] or all(
        p.name.endswith("_0") for p in d.iterdir()), "plain MM files, no ACID marker"
    with pytest.raises(ValueError, match="insert-only"):
        runner.run(Delete.from_dict({"where": "id = 1"}), "logs.events")


def test_two_statements_one_transaction(runner, orders, tmp_path):
    ms = runner.ms
    txn = ms.txns.open_txn()
    runner.run(Insert.from_dict({"source": source(tmp_path, "x", id=[50], name=["fifty"], amount=[5.0],
                                                    ds=["2024-01-01"])}), orders, txn_id=txn, statement_key="task_a")
    r = runner.run(Update.from_dict({"set": {"amount": "amount + 1"}, "where": "id = 50"}), orders, txn_id=txn,
                   statement_key="task_b")
    assert (r.statement_id, r.manifest.rows_updated) == (1, 1), "the 2nd statement sees the 1st"
    assert 50 not in by_id(rows(runner, orders, tmp_path)), "nothing visible before commit"
    ms.txns.commit_txn(txn)
    assert by_id(rows(runner, orders, tmp_path))[50]["amount"] == 6.0


def test_retried_statement_replaces_its_own_leftovers(runner, orders, tmp_path):
    ms = runner.ms
    txn = ms.txns.open_txn()
    args = {"set": {"amount": "amount + 1"}, "where": "id = 7"}
    runner.run(Update.from_dict(args), orders, txn_id=txn, statement_key="t")
    runner.run(Update.from_dict(args), orders, txn_id=txn, statement_key="t")   # a task retry: same statement id
    ms.txns.commit_txn(txn)
    got = [r for r in rows(runner, orders, tmp_path) if r["id"] == 7]
    assert len(got) == 1 and got[0]["amount"] == 8.0
