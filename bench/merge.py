"""MERGE of M changes into an N-row table (8 buckets): hive-acid (spark-submit) next to
deltalake's merge and pyiceberg's upsert, on the same data in the same run; the bulk load alone,
hive-acid and deltalake taking turns (medians of ``--load-repeats``); plus the read
amplification of a table with 10 deltas and 5 delete deltas against a base-only table.

    python bench/merge.py [--rows 20000000] [--changes 1000000] [--workdir /tmp/hive-acid-bench]

Prints tables and writes bench/results/merge.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.orc as po
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import print_table, run_cmd, run_python, write_results  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("qty", pa.int32()),
                    ("category", pa.string())])
COLUMNS = "id bigint, name string, amount double, qty int, category string"
CATEGORIES = np.array([f"cat-{i:02d}" for i in range(20)], dtype=object)
CHUNK = 2_000_000


def gen(ids: np.ndarray, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"name-{x}" for x in rng.integers(0, 1_000_000, n)], pa.string()),
        "amount": pa.array(np.round(rng.random(n) * 1000, 2)),
        "qty": pa.array(rng.integers(0, 100, n).astype(np.int32)),
        "category": pa.array(CATEGORIES[rng.integers(0, 20, n)], pa.string()),
    }, schema=SCHEMA)


def make_data(work: Path, rows: int, changes: int) -> tuple[Path, Path]:
    base = work / "base.parquet"
    chg = work / "changes.parquet"
    if base.exists() and chg.exists() and pq.ParquetFile(base).metadata.num_rows == rows:
        return base, chg
    with pq.ParquetWriter(base, SCHEMA) as w:
        for start in range(0, rows, CHUNK):
            w.write_table(gen(np.arange(start, min(rows, start + CHUNK)), start))
    rng = np.random.default_rng(7)
    upd = rng.choice(rows, changes // 2, replace=False)
    ins = np.arange(rows, rows + changes - changes // 2)
    ids = np.concatenate([upd, ins])
    rng.shuffle(ids)
    pq.write_table(gen(ids, 99), chg)
    return base, chg


CLI = [sys.executable, "-m", "airflow_hive_acid.cli"]


def warm_jvm(work: Path) -> None:
    """One tiny job first, so that the timed ones start from the driver's class archive, as every
    job after a machine's first does (``jobs/launcher.FastJvm``)."""
    home = work / "warm"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    url = f"sqlite:///{home / 'm.db'}"
    pq.write_table(pa.table({"id": [1]}), home / "one.parquet")
    run_cmd(CLI + ["--metastore", url, "init", "--warehouse", str(home / "wh")])
    run_cmd(CLI + ["--metastore", url, "create-table", "w.t", "--columns", "id bigint"])
    run_cmd(CLI + ["--metastore", url, "insert", "w.t", "--source", str(home / "one.parquet")])


def hive_acid(work: Path, base: Path, chg: Path, buckets: int, compress: str | None = None,
              merge: bool = True) -> dict:
    url = f"sqlite:///{work / 'hive' / 'metastore.db'}"
    shutil.rmtree(work / "hive", ignore_errors=True)
    env = dict(os.environ)
    cli = CLI + ["--metastore", url, "--json"]
    run_cmd(cli + ["init", "--warehouse", str(work / "hive" / "wh")], env=env)
    layout = ["--bucketed-by", "id", "--buckets", str(buckets)] if buckets else []
    props = ["--property", f"orc.compress={compress}"] if compress else []
    run_cmd(cli + ["create-table", "bench.facts", "--columns", COLUMNS, *layout, *props], env=env)
    load = run_cmd(cli + ["insert", "bench.facts", "--source", str(base)], env=env)
    name = f"hive-acid{'' if buckets else ' unbucketed'}{f' orc.compress={compress}' if compress else ''}"
    out = {"system": name, "load_s": load["wall_s"], "load_peak_mib": load["peak_mib"],
           "load_stages": _stages(load)}
    if not merge:
        return out
    m = run_cmd(cli + ["merge", "bench.facts", "--source", str(chg), "--on", "id",
                       "--clause", "WHEN MATCHED THEN UPDATE SET name = s.name, amount = s.amount, qty = s.qty, "
                                   "category = s.category",
                       "--clause", "WHEN NOT MATCHED THEN INSERT *"], env=env)
    r = json.loads(m["stdout"])
    return {**out, "merge_wall_s": m["wall_s"], "merge_job_s": r["job_seconds"], "bytes_written": r["bytes"],
            "peak_mib": m["peak_mib"], "rows_updated": r["rows_updated"], "rows_inserted": r["rows_inserted"],
            "merge_stages": _stages(m)}


def _stages(result: dict) -> dict:
    return {s["stage"]: s["seconds"] for s in json.loads(result["stdout"]).get("stages", [])}


DELTA_MERGE = r'''
import json, time, pyarrow.parquet as pq
from deltalake import DeltaTable
path, chg = {path!r}, {chg!r}
dt = DeltaTable(path)
before = set(dt.file_uris())
src = pq.read_table(chg)
t0 = time.time()
res = (dt.merge(source=src, predicate="t.id = s.id", source_alias="s", target_alias="t")
       .when_matched_update_all().when_not_matched_insert_all().execute())
took = time.time() - t0
dt = DeltaTable(path)
import os
added = [u for u in dt.file_uris() if u not in before]
size = sum(os.path.getsize(u.replace("file://", "")) for u in added)
print(json.dumps({{"merge_job_s": round(took, 2), "bytes_written": size,
                  "rows_updated": res.get("num_target_rows_updated"),
                  "rows_inserted": res.get("num_target_rows_inserted")}}))
'''


def deltalake_load(path: Path, base: Path) -> dict:
    shutil.rmtree(path, ignore_errors=True)
    return run_python(f"""
import json, time, pyarrow as pa, pyarrow.parquet as pq
from deltalake import write_deltalake
t0 = time.time()
f = pq.ParquetFile({str(base)!r})
write_deltalake({str(path)!r}, pa.RecordBatchReader.from_batches(f.schema_arrow, f.iter_batches(batch_size=1_000_000)))
print(json.dumps({{"t": time.time() - t0}}))
""")


def deltalake(work: Path, base: Path, chg: Path) -> dict:
    path = work / "delta"
    load = deltalake_load(path, base)
    m = run_python(DELTA_MERGE.format(path=str(path), chg=str(chg)))
    return {"system": "deltalake merge", "load_s": load["wall_s"], "merge_wall_s": m["wall_s"],
            "merge_job_s": m["merge_job_s"], "bytes_written": m["bytes_written"], "peak_mib": m["peak_mib"],
            "rows_updated": m["rows_updated"], "rows_inserted": m["rows_inserted"]}


def interleaved_loads(work: Path, base: Path, buckets: int, repeats: int) -> list[dict]:
    """The bulk load alone, hive-acid (bucketed and not) and deltalake taking turns ``repeats``
    times: one slow run of either side, on a noisy machine, does not decide the ratio."""
    walls: dict[str, list[float]] = {"hive-acid": [], "hive-acid unbucketed": [], "deltalake": []}
    for _ in range(repeats):
        walls["hive-acid"].append(hive_acid(work, base, base, buckets, merge=False)["load_s"])
        walls["hive-acid unbucketed"].append(hive_acid(work, base, base, 0, merge=False)["load_s"])
        walls["deltalake"].append(deltalake_load(work / "delta", base)["wall_s"])
    delta = statistics.median(walls["deltalake"])
    return [{"system": name, "load_s_runs": runs, "load_s_median": round(statistics.median(runs), 2),
             "median_vs_delta": round(statistics.median(runs) / delta, 2)} for name, runs in walls.items()]


ICEBERG_UPSERT = r'''
import json, time, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog("bench", uri={uri!r}, warehouse={wh!r})
tbl = cat.load_table(("bench", "facts"))
src = pq.read_table({chg!r})
before = tbl.current_snapshot().snapshot_id
t0 = time.time()
res = tbl.upsert(src, join_cols=["id"])
took = time.time() - t0
tbl = cat.load_table(("bench", "facts"))
size = 0
for s in tbl.snapshots():
    if s.snapshot_id != before and s.summary is not None:
        size += int(s.summary.get("added-files-size", 0) or 0) if s.timestamp_ms >= 0 else 0
print(json.dumps({{"merge_job_s": round(took, 2), "bytes_written": size, "rows_updated": res.rows_updated,
                  "rows_inserted": res.rows_inserted}}))
'''


def iceberg(work: Path, base: Path, chg: Path) -> dict:
    path = work / "iceberg"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    uri, wh = f"sqlite:///{path / 'catalog.db'}", f"file://{path / 'wh'}"
    load = run_python(f"""
import json, time, pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog("bench", uri={uri!r}, warehouse={wh!r})
cat.create_namespace("bench")
f = pq.ParquetFile({str(base)!r})
tbl = cat.create_table(("bench", "facts"), schema=f.schema_arrow)
t0 = time.time()
import pyarrow as pa
for b in f.iter_batches(batch_size=5_000_000):
    tbl.append(pa.Table.from_batches([b]))
print(json.dumps({{"t": time.time() - t0}}))
""")
    try:
        m = run_python(ICEBERG_UPSERT.format(uri=uri, wh=wh, chg=str(chg)))
    except RuntimeError as exc:
        return {"system": "pyiceberg upsert", "load_s": load["wall_s"], "merge_wall_s": "failed",
                "note": str(exc)[-300:]}
    return {"system": "pyiceberg upsert", "load_s": load["wall_s"], "merge_wall_s": m["wall_s"],
            "merge_job_s": m["merge_job_s"], "bytes_written": m["bytes_written"], "peak_mib": m["peak_mib"],
            "rows_updated": m["rows_updated"], "rows_inserted": m["rows_inserted"]}


def changed_rows_orc_bytes(chg: Path, compression: str) -> int:
    sink = pa.BufferOutputStream()
    po.write_table(pq.read_table(chg), sink, compression=compression)
    return sink.getvalue().size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--workdir", default="/tmp/hive-acid-bench")
    ap.add_argument("--only", default="hive-acid,deltalake,pyiceberg")
    ap.add_argument("--skip-amplification", action="store_true")
    ap.add_argument("--load-repeats", type=int, default=3,
                    help="turns of the load-only comparison (medians); 0 leaves it out")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    base, chg = make_data(work, args.rows, args.changes)
    print(f"data: {args.rows} rows, {args.changes} changes ({time.time() - t0:.0f}s)", flush=True)
    orc_changed = {"zstd": changed_rows_orc_bytes(chg, "zstd"), "zlib": changed_rows_orc_bytes(chg, "zlib")}
    rows = []
    systems = args.only.split(",")
    if "hive-acid" in systems:
        warm_jvm(work)
        for kwargs in ({}, {"compress": "ZLIB"}):
            rows.append(hive_acid(work, base, chg, args.buckets, **kwargs))
            print(json.dumps(rows[-1]), flush=True)
        rows.append(hive_acid(work, base, chg, 0, merge=False))
        print(json.dumps(rows[-1]), flush=True)
    if "deltalake" in systems:
        rows.append(deltalake(work, base, chg))
        print(json.dumps(rows[-1]), flush=True)
    if "pyiceberg" in systems:
        rows.append(iceberg(work, base, chg))
        print(json.dumps(rows[-1]), flush=True)
    delta = next((r for r in rows if r["system"] == "deltalake merge"), None)
    for r in rows:
        if isinstance(r.get("bytes_written"), int):
            codec = "zlib" if "ZLIB" in r["system"] else "zstd"
            r["bytes_vs_changed_orc"] = round(r["bytes_written"] / orc_changed[codec], 2)
        if delta is not None:
            r["load_vs_delta"] = round(r["load_s"] / delta["load_s"], 2)
            if isinstance(r.get("merge_wall_s"), float):
                r["merge_vs_delta"] = round(r["merge_wall_s"] / delta["merge_wall_s"], 2)
                r["merge_job_vs_delta"] = round(r["merge_job_s"] / delta["merge_job_s"], 2)
    print(f"\nMERGE of {args.changes} changes ({args.changes // 2} updates spread over the table, the rest inserts) "
          f"into {args.rows} rows; ORC size of the changed rows: {orc_changed} bytes")
    print_table(rows, ["system", "load_s", "load_vs_delta", "merge_wall_s", "merge_vs_delta", "merge_job_s",
                       "merge_job_vs_delta", "bytes_written", "bytes_vs_changed_orc", "peak_mib", "rows_updated",
                       "rows_inserted"])
    for r in rows:
        if "load_stages" in r:
            print(f"{r['system']}: load stages {r['load_stages']}; merge stages {r.get('merge_stages')}")
    loads = None
    if args.load_repeats and {"hive-acid", "deltalake"} <= set(systems):
        loads = interleaved_loads(work, base, args.buckets, args.load_repeats)
        print(f"\nLoad alone, the systems taking turns {args.load_repeats} times (medians)")
        print_table(loads, ["system", "load_s_runs", "load_s_median", "median_vs_delta"])
    amp = None
    if not args.skip_amplification:
        from amplification import read_amplification
        amp = read_amplification(work, args.rows)
    out = write_results("merge", {"rows": args.rows, "changes": args.changes, "buckets": args.buckets,
                                  "changed_rows_orc_bytes": orc_changed, "merge": rows, "loads": loads,
                                  "read_amplification": amp})
    print(f"\nwritten to {out}")


if __name__ == "__main__":
    main()
