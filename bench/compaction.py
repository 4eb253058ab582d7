"""Major compaction of an N-row table made of 10 deltas and 5 delete deltas, through the CLI
(``hive-acid compact --type major --wait``: spark-submit of the compact and clean jobs), next
to a raw pyarrow ORC read + write of the same rows in the same run; plus the scan time of the
table before and after compaction.

    python bench/compaction.py [--rows 20000000] [--buckets 8] [--workdir /tmp/hive-acid-bench-compaction]

The table's files are written directly with the project's ACID writer (what 10 INSERTs and 5
DELETEs would leave), then registered in the metastore. Prints a table and writes
bench/results/compaction.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.orc as po

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import dir_bytes, print_table, run_cmd, write_results

from airflow_hive_acid.acid import bucket_codec
from airflow_hive_acid.acid import fs as afs
from airflow_hive_acid.acid.names import bucket_file_name, delta_name
from airflow_hive_acid.acid.types import parse_columns
from airflow_hive_acid.acid.writer import delete_events, insert_events, write_acid_file

COLUMNS = "id bigint, name string, amount double, qty int, category string"
CATEGORIES = np.array([f"cat-{i:02d}" for i in range(20)], dtype=object)
DELTAS, DELETE_DELTAS = 10, 5


def gen(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "name": pa.array([f"name-{x}" for x in rng.integers(0, 1_000_000, n)], pa.string()),
                     "amount": pa.array(np.round(rng.random(n) * 1000, 2)),
                     "qty": pa.array(rng.integers(0, 100, n).astype(np.int32)),
                     "category": pa.array(CATEGORIES[rng.integers(0, 20, n)], pa.string())})


def make_table(root: Path, rows: int, buckets: int, deletes_per_delta: int) -> dict:
    """10 insert deltas (write ids 1..10), each split over ``buckets`` writer files, and 5
    delete deltas (write ids 11..15) deleting random earlier rows, routed to their bucket."""
    cols = parse_columns(COLUMNS)
    fs = afs.filesystem_for(str(root))[0]
    per = rows // DELTAS
    rng = np.random.default_rng(1)
    written = 0
    for w in range(1, DELTAS + 1):
        d = root / delta_name(w, w, 0)
        ids = np.arange((w - 1) * per, w * per if w < DELTAS else rows)
        for b, chunk in enumerate(np.array_split(ids, buckets)):
            ev = insert_events(gen(chunk, w * 100 + b), cols, w, b, 0)
            write_acid_file(fs, str(d / bucket_file_name(b)), ev, cols)
        afs.write_acid_version(fs, str(d))
        written += len(ids)
    # which (write id, bucket, rowId) each row got: rows of delta w are split evenly over buckets
    deleted = 0
    taken: set[int] = set()
    for k in range(DELETE_DELTAS):
        w = DELTAS + 1 + k
        pick = rng.choice(rows, deletes_per_delta, replace=False)
        pick = np.array([p for p in pick if p not in taken], dtype=np.int64)
        taken.update(pick.tolist())
        src_w = np.minimum(pick // per, DELTAS - 1) + 1
        ot, bp, rid = [], [], []
        for sw in np.unique(src_w):
            ids = np.arange((sw - 1) * per, sw * per if sw < DELTAS else rows)
            bounds = np.cumsum([len(c) for c in np.array_split(ids, buckets)])
            local = pick[src_w == sw] - (sw - 1) * per
            bucket = np.searchsorted(bounds, local, side="right")
            start = np.r_[0, bounds][bucket]
            ot.append(np.full(len(local), sw))
            bp.append(np.array([bucket_codec.encode_v1(int(b), 0) for b in bucket], dtype=np.int64))
            rid.append(local - start)
        ot, bp, rid = np.concatenate(ot), np.concatenate(bp), np.concatenate(rid)
        d = root / delta_name(w, w, 0, delete=True)
        buckets_of = (bp >> 16) & 0xFFF
        for b in np.unique(buckets_of):
            m = buckets_of == b
            write_acid_file(fs, str(d / bucket_file_name(int(b))), delete_events(ot[m], bp[m], rid[m], cols, w), cols)
        afs.write_acid_version(fs, str(d))
        deleted += len(pick)
    return {"rows": written, "deleted": deleted, "live_rows": written - deleted}


def raw_pyarrow(root: Path, out: Path) -> dict:
    """Read every insert-delta ORC file with pyarrow and write the same rows again (ZLIB)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    t0 = time.time()
    rows = 0
    for i, f in enumerate(sorted(root.glob("delta_*/bucket_*"))):
        t = po.ORCFile(str(f)).read()
        rows += t.num_rows
        po.write_table(t, str(out / f"part-{i:05d}.orc"), compression="zlib")
    return {"rows": rows, "seconds": round(time.time() - t0, 2), "bytes": dir_bytes(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--deletes", type=int, default=100_000, help="rows deleted by each delete delta")
    ap.add_argument("--workdir", default="/tmp/hive-acid-bench-compaction")
    args = ap.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    url = f"sqlite:///{work / 'metastore.db'}"
    env = {**os.environ, "HIVE_ACID_SPARK_CONF": os.environ.get(
        "HIVE_ACID_SPARK_CONF", "spark.driver.memory=12g spark.sql.shuffle.partitions=16")}
    cli = [sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, "--json"]
    run_cmd(cli + ["init", "--warehouse", str(work / "wh")], env=env)
    root = work / "facts"
    t0 = time.time()
    made = make_table(root, args.rows, args.buckets, args.deletes)
    gen_s = round(time.time() - t0, 1)
    run_cmd(cli + ["register", "bench.facts", "--location", str(root), "--columns", COLUMNS], env=env)
    input_bytes = dir_bytes(root)

    def scan() -> dict:
        r = run_cmd(cli + ["read", "bench.facts", "--where", "qty < 0"], env=env)   # full scan, no rows out
        return {"wall_s": r["wall_s"]}

    scan_before = scan()
    raw = raw_pyarrow(root, work / "raw")
    comp = run_cmd(cli + ["compact", "bench.facts", "--type", "major", "--wait"], env=env)
    out = json.loads(comp["stdout"])
    worker = out.get("worker") or {}
    assert out["state"] == "succeeded", out
    assert worker.get("rows") == made["live_rows"], (worker.get("rows"), made)
    scan_after = scan()
    job_s = worker.get("seconds") or comp["wall_s"]
    rows_in = made["rows"]
    result = {
        "rows": rows_in, "live_rows": made["live_rows"], "buckets": args.buckets, "input_bytes": input_bytes,
        "generate_s": gen_s,
        "raw_pyarrow_s": raw["seconds"], "raw_rows_per_s": round(raw["rows"] / raw["seconds"]),
        "compact_worker_s": job_s, "compact_wall_s": comp["wall_s"], "compact_peak_mib": comp["peak_mib"],
        "compact_rows_per_s": round(rows_in / job_s),
        "ratio_vs_raw": round((rows_in / job_s) / (raw["rows"] / raw["seconds"]), 2),
        "base_bytes": worker.get("bytes"), "scan_before_s": scan_before["wall_s"],
        "scan_after_s": scan_after["wall_s"],
    }
    print_table([
        {"what": "raw pyarrow ORC read+write", "seconds": raw["seconds"], "rows/s": result["raw_rows_per_s"]},
        {"what": "major compaction (worker incl. spark-submit)", "seconds": job_s,
         "rows/s": result["compact_rows_per_s"]},
        {"what": "compact --wait (worker + cleaner)", "seconds": comp["wall_s"], "rows/s": "-"},
        {"what": "scan before (10 deltas + 5 delete deltas)", "seconds": scan_before["wall_s"], "rows/s": "-"},
        {"what": "scan after (one base)", "seconds": scan_after["wall_s"], "rows/s": "-"},
    ], ["what", "seconds", "rows/s"])
    print(f"compaction throughput / raw pyarrow throughput = {result['ratio_vs_raw']}")
    print(f"results: {write_results('compaction', result)}")


if __name__ == "__main__":
    main()
