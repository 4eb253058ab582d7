"""Read a table's visible rows in-process with the reader the Spark tasks run (no JVM): how the
tests check table contents after a job, a DAG run or a compaction."""
from airflow_hive_acid.acid.reader import ReadRequest, read_bucket_group
from airflow_hive_acid.jobs.spec import SnapshotSpec
from airflow_hive_acid.spark.scan import Table, partition_values, plan_scan


def read_rows(ms, table: str, *, write_id: int | None = None, txn_id: int | None = None) -> list[dict]:
    """Rows (table columns plus partition columns) at the latest snapshot, the snapshot of
    ``txn_id``, or as of ``write_id``."""
    info = ms.catalog.get_table(table)
    snap = ms.txns.snapshot(info.qualified_name, txn_id=txn_id)
    wl = snap.valid_write_ids if write_id is None else snap.valid_write_ids.as_of(write_id)
    t = Table(info.to_spec())
    plan = plan_scan(t, SnapshotSpec(snap.valid_txns.to_string(), wl.to_string()))
    fs, _ = t.fs_and_root
    out = []
    for g in plan.groups:
        parts = {c.name: v.as_py() for c, v in zip(info.partition_columns, partition_values(t, g.partition))}
        for b in read_bucket_group(fs, g, plan.snapshot, ReadRequest(t.spec.data_columns)):
            out.extend({**r, **parts} for r in b.to_pylist())
    return out
