"""The ``hive-acid`` command line, run as a real process against both backends."""
import json
import os
import subprocess
import sys

import pendulum
import pytest


def run(url, *args, ok=True, env=None):
    proc = subprocess.run([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def jrun(url, *args):
    return json.loads(run(url, "--json", *args).stdout)


def test_walkthrough(metastore_url, tmp_path):
    url = metastore_url
    run(url, "init", "--warehouse", str(tmp_path / "wh"), "--set", "hive.txn.timeout=120")
    assert jrun(url, "config", "hive.txn.timeout") == {"hive.txn.timeout": "120.0"}
    t = jrun(url, "create-table", "sales.orders", "--columns", "id bigint, amount decimal(10,2)",
             "--partitioned-by", "ds string", "--bucketed-by", "id", "--buckets", "4",
             "--property", "NO_AUTO_COMPACTION=true")
    assert t["location"] == str(tmp_path / "wh" / "sales.db" / "orders") and t["num_buckets"] == 4
    assert jrun(url, "describe", "sales.orders")["properties"]["no_auto_compaction"] == "true"
    txn = jrun(url, "txn", "open")["txn_id"]
    assert jrun(url, "txn", "allocate", str(txn), "sales.orders") == {"write_id": 1}
    snap = jrun(url, "snapshot", "sales.orders")
    assert snap["valid_write_ids"] == "sales.orders:1:1:1:" and snap["open"] == [1]
    jrun(url, "txn", "heartbeat", str(txn))
    shown = jrun(url, "show", "transactions")
    assert [(r["txn_id"], r["state"]) for r in shown] == [(txn, "OPEN")]
    assert jrun(url, "txn", "commit", str(txn))["committed"]
    txn2 = jrun(url, "txn", "open")["txn_id"]
    jrun(url, "txn", "allocate", str(txn2), "sales.orders")
    jrun(url, "txn", "abort", str(txn2), "--reason", "bad input file")
    snap = jrun(url, "snapshot", "sales.orders")
    assert snap == {**snap, "valid_write_ids": "sales.orders:2:9223372036854775807::2", "aborted": [2], "open": []}
    shown = jrun(url, "show", "transactions")
    assert [(r["txn_id"], r["state"], r["reason"]) for r in shown] == [(txn2, "ABORTED", "bad input file")]
    human = run(url, "show", "transactions").stdout.splitlines()
    assert human[0].startswith("Transaction ID\tTransaction State") and "ABORTED" in human[1]
    t3, t4 = jrun(url, "txn", "open", "--count", "2")["txn_ids"]
    assert jrun(url, "abort-transactions", str(t3), str(t4))["aborted"] == [t3, t4]
    assert run(url, "show", "locks").stdout.startswith("Lock ID\tDatabase")
    assert run(url, "show", "compactions").stdout.startswith("CompactionId\tDatabase\tTable\tPartition\tType\tState")


@pytest.mark.parametrize("args, message", [
    (["describe", "sales.nope"], "unknown table sales.nope"),
    (["describe", "sales.bad-name"], "bad table name"),
    (["txn", "commit", "999"], "unknown transaction 999"),
    (["txn", "heartbeat", "999"], "unknown transaction 999"),
    (["parse-writeids", "db.t:5:x::"], "malformed min open write id"),
    (["parse-writeids", "db.t:5:1:7:"], "above high watermark"),
    (["create-table", "a.b", "--columns", "id bigint", "--property", "transactional=false"], "transactional"),
    (["show", "compactions", "--state", "sleeping"], "unknown compaction state"),
])
def test_errors_go_to_stderr_with_nonzero_exit(tmp_path, args, message):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    run(url, "init")
    run(url, "create-table", "sales.orders", "--columns", "id bigint")
    proc = run(url, *args, ok=False)
    assert proc.returncode == 1 and message in proc.stderr and proc.stdout == ""


def test_commit_of_aborted_and_timed_out_txn(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    run(url, "init", "--set", "hive.txn.timeout=1")
    run(url, "create-table", "db.t", "--columns", "id bigint")
    txn = jrun(url, "txn", "open")["txn_id"]
    run(url, "txn", "abort", str(txn))
    proc = run(url, "txn", "commit", str(txn), ok=False)
    assert proc.returncode == 1 and f"transaction {txn} was aborted: aborted by user" in proc.stderr
    txn = jrun(url, "txn", "open")["txn_id"]
    import time
    time.sleep(1.2)
    proc = run(url, "txn", "commit", str(txn), ok=False)
    assert proc.returncode == 1 and "timed out" in proc.stderr
    assert jrun(url, "txn", "show", str(txn))["reason"] == "timed out"


def test_show_tables_print_local_times_and_json_keeps_epoch_milliseconds(tmp_path):
    from airflow_hive_acid.metastore import LockComponent, LockType, Metastore
    url = f"sqlite:///{tmp_path / 'm.db'}"
    ms = Metastore.initialize(url)
    ms.catalog.create_table("db.t", "id bigint")
    txn = ms.txns.open_txn()
    ms.locks.lock([LockComponent("db", "t", type=LockType.SHARED_WRITE)], txn)
    ms.compactions.enqueue("db.t")
    records = {"transactions": ms.txns.show_transactions(), "locks": ms.locks.show_locks(),
               "compactions": ms.compactions.show()}
    times = {"transactions": {"Started Time": "started", "Last Heartbeat Time": "last_heartbeat"},
             "locks": {"Last Heartbeat": "last_heartbeat", "Acquired At": "acquired_at"},
             "compactions": {"Enqueue Time": "enqueue_time", "Start Time": "start", "Commit Time": "commit_time"}}
    for what, columns in times.items():
        [record] = [r.to_dict() for r in records[what]]
        header, row = (line.split("\t") for line in run(url, "show", what, env={"TZ": "Asia/Kolkata"}).stdout.splitlines())
        shown = dict(zip(header, row))
        for column, key in columns.items():
            if record[key] is None:                                  # not started, not committed
                assert shown[column] == "---", (what, column)
                continue
            assert shown[column] == pendulum.from_timestamp(record[key] // 1000, tz="Asia/Kolkata").isoformat()
            assert shown[column].endswith("+05:30"), "in the machine's local time zone"
        assert not any(cell.isdigit() and len(cell) >= 12 for cell in row), f"no epoch numbers: {row}"
    [queued] = jrun(url, "show", "compactions")
    assert queued["enqueue_time"] == records["compactions"][0].enqueue_time, "JSON keeps epoch milliseconds"


def test_uninitialized_metastore_is_a_clear_error(tmp_path):
    proc = run(f"sqlite:///{tmp_path / 'none.db'}", "show", "transactions", ok=False)
    assert proc.returncode == 1 and "hive-acid init" in proc.stderr
