"""Hive's ACID metrics from the metastore's records (SQLite and PostgreSQL), the ``hive-acid
metrics`` command, and the gauges the housekeeper and initiator operators send through Airflow's
``Stats`` to a real StatsD socket."""
import json
import socket

import pytest

from airflow_hive_acid.acid.stats import WriteCounts
from airflow_hive_acid.cli import main
from airflow_hive_acid.metastore import CompactionType, Metastore, Operation, TxnType, WriteStat

DAY_MS = 86_400_000


@pytest.fixture
def clock():
    now = [1_700_000_000_000]
    return now


@pytest.fixture
def history(metastore_url, warehouse, clock):
    """db.t: three inserts and a delete, majorly compacted (ready for cleaning), then one small
    insert; db.p: an aborted write and an initiated compaction; one txn left open."""
    ms = Metastore.initialize(metastore_url, warehouse=str(warehouse), clock=lambda: clock[0])
    ms.catalog.create_table("db.t", "id int, v string")
    ms.catalog.create_table("db.p", "id int", partitioned_by="ds string")

    def write(op: Operation, **counts: int) -> int:
        txn, wids = ms.txns.begin_write(["db.t"])
        ms.txns.commit_txn(txn, [WriteStat(db="db", table="t", write_id=wids["db.t"], operation=op, **counts)])
        return wids["db.t"]

    for _ in range(3):
        write(Operation.INSERT, rows_inserted=100, delta_files=1, delta_bytes=1000)
    hwid = write(Operation.DELETE, rows_deleted=10, delete_delta_files=1, delete_delta_bytes=50)
    r = ms.compactions.enqueue("db.t", type=CompactionType.MAJOR)
    ms.compactions.claim("w")
    ctxn = ms.txns.open_txn(txn_type=TxnType.COMPACTION)
    ms.compactions.set_compactor_txn(r.id, ctxn, highest_write_id=hwid)
    ms.compactions.mark_compacted(r.id, WriteCounts(rows_inserted=290, base_files=1, base_bytes=2900))
    ms.txns.commit_txn(ctxn)
    write(Operation.INSERT, rows_inserted=29, delta_files=1, delta_bytes=20)

    clock[0] += 1000
    aborted, _ = ms.txns.begin_write(["db.p"])
    ms.txns.add_write_components(aborted, "db.p", ["ds=1"], Operation.INSERT)
    ms.txns.abort_txn(aborted, "test")
    open_txn = ms.txns.open_txn()
    ms.compactions.enqueue("db.p", "ds=1", CompactionType.MINOR)
    clock[0] += 2 * DAY_MS
    try:
        yield ms, open_txn, aborted
    finally:
        ms.close()


def test_metrics_come_from_the_records(history):
    ms, open_txn, aborted = history
    m = ms.metrics()
    assert (m.open_txns, m.oldest_open_txn_id) == (1, open_txn)
    assert m.oldest_open_txn_age_s == pytest.approx(2 * 86400)
    assert (m.aborted_txns, m.oldest_aborted_txn_id) == (1, aborted)
    assert m.compactions == {"initiated": 1, "ready for cleaning": 1}
    assert m.oldest_initiated_age_s == pytest.approx(2 * 86400)
    t = {x.table: x for x in m.tables}
    assert (t["db.t"].active_deltas, t["db.t"].active_delete_deltas, t["db.t"].small_deltas) == (1, 0, 1)
    assert t["db.t"].obsolete_deltas == 4, "three deltas and a delete delta wait for the cleaner"
    assert (t["db.t"].base_rows, t["db.t"].delta_rows, t["db.t"].delta_pct) == (290, 29, 10.0)
    assert (t["db.p"].active_deltas, t["db.p"].obsolete_deltas, t["db.p"].delta_pct) == (0, 0, None)
    g = m.gauges()
    assert g["num_open_transactions"] == 1 and g["num_aborted_transactions"] == 1
    assert g["compaction_num_initiated"] == 1 and g["compaction_num_ready_for_cleaning"] == 1
    assert g["compaction_num_succeeded"] == 0 and g["compaction_num_obsolete_deltas"] == 4
    assert g["table.db.t.delta_pct"] == 10.0
    # Hive's thresholds: an initiated compaction waiting over an hour, an aborted txn not cleaned for a day
    assert any("oldest initiated compaction" in w for w in m.warnings)
    assert any(f"aborted transaction {aborted}" in w for w in m.warnings)
    assert not any("obsolete" in w for w in m.warnings)
    ms.set_setting("metastore.deltametrics.obsolete.delta.num.threshold", "3")
    assert any("db.t has 4 obsolete directories" in w for w in ms.metrics().warnings)


def test_cleaning_and_a_new_base_clear_the_counts(history):
    ms, open_txn, _ = history
    [ready] = [c for c in ms.compactions.show() if c.state.label == "ready for cleaning"]
    ms.compactions.mark_cleaned(ready.id)
    ms.txns.abort_txn(open_txn)
    m = ms.metrics()
    t = {x.table: x for x in m.tables}
    assert t["db.t"].obsolete_deltas == 0 and m.open_txns == 0
    assert m.compactions["succeeded"] == 1


def test_metrics_command_json_and_prometheus(history, capsys):
    ms, _, _ = history
    assert main(["--metastore", ms.url, "--json", "metrics"]) == 0
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert d["open_txns"] == 1 and {t["table"]: t["obsolete_deltas"] for t in d["tables"]}["db.t"] == 4
    assert "hive-acid: warning: the oldest initiated compaction" in err
    assert main(["--metastore", ms.url, "metrics", "--prometheus"]) == 0
    prom = capsys.readouterr().out
    assert "# TYPE hive_acid_num_open_transactions gauge\nhive_acid_num_open_transactions 1\n" in prom
    assert 'hive_acid_table_obsolete_deltas{table="db.t"} 4' in prom
    assert 'hive_acid_table_delta_pct{table="db.t"} 10' in prom


@pytest.fixture
def statsd(monkeypatch):
    """A StatsD server (a UDP socket) that Airflow's Stats is configured to send to."""
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(2.0)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(sock.getsockname()[1]))
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PREFIX", "airflow")
    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=False)

    def received() -> dict[str, str]:
        out = {}
        try:
            while True:
                for line in sock.recv(65536).decode().splitlines():
                    name, _, value = line.partition(":")
                    out[name] = value
        except TimeoutError:
            return out

    try:
        yield received
    finally:
        from airflow.sdk._shared.observability.metrics.base_stats_logger import NoStatsLogger
        stats.initialize(factory=NoStatsLogger, export_legacy_names=False)
        sock.close()


def test_housekeeper_and_initiator_send_the_gauges_to_statsd(history, statsd, monkeypatch, tmp_path):
    from airflow_hive_acid.operators import AcidHousekeeperOperator, AcidInitiatorOperator
    ms, open_txn, _ = history
    monkeypatch.setenv("HIVE_ACID_METASTORE", ms.url)
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    out = AcidHousekeeperOperator(task_id="housekeeper").execute({})
    assert out["timed_out"] == [open_txn], "the housekeeper ran first (its clock is the real one)"
    got = statsd()
    assert got["airflow.hive_acid.num_open_transactions"] == "0|g", got
    assert got["airflow.hive_acid.compaction_num_ready_for_cleaning"] == "1|g"
    assert got["airflow.hive_acid.table.db.t.obsolete_deltas"] == "4|g"
    assert out["metrics"]["compaction_num_initiated"] == 1
    AcidInitiatorOperator(task_id="initiator").execute({})
    got = statsd()
    assert "airflow.hive_acid.compaction_initiator_cycle_duration" in got
    assert got["airflow.hive_acid.compaction_num_initiated"] == "1|g"
