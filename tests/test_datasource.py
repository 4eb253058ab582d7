"""The ``hive_acid`` PySpark data source against real Spark (local master): reads equal
``hive-acid read``, writes are transactions that commit or leave nothing visible."""
import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hive_acid.acid.bucket_codec import decode_bucket, decode_statement
from airflow_hive_acid.acid.bucketing import bucket_id
from airflow_hive_acid.jobs.spec import Insert, Read, Update
from airflow_hive_acid.metastore import TxnState

pytestmark = pytest.mark.spark


@pytest.fixture
def acid(spark, sqlite_ms):
    """``spark.read/write.format("hive_acid")`` bound to the test's metastore."""
    from airflow_hive_acid.datasource import register
    register(spark)

    class Acid:
        url = sqlite_ms.url

        def read(self, table, **options):
            r = spark.read.format("hive_acid").option("metastore", self.url)
            for k, v in options.items():
                r = r.option(k, v)
            return r.load(table)

        def write(self, df, table, mode="append", **options):
            w = df.write.format("hive_acid").option("metastore", self.url).mode(mode)
            for k, v in options.items():
                w = w.option(k, v)
            w.save(table)

    return Acid()


@pytest.fixture
def orders(runner, tmp_path):
    runner.ms.catalog.create_table("sales.orders", "id bigint, name string, amount double",
                                   partitioned_by="ds string", bucketed_by="id", buckets=4)
    path = tmp_path / "init.parquet"
    pq.write_table(pa.table({"id": list(range(1, 21)), "name": [f"n{i}" for i in range(1, 21)],
                             "amount": [float(i) for i in range(1, 21)],
                             "ds": ["2024-01-01"] * 10 + ["2024-01-02"] * 10}), path)
    runner.run(Insert.from_dict({"source": {"path": str(path)}}), "sales.orders")
    runner.run(Update.from_dict({"set": {"amount": "amount * 10"}, "where": "id % 5 = 0"}), "sales.orders")
    return "sales.orders"


def plain(rows):
    return sorted((r.asDict(recursive=True) if hasattr(r, "asDict") else r for r in rows),
                  key=lambda r: sorted((k, str(v)) for k, v in r.items()))


def test_read_equals_hive_acid_read(acid, runner, orders):
    df = acid.read(orders)
    assert df.columns == ["id", "name", "amount", "ds"]
    assert plain(df.collect()) == plain(runner.read_rows(orders, Read()))
    pruned = acid.read(orders, columns="amount,ds")
    assert pruned.columns == ["amount", "ds"]
    assert plain(pruned.collect()) == plain(runner.read_rows(orders, Read(columns=["amount", "ds"])))
    older = acid.read(orders, writeId=1)
    assert sorted(r.amount for r in older.collect()) == [float(i) for i in range(1, 21)], "before the UPDATE"
    with_ids = acid.read(orders, withRowId="true", columns="id")
    got = {r.id: r.ROW__ID.asDict() for r in with_ids.collect()}
    want = {r["id"]: r["ROW__ID"] for r in runner.read_rows(orders, Read(columns=["id"], with_row_id=True))}
    assert got == want
    assert got[5]["writeId"] == 2 and got[4]["writeId"] == 1
    assert decode_bucket(got[4]["bucketId"]) == bucket_id((4,), ["bigint"], 4)
    # filters on data columns go back to Spark
    assert sorted(r.id for r in df.filter("amount > 40").collect()) == [5, 10, 15, 20]


def test_partition_filters_prune_before_any_file_is_read(acid, spark, runner, orders, warehouse):
    bucket = next((warehouse / "sales.db/orders/ds=2024-01-01").glob("delta_0000001_*/bucket_*"))
    bucket.write_bytes(b"not an orc file")
    with pytest.raises(Exception, match="bucket_"):
        acid.read(orders).collect()
    kept = acid.read(orders).filter("ds = '2024-01-02' and amount > 0")
    assert sorted(r.id for r in kept.collect()) == list(range(11, 21))
    assert sorted(r.id for r in acid.read(orders).filter("ds in ('2024-01-02', 'x')").collect()) == list(
        range(11, 21))
    assert acid.read(orders).filter("ds is null").count() == 0
    assert sorted(r.id for r in acid.read(orders).filter("ds > '2024-01-01'").collect()) == list(range(11, 21))


def test_read_holds_a_read_transaction(acid, runner, orders):
    before = {t.txn_id for t in runner.ms.txns.show_transactions()}
    acid.read(orders).count()
    new = [t for t in runner.ms.txns.show_transactions() if t.txn_id not in before]
    assert new and all(t.state is TxnState.OPEN for t in new), "open until it ends or times out"
    snap = runner.ms.txns.snapshot(orders)
    assert set(t.txn_id for t in new) <= set(snap.valid_txns.open_ids)
    # in the caller's txn: no txn of its own
    txn = runner.ms.txns.open_txn()
    before = {t.txn_id for t in runner.ms.txns.show_transactions()}
    assert acid.read(orders, txnId=str(txn)).count() == 20
    assert {t.txn_id for t in runner.ms.txns.show_transactions()} == before


def test_append_is_one_committed_transaction(acid, spark, runner, orders, warehouse):
    df = spark.createDataFrame([(100 + i, f"x{i}", float(i), "2024-01-03") for i in range(30)],
                               "id bigint, name string, amount double, ds string").repartition(3)
    acid.write(df, orders)
    got = {r["id"]: r for r in runner.read_rows(orders, Read(with_row_id=True))}
    assert len(got) == 50
    for i in range(100, 130):
        rid = got[i]["ROW__ID"]
        assert rid["writeId"] == 3 and decode_bucket(rid["bucketId"]) == bucket_id((i,), ["bigint"], 4)
    assert len({decode_statement(got[i]["ROW__ID"]["bucketId"]) for i in range(100, 130)}) == 3, "one per task"
    last = runner.ms.txns.find_txns("hive_acid data source")[-1]
    assert last.state is TxnState.COMMITTED
    stats = runner.ms.txns.writes_of(last.txn_id)
    assert [(w.partition, w.rows_inserted) for w in stats] == [("ds=2024-01-03", 30)]
    assert runner.ms.catalog.list_partitions(orders)[-1] == "ds=2024-01-03"
    staging = warehouse / "sales.db/orders/_hive_acid_staging"
    assert not staging.exists() or not any(staging.iterdir())


def test_overwrite_of_an_unbucketed_table(acid, spark, runner):
    runner.ms.catalog.create_table("d.t", "k int, v string")
    acid.write(spark.createDataFrame([(1, "a"), (2, "b")], "k int, v string"), "d.t")
    acid.write(spark.createDataFrame([(3, "c")], "k int, v string"), "d.t", mode="overwrite")
    assert runner.read_rows("d.t", Read()) == [{"k": 3, "v": "c"}]
    acid.write(spark.createDataFrame([], "k int, v string"), "d.t", mode="overwrite")
    assert runner.read_rows("d.t", Read()) == []


def test_a_failed_task_leaves_nothing_and_aborts(acid, spark, runner, orders, warehouse):
    from pyspark.sql import functions as F
    boom = F.udf(lambda i: i if i != 105 else 1 // 0, "bigint")
    df = spark.range(100, 110).select(boom("id").alias("id"), F.lit("x").alias("name"),
                                      F.lit(1.0).alias("amount"), F.lit("2024-01-09").alias("ds"))
    with pytest.raises(Exception, match="ZeroDivisionError"):
        acid.write(df, orders)
    last = runner.ms.txns.find_txns("hive_acid data source")[-1]
    assert last.state is TxnState.ABORTED and "task failed" in last.reason
    assert len(runner.read_rows(orders, Read())) == 20
    assert not list(warehouse.glob("sales.db/orders/ds=2024-01-09/*"))
    # a task still running when Spark gave up may finish its files after abort() removed
    # staging: only the aborted txn's folder, which the cleaner removes (as after a killed job)
    staging = warehouse / "sales.db/orders/_hive_acid_staging"
    assert all(p.name.startswith(f"txn_{last.txn_id}_") for p in (staging.iterdir() if staging.exists() else []))


def test_write_joins_a_transaction_owned_elsewhere(acid, spark, runner, orders):
    txn = runner.ms.txns.open_txn()
    df = spark.createDataFrame([(200, "j", 2.0, "2024-01-01")], "id bigint, name string, amount double, ds string")
    acid.write(df, orders, txnId=str(txn))
    assert len(runner.read_rows(orders, Read())) == 20, "invisible until its owner commits"
    assert runner.ms.txns.get_txn(txn).state is TxnState.OPEN
    runner.ms.txns.commit_txn(txn)
    assert 200 in {r["id"] for r in runner.read_rows(orders, Read())}


def test_a_write_longer_than_the_txn_timeout_commits(acid, spark, runner):
    """Spark runs ``writer()`` and ``commit()`` in two Python workers and kills the first once
    idle, so the txn heartbeats from a process of its own while the tasks run; a housekeeper
    sweeping timed-out txns all along finds nothing to abort."""
    import threading

    from pyspark.sql import functions as F
    ms = runner.ms
    ms.catalog.create_table("d.slow", "k bigint")
    ms.set_setting("hive.txn.timeout", "3")
    swept: list[int] = []
    done = threading.Event()

    def housekeeper() -> None:
        while not done.wait(0.5):
            swept.extend(ms.txns.abort_timed_out())

    sweeper = threading.Thread(target=housekeeper)
    sweeper.start()
    try:
        slow = F.udf(lambda i: (time.sleep(8), i)[1], "bigint")     # well past the 3 s timeout
        acid.write(spark.range(2).repartition(1).select(slow("id").alias("k")), "d.slow")
    finally:
        done.set()
        sweeper.join()
    last = ms.txns.find_txns("hive_acid data source")[-1]
    assert last.state is TxnState.COMMITTED and last.txn_id not in swept
    assert sorted(r["k"] for r in runner.read_rows("d.slow", Read())) == [0, 1]


@pytest.mark.parametrize("how, message", [
    ("read:nosuch.table", "unknown table nosuch.table"),
    ("read:writeId=99", "write id 99 is outside 0..2"),
    ("read:writeId=x", "option writeId='x' is not an integer"),
    ("read:columns=nosuch", "nosuch"),
    ("read:bogus=1", "unknown option"),
    ("read:validWriteIds=other.t:1:9223372036854775807::", "validWriteIds is for other.t"),
    ("read:validWriteIds=garbage", "malformed"),
    ("write:extra", "not columns of sales.orders"),
    ("write:type", "column 'amount' is double but the value is string"),
    ("write:overwrite", "bucketed table sales.orders"),
])
def test_bad_input_is_named(acid, spark, runner, orders, warehouse, how, message):
    kind, what = how.split(":", 1)
    with pytest.raises(Exception, match=message):
        if kind == "read":
            if "=" in what:
                k, v = what.split("=", 1)
                acid.read(orders, **{k: v}).collect()
            else:
                acid.read(what).collect()
        else:
            cols = "id bigint, name string, amount double, ds string"
            row = (1, "a", 1.0, "2024-01-05")
            if what == "extra":
                cols, row = cols + ", oops int", row + (1,)
            if what == "type":
                cols, row = "id bigint, name string, amount string, ds string", (1, "a", "x", "2024-01-05")
            acid.write(spark.createDataFrame([row], cols), orders,
                       mode="overwrite" if what == "overwrite" else "append")
    assert len(runner.read_rows(orders, Read())) == 20
    assert not list(warehouse.glob("sales.db/orders/ds=2024-01-05"))
    assert not [t for t in runner.ms.txns.find_txns("hive_acid data source") if t.state is TxnState.OPEN
                and kind == "read" and "=" in what], "a refused read leaves no txn open"


def test_schema_given_reads_only_its_columns(acid, spark, runner, orders):
    df = (spark.read.format("hive_acid").option("metastore", acid.url).schema("name string, ds string")
          .load(orders))
    assert plain(df.collect()) == plain(runner.read_rows(orders, Read(columns=["name", "ds"])))
    with pytest.raises(Exception, match="column 'name' of sales.orders is string, not int"):
        spark.read.format("hive_acid").option("metastore", acid.url).schema("name int").load(orders).collect()


# -- streaming ---------------------------------------------------------------------------------------
def landing_file(landing, i, ids, ds="2024-02-01"):
    landing.mkdir(exist_ok=True)
    path = landing / f"f{i:03d}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"s{i}"] * len(ids),
                             "amount": [float(x) for x in ids], "ds": [ds] * len(ids)}), path)
    arrived_in_order(path, i)


def arrived_in_order(path, i):
    """Spark's file source takes files oldest first; files written in the same millisecond would
    come in listing order, so give file ``i`` its own modification time."""
    mtime = time.time() - 3600 + i
    os.utime(path, (mtime, mtime))


def ingest(spark, acid, landing, checkpoint, table="sales.orders"):
    """Everything in ``landing`` into ``table``, one file per micro-batch, then stop."""
    src = (spark.readStream.format("parquet").schema("id bigint, name string, amount double, ds string")
           .option("maxFilesPerTrigger", 1).load(str(landing)))
    q = (src.writeStream.format("hive_acid").option("metastore", acid.url)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(table))
    q.awaitTermination(300)
    assert q.exception() is None
    return q


def test_each_micro_batch_is_one_transaction(acid, spark, runner, orders, tmp_path, warehouse):
    landing = tmp_path / "landing"
    for i in range(3):
        landing_file(landing, i, list(range(1000 + 10 * i, 1005 + 10 * i)), ds=f"2024-02-0{i + 1}")
    q = ingest(spark, acid, landing, tmp_path / "cp")
    batches = runner.ms.txns.stream_batches(orders, str(q.id))
    assert [(b.batch_id, b.rows) for b in batches] == [(0, 5), (1, 5), (2, 5)]
    assert len({b.write_id for b in batches}) == 3 and min(b.write_id for b in batches) > 2
    got = {r["id"]: r for r in runner.read_rows(orders, Read())}
    assert len(got) == 35 and got[1024]["ds"] == "2024-02-03" and got[1024]["name"] == "s2"
    for b in batches:
        assert runner.ms.txns.get_txn(b.txn_id).state is TxnState.COMMITTED
    assert set(runner.ms.catalog.list_partitions(orders)) >= {"ds=2024-02-01", "ds=2024-02-02", "ds=2024-02-03"}
    staging = warehouse / "sales.db/orders/_hive_acid_staging"
    assert not staging.exists() or not any(p for p in staging.rglob("*") if p.is_file()), "spool removed"


def test_a_replayed_batch_is_not_applied_twice(acid, spark, runner, orders, tmp_path):
    landing, cp = tmp_path / "landing", tmp_path / "cp"
    for i in range(2):
        landing_file(landing, i, [2000 + i, 2100 + i])
    q = ingest(spark, acid, landing, cp)
    # the driver died after the batch's txn committed and before Spark logged the batch as done
    for f in (cp / "commits").glob("*1*"):
        f.unlink()
    landing_file(landing, 2, [2002, 2102])
    q2 = ingest(spark, acid, landing, cp)
    assert q2.id == q.id and (cp / "commits" / "1").exists(), "Spark ran batch 1 again"
    assert [b.batch_id for b in runner.ms.txns.stream_batches(orders, str(q.id))] == [0, 1, 2]
    ids = sorted(r["id"] for r in runner.read_rows(orders, Read()) if r["id"] >= 2000)
    assert ids == [2000, 2001, 2002, 2100, 2101, 2102], "batch 1 replayed by Spark, applied once"


def test_a_failed_micro_batch_leaves_nothing(acid, spark, runner, orders, tmp_path):
    landing, cp = tmp_path / "landing", tmp_path / "cp"
    landing_file(landing, 0, [3000])
    pq.write_table(pa.table({"id": [3001], "name": ["bad"], "amount": [1.0], "ds": ["a/b"]}), landing / "f001.parquet")
    arrived_in_order(landing / "f001.parquet", 1)
    src = (spark.readStream.format("parquet").schema("id bigint, name string, amount double, ds string")
           .option("maxFilesPerTrigger", 1).load(str(landing)))
    q = (src.writeStream.format("hive_acid").option("metastore", acid.url)
         .option("checkpointLocation", str(cp)).trigger(availableNow=True).start(orders))
    with pytest.raises(Exception, match="a/b"):
        q.awaitTermination(300)
    assert [b.batch_id for b in runner.ms.txns.stream_batches(orders, str(q.id))] == [0]
    assert 3001 not in {r["id"] for r in runner.read_rows(orders, Read())}
    assert all(t.state is not TxnState.OPEN for t in runner.ms.txns.find_txns(f"hive_acid stream {q.id}"))


def test_200_micro_batches_compact_to_a_base_and_read_the_same(acid, spark, runner, in_process, tmp_path,
                                                              warehouse):
    """The small files streaming leaves: 200 micro-batches committed through the stream writer's
    driver path (spool files as its tasks write them), then initiator, worker and cleaner."""
    from airflow_hive_acid.compactor import Compactor
    from airflow_hive_acid.datasource.source import _Options
    from airflow_hive_acid.datasource.stream import HiveAcidStreamWriter, _Spooled
    ms = runner.ms
    ms.catalog.create_table("s.clicks", "id bigint, url string", partitioned_by="ds string", bucketed_by="id",
                            buckets=2)
    schema = spark.createDataFrame([], "id bigint, url string, ds string").schema
    writer = HiveAcidStreamWriter(_Options.parse({"path": "s.clicks", "metastore": acid.url}), schema, False)
    spool = tmp_path / "spool"
    spool.mkdir()
    query = "00000000-0000-4000-8000-00000000c11c"
    for batch in range(200):
        ids = list(range(batch * 5, batch * 5 + 5))
        rows = pa.record_batch({"id": pa.array(ids, pa.int64()), "url": [f"/p{batch}"] * 5,
                                "ds": [f"d{batch % 2}"] * 5})
        path = spool / f"b{batch}" / "part-00000.arrow"
        path.parent.mkdir()
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, rows.schema) as w:
            w.write_batch(rows)
        writer.commit([_Spooled(query, str(path), 5)], batch)
        assert not path.exists(), "spool removed after the commit"
    batches = ms.txns.stream_batches("s.clicks", query)
    assert len(batches) == 200 and [b.batch_id for b in batches] == list(range(200))
    before = sorted((r["id"], r["url"], r["ds"]) for r in runner.read_rows("s.clicks", Read()))
    assert len(before) == 1000
    part = Path(ms.catalog.get_table("s.clicks").location)
    assert len(list((part / "ds=d0").glob("delta_*"))) == 100

    c = Compactor(ms, in_process)
    decisions = c.initiate(table="s.clicks")
    assert [d.action for d in decisions] == ["initiated", "initiated"], [d.to_dict() for d in decisions]
    while c.run_worker(table="s.clicks") is not None:
        pass
    c.clean(table="s.clicks")
    for p in ("ds=d0", "ds=d1"):
        left = sorted(x.name for x in (part / p).iterdir())
        assert len(left) <= 3 and any(n.startswith(("base_", "delta_")) for n in left), left
    assert sorted((r["id"], r["url"], r["ds"]) for r in runner.read_rows("s.clicks", Read())) == before


def test_a_change_stream_applied_equals_a_merge_oracle(acid, spark, runner, orders, tmp_path):
    import random
    rng = random.Random(11)
    state = {(r["id"], r["ds"]): (r["name"], r["amount"]) for r in runner.read_rows(orders, Read())}
    landing, seq = tmp_path / "changes", 0
    landing.mkdir()
    for f in range(4):
        rows = []
        for _ in range(40):
            key = (rng.randint(1, 40), rng.choice(["2024-01-01", "2024-01-02"]))
            op = rng.choice(["I", "U", "D", "update", "insert", "delete"])
            seq += 1
            rows.append({"id": key[0], "ds": key[1], "op": op, "seq": seq,
                         "name": None if op[0] in "dD" else f"v{seq}", "amount": None if op[0] in "dD" else seq * 1.5})
        rng.shuffle(rows)                   # arrival order differs; the sequence column decides
        for r in sorted(rows, key=lambda r: r["seq"]):
            if r["op"][0].lower() == "d":
                state.pop((r["id"], r["ds"]), None)
            else:
                state[(r["id"], r["ds"])] = (r["name"], r["amount"])
        pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([
            ("id", pa.int64()), ("ds", pa.string()), ("op", pa.string()), ("seq", pa.int64()), ("name", pa.string()),
            ("amount", pa.float64())])), landing / f"c{f}.parquet")
        arrived_in_order(landing / f"c{f}.parquet", f)
    src = (spark.readStream.format("parquet")
           .schema("id bigint, ds string, op string, seq bigint, name string, amount double")
           .option("maxFilesPerTrigger", 1).load(str(landing)))
    q = (src.writeStream.format("hive_acid").option("metastore", acid.url).option("mergeOn", "id, ds")
         .option("opColumn", "op").option("sequenceColumn", "seq")
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start(orders))
    q.awaitTermination(300)
    assert q.exception() is None
    got = {(r["id"], r["ds"]): (r["name"], r["amount"]) for r in runner.read_rows(orders, Read())}
    assert got == state
    batches = runner.ms.txns.stream_batches(orders, str(q.id))
    assert len(batches) == 4
    stats = [w for b in batches for w in runner.ms.txns.writes_of(b.txn_id)]
    assert sum(w.rows_deleted for w in stats) > 0 and sum(w.rows_updated for w in stats) > 0


def test_a_change_stream_needs_its_keys_and_known_operations(acid, spark, runner, orders, tmp_path):
    landing = tmp_path / "bad"
    landing.mkdir()
    pq.write_table(pa.table({"id": [1], "ds": ["2024-01-01"], "op": ["upsert"], "name": ["x"], "amount": [1.0]}),
                   landing / "c.parquet")
    src = spark.readStream.format("parquet").schema("id bigint, ds string, op string, name string, amount double")

    def run(**options):
        w = src.load(str(landing)).writeStream.format("hive_acid").option("metastore", acid.url)
        for k, v in options.items():
            w = w.option(k, v)
        q = w.option("checkpointLocation", str(tmp_path / f"cp{len(options)}{sorted(options)}")).trigger(
            availableNow=True).start(orders)
        q.awaitTermination(300)
        if q.exception() is not None:
            raise q.exception()

    with pytest.raises(Exception, match="op value 'upsert' is not insert, update or delete"):
        run(mergeOn="id,ds")
    with pytest.raises(Exception, match=r"must include its bucket and partition columns \['ds', 'id'\]"):
        run(mergeOn="id")
    with pytest.raises(Exception, match="has no column 'kind'"):
        run(mergeOn="id,ds", opColumn="kind")
    assert len(runner.read_rows(orders, Read())) == 20


def test_a_batch_write_and_a_streaming_ingest_into_one_table_at_once(acid, spark, runner, orders, tmp_path):
    import time
    landing = tmp_path / "landing"
    for i in range(3):
        landing_file(landing, i, list(range(5000 + 10 * i, 5005 + 10 * i)))
    src = (spark.readStream.format("parquet").schema("id bigint, name string, amount double, ds string")
           .option("maxFilesPerTrigger", 1).load(str(landing)))
    q = (src.writeStream.format("hive_acid").option("metastore", acid.url)
         .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="0.5 seconds").start(orders))
    try:
        for i in range(3):
            df = spark.createDataFrame([(6000 + 10 * i + k, "batch", 1.0, "2024-03-01") for k in range(5)],
                                       "id bigint, name string, amount double, ds string")
            acid.write(df, orders)
            landing_file(landing, 3 + i, list(range(5000 + 10 * (3 + i), 5005 + 10 * (3 + i))))
        deadline = time.time() + 120
        while sum(b.rows for b in runner.ms.txns.stream_batches(orders, str(q.id))) < 30 and time.time() < deadline:
            time.sleep(0.2)
    finally:
        q.stop()
    ids = [r["id"] for r in runner.read_rows(orders, Read())]
    assert len(ids) == len(set(ids)) == 20 + 30 + 15
    assert {i for i in ids if i >= 5000} == {5000 + 10 * f + k for f in range(6) for k in range(5)} | {
        6000 + 10 * i + k for i in range(3) for k in range(5)}


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_ingest_job_takes_json_and_csv_landings(acid, spark, runner, orders, tmp_path, fmt):
    from airflow_hive_acid.datasource.ingest import run_ingest
    from airflow_hive_acid.jobs import Ingest, JobSpec, SnapshotSpec
    landing = tmp_path / "landing"
    landing.mkdir()
    rows = [{"id": 7000 + i, "name": f"j{i}", "amount": i / 2, "ds": "2024-04-01"} for i in range(6)]
    for f in range(2):
        part = rows[f * 3:(f + 1) * 3]
        if fmt == "json":
            text = "\n".join(json.dumps(r) for r in part)
        else:
            text = "id,name,amount,ds\n" + "\n".join(f"{r['id']},{r['name']},{r['amount']},{r['ds']}" for r in part)
        (landing / f"f{f}.{fmt}").write_text(text + "\n")
    req = Ingest(landing=str(landing), checkpoint=str(tmp_path / "cp"), metastore=acid.url, format=fmt,
                 max_files_per_trigger=1, options={"header": "true"} if fmt == "csv" else {})
    m = run_ingest(spark, JobSpec(table=runner.ms.catalog.get_table(orders).to_spec(),
                                  snapshot=SnapshotSpec("", ""), request=req))
    assert m.ok, m.error
    assert [b["rows"] for b in m.output.batches] == [3, 3]
    got = {r["id"]: r for r in runner.read_rows(orders, Read()) if r["id"] >= 7000}
    assert got == {r["id"]: r for r in rows}
