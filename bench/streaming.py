"""Streaming ingest into an 8-bucket table: sustained throughput next to deltalake appending the
same batches in a loop, and the latency from a file landing to its rows being committed (visible
to any snapshot taken after) with a 1 s processing-time trigger.

    python bench/streaming.py [--rows 4000000] [--batch-rows 100000,400000] [--arrival-rate 250000]
                              [--latency-files 30]

Both runs go through the real ingest job (spark-submit, local[*]) and the hive_acid data source.
A file counts as visible when the micro-batches committed in the metastore hold its rows (the
source reads files in arrival order); the table is then read back once to check every row is
there exactly once. Prints tables and writes bench/results/streaming.json.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import print_table, write_results  # noqa: E402

from airflow_hive_acid.acid.reader import ReadRequest, read_bucket_group  # noqa: E402
from airflow_hive_acid.jobs import Ingest, JobFailed, JobSpec, LocalSubmitter, SnapshotSpec, run_job  # noqa: E402
from airflow_hive_acid.metastore import Metastore  # noqa: E402
from airflow_hive_acid.spark.scan import Table, plan_scan  # noqa: E402

COLUMNS = "id bigint, user_id bigint, url string, at timestamp"
URLS = np.array([f"/page/{i}" for i in range(50)], dtype=object)


def batch(first: int, n: int) -> pa.Table:
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "user_id": ids % 9973, "url": pa.array(URLS[ids % 50], pa.string()),
                     "at": pa.array((1_767_225_600_000_000 + ids).astype("datetime64[us]"))})


def drop(landing: Path, i: int, table: pa.Table) -> None:
    """Write next to the folder, then move in: the stream never sees half a file."""
    tmp = landing.parent / f".tmp-{i}.parquet"
    pq.write_table(table, tmp)
    tmp.rename(landing / f"part-{i:05d}.parquet")


def new_table(work: Path, name: str) -> tuple[Metastore, str]:
    ms = Metastore.initialize(f"sqlite:///{work / 'metastore.db'}", warehouse=str(work / "warehouse"))
    ms.catalog.create_table(name, COLUMNS, bucketed_by="id", buckets=8)
    return ms, name


def spec(ms: Metastore, table: str, landing: Path, checkpoint: Path, **kw: object) -> JobSpec:
    req = Ingest(landing=str(landing), checkpoint=str(checkpoint), metastore=ms.url, **kw)
    return JobSpec(table=ms.catalog.get_table(table).to_spec(), snapshot=SnapshotSpec("", ""), request=req)


def check_rows(ms: Metastore, table: str, expected: int) -> None:
    """Read the ids back at the latest snapshot with the reader the scan tasks run: every id once."""
    info = ms.catalog.get_table(table)
    snap = ms.txns.snapshot(info.qualified_name)
    t = Table(info.to_spec())
    plan = plan_scan(t, SnapshotSpec(snap.valid_txns.to_string(), snap.valid_write_ids.to_string()))
    fs, _ = t.fs_and_root
    parts = [b.column(0).to_numpy() for g in plan.groups
             for b in read_bucket_group(fs, g, plan.snapshot, ReadRequest(t.spec.data_columns, ["id"]))]
    ids = np.sort(np.concatenate(parts)) if parts else np.array([], np.int64)
    if len(ids) != expected or not np.array_equal(ids, np.arange(expected)):
        raise SystemExit(f"{table}: {len(ids)} rows read back, expected ids 0..{expected - 1} once each")


def throughput(work: Path, files: int, rows: int) -> dict:
    work = work / f"tput_{rows}"
    ms, table = new_table(work, "bench.clicks")
    landing = work / "landing"
    landing.mkdir(parents=True)
    for i in range(files):
        drop(landing, i, batch(i * rows, rows))
    t0 = time.time()
    out = run_job(LocalSubmitter(log=lambda _l: None),
                  spec(ms, table, landing, work / "cp", max_files_per_trigger=1)).output
    wall = time.time() - t0
    done = ms.txns.stream_batches(table, out.query_id)
    total = sum(b.rows for b in done)
    # sustained: from the first batch's commit to the last one's, over the rows of all but the first
    span = (done[-1].committed_at - done[0].committed_at) / 1000
    sustained = (total - done[0].rows) / span if span > 0 else float("nan")
    check_rows(ms, table, files * rows)
    ms.close()
    return {"system": "hive-acid stream", "batch_rows": rows, "batches": len(done), "rows": total,
            "wall_s": round(wall, 2), "sustained_rows_s": round(sustained), "overall_rows_s": round(total / wall)}


def deltalake_loop(work: Path, files: int, rows: int) -> dict:
    from deltalake import write_deltalake
    path = work / f"delta_{rows}"
    batches = [batch(i * rows, rows) for i in range(files)]
    t0 = time.time()
    for b in batches:
        write_deltalake(str(path), b, mode="append")
    wall = time.time() - t0
    return {"system": "deltalake append loop", "batch_rows": rows, "batches": files, "rows": files * rows,
            "wall_s": round(wall, 2), "sustained_rows_s": round(files * rows / wall),
            "overall_rows_s": round(files * rows / wall)}


def running_query(work: Path, warm_rows: int, max_duration: float):  # type: ignore[no-untyped-def]
    """A 1 s-trigger ingest job running in a thread, past its first (warm-up) batch: its start
    is neither latency nor throughput. Stop it with ``submit.kill()`` and ``runner.join()``."""
    ms, table = new_table(work, "bench.events")
    landing = work / "landing"
    landing.mkdir(parents=True)
    submit = LocalSubmitter(log=lambda _l: None)
    job = spec(ms, table, landing, work / "cp", trigger="processing", interval=1.0, max_duration=max_duration)

    def run() -> None:
        try:
            run_job(submit, job)
        except JobFailed:
            pass                                               # killed by the caller once every file is in

    runner = threading.Thread(target=run)
    drop(landing, 0, batch(0, warm_rows))
    runner.start()
    while sum(b.rows for b in ms.txns.stream_batches(table)) < warm_rows:
        time.sleep(0.05)
    return ms, table, landing, submit, runner


def latency(work: Path, files: int, rows: int, every: float) -> dict:
    ms, table, landing, submit, runner = running_query(work / "lat", rows, files * every + 40)
    landed: list[float] = []
    seen: list[float] = []

    def poll() -> None:
        while len(seen) < files:
            committed = sum(b.rows for b in ms.txns.stream_batches(table)) // rows - 1
            now = time.time()
            while len(seen) < min(committed, len(landed)):
                seen.append(now)
            time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    for i in range(1, files + 1):
        landed.append(time.time())
        drop(landing, i, batch(i * rows, rows))
        time.sleep(every)
    poller.join(timeout=120)
    submit.kill()
    runner.join()
    lat = np.array(seen) - np.array(landed[:len(seen)])
    check_rows(ms, table, (len(seen) + 1) * rows)
    ms.close()
    return {"system": "hive-acid stream (1 s trigger)", "files": len(seen), "rows_per_file": rows,
            "p50_s": round(float(np.percentile(lat, 50)), 2), "p99_s": round(float(np.percentile(lat, 99)), 2),
            "max_s": round(float(lat.max()), 2)}


def arrival(work: Path, rate: int, file_rows: int, seconds: float) -> dict:
    """Files arriving at ``rate`` rows/s for ``seconds`` into a 1 s-trigger query that takes
    whatever has arrived at each trigger (Spark's default): the sustained commit rate from the
    first arrival to the last commit, and how far behind the last commit was."""
    ms, table, landing, submit, runner = running_query(work / "arrival", file_rows, seconds + 300)
    t0, n = time.time(), 1
    while time.time() - t0 < seconds:
        time.sleep(max(0.0, t0 + (n - 1) * file_rows / rate - time.time()))
        drop(landing, n, batch(n * file_rows, file_rows))
        n += 1
    last_drop = time.time()
    deadline = time.time() + 300
    while sum(b.rows for b in ms.txns.stream_batches(table)) < n * file_rows and time.time() < deadline:
        time.sleep(0.05)
    submit.kill()
    runner.join()
    done = ms.txns.stream_batches(table)[1:]
    rows = sum(b.rows for b in done)
    span = done[-1].committed_at / 1000 - t0
    check_rows(ms, table, n * file_rows)
    ms.close()
    return {"system": f"hive-acid stream, {rate} rows/s arriving", "batches": len(done),
            "avg_batch_rows": round(rows / len(done)), "rows": rows, "sustained_rows_s": round(rows / span),
            "behind_at_end_s": round(done[-1].committed_at / 1000 - last_drop, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4_000_000, help="rows ingested per batch size")
    ap.add_argument("--batch-rows", default="100000,400000", help="micro-batch sizes (one file per batch)")
    ap.add_argument("--latency-files", type=int, default=30)
    ap.add_argument("--latency-rows", type=int, default=1_000)
    ap.add_argument("--every", type=float, default=1.5, help="seconds between files in the latency run")
    ap.add_argument("--arrival-rate", type=int, default=250_000, help="rows/s arriving in the sustained run")
    ap.add_argument("--arrival-file-rows", type=int, default=50_000)
    ap.add_argument("--arrival-seconds", type=float, default=30)
    ap.add_argument("--workdir", default="/tmp/hive-acid-bench-streaming")
    args = ap.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tput = []
    for size in (int(x) for x in args.batch_rows.split(",")):
        ours, peer = throughput(work, args.rows // size, size), deltalake_loop(work, args.rows // size, size)
        ours["vs_deltalake"] = round(ours["sustained_rows_s"] / peer["sustained_rows_s"], 2)
        tput += [ours, peer]
    print(f"\nThroughput: {args.rows} rows into an 8-bucket table, one file per micro-batch")
    print_table(tput, ["system", "batch_rows", "batches", "wall_s", "sustained_rows_s", "overall_rows_s",
                       "vs_deltalake"])
    arr = [arrival(work, args.arrival_rate, args.arrival_file_rows, args.arrival_seconds)]
    avg = arr[0]["avg_batch_rows"]
    peer = deltalake_loop(work / "arrival", arr[0]["batches"], avg)
    arr.append({"system": "deltalake append loop", "batches": peer["batches"], "avg_batch_rows": avg,
                "rows": peer["rows"], "sustained_rows_s": peer["sustained_rows_s"]})
    arr[0]["vs_deltalake"] = round(arr[0]["sustained_rows_s"] / peer["sustained_rows_s"], 2)
    print(f"\nSustained: files of {args.arrival_file_rows} rows arriving at {args.arrival_rate} rows/s for "
          f"{args.arrival_seconds:g}s, a 1 s trigger taking all that arrived")
    print_table(arr, ["system", "batches", "avg_batch_rows", "rows", "sustained_rows_s", "behind_at_end_s",
                      "vs_deltalake"])
    lat = [latency(work, args.latency_files, args.latency_rows, args.every)]
    print(f"\nLatency: a file of {args.latency_rows} rows every {args.every}s until its rows are committed")
    print_table(lat, ["system", "files", "rows_per_file", "p50_s", "p99_s", "max_s"])
    out = write_results("streaming", {"throughput": tput, "sustained": arr, "latency": lat, "args": vars(args)})
    print(f"written to {out}")


if __name__ == "__main__":
    main()
