"""How cost grows with the table: load, MERGE of 5% changes (half updates spread over the table,
half inserts) and a full snapshot scan of an 8-bucket table of 5M, 20M and 40M rows, through
spark-submit; seconds per million rows and peak RSS of the whole job (driver JVM and Python
workers) at each size, next to deltalake's write and merge of the same data in the same run.

    python bench/scale.py [--sizes 5000000,20000000,40000000] [--workdir /tmp/hive-acid-scale]

Prints a table and the growth from the smallest to the largest size (the goal: neither seconds
per million rows nor peak RSS grows by more than 25%); writes bench/results/scale.json.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import print_table, run_cmd, run_python, write_results  # noqa: E402
from merge import CHUNK, CLI, COLUMNS, DELTA_MERGE, SCHEMA, gen, warm_jvm  # noqa: E402


def make(work: Path, rows: int) -> tuple[Path, Path]:
    base, chg = work / f"base-{rows}.parquet", work / f"changes-{rows}.parquet"
    if base.exists() and chg.exists():
        return base, chg
    with pq.ParquetWriter(base, SCHEMA) as w:
        for start in range(0, rows, CHUNK):
            w.write_table(gen(np.arange(start, min(rows, start + CHUNK)), start))
    changes = rows // 20
    rng = np.random.default_rng(11)
    updates = rng.choice(rows, changes // 2, replace=False)
    ids = np.concatenate([updates, np.arange(rows, rows + changes - changes // 2)])
    rng.shuffle(ids)
    pq.write_table(gen(ids, 5), chg)
    return base, chg


def hive_acid(work: Path, rows: int, base: Path, chg: Path) -> dict:
    home = work / f"hive-{rows}"
    shutil.rmtree(home, ignore_errors=True)
    cli = CLI + ["--metastore", f"sqlite:///{home / 'm.db'}", "--json"]
    run_cmd(cli + ["init", "--warehouse", str(home / "wh")])
    run_cmd(cli + ["create-table", "s.facts", "--columns", COLUMNS, "--bucketed-by", "id", "--buckets", "8"])
    load = run_cmd(cli + ["insert", "s.facts", "--source", str(base)])
    merge = run_cmd(cli + ["merge", "s.facts", "--source", str(chg), "--on", "id",
                           "--clause", "WHEN MATCHED THEN UPDATE SET name = s.name, amount = s.amount",
                           "--clause", "WHEN NOT MATCHED THEN INSERT *"])
    scan = run_cmd(cli + ["read", "s.facts", "--where", "id < 0"])     # every row read, none printed
    shutil.rmtree(home, ignore_errors=True)
    return {"load": load, "merge": merge, "scan": scan}


def deltalake(work: Path, rows: int, base: Path, chg: Path) -> dict:
    path = work / f"delta-{rows}"
    shutil.rmtree(path, ignore_errors=True)
    load = run_python(f"""
import json, pyarrow as pa, pyarrow.parquet as pq
from deltalake import write_deltalake
f = pq.ParquetFile({str(base)!r})
write_deltalake({str(path)!r}, pa.RecordBatchReader.from_batches(f.schema_arrow, f.iter_batches(batch_size=1_000_000)))
print(json.dumps({{}}))
""")
    merge = run_python(DELTA_MERGE.format(path=str(path), chg=str(chg)))
    shutil.rmtree(path, ignore_errors=True)
    return {"load": load, "merge": merge}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5000000,20000000,40000000")
    ap.add_argument("--workdir", default="/tmp/hive-acid-scale")
    args = ap.parse_args()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    warm_jvm(work)
    out = []
    for rows in (int(x) for x in args.sizes.split(",")):
        base, chg = make(work, rows)
        h = hive_acid(work, rows, base, chg)
        d = deltalake(work, rows, base, chg)
        mrows = rows / 1e6
        for what in ("load", "merge", "scan"):
            r = {"rows": rows, "operation": what, "hive_acid_s": h[what]["wall_s"],
                 "hive_acid_s_per_mrow": round(h[what]["wall_s"] / mrows, 3), "hive_acid_peak_mib": h[what]["peak_mib"]}
            if what in d:
                r.update(deltalake_s=d[what]["wall_s"], deltalake_s_per_mrow=round(d[what]["wall_s"] / mrows, 3),
                         deltalake_peak_mib=d[what]["peak_mib"])
            out.append(r)
            print(json.dumps(r), flush=True)
    print_table(out, ["rows", "operation", "hive_acid_s", "hive_acid_s_per_mrow", "hive_acid_peak_mib",
                      "deltalake_s", "deltalake_s_per_mrow", "deltalake_peak_mib"])
    growth = {}
    sizes = sorted({r["rows"] for r in out})
    for what in ("load", "merge", "scan"):
        lo = next(r for r in out if r["rows"] == sizes[0] and r["operation"] == what)
        hi = next(r for r in out if r["rows"] == sizes[-1] and r["operation"] == what)
        growth[what] = {"s_per_mrow": round(hi["hive_acid_s_per_mrow"] / lo["hive_acid_s_per_mrow"] - 1, 3),
                        "peak_rss": round(hi["hive_acid_peak_mib"] / lo["hive_acid_peak_mib"] - 1, 3)}
    print(f"growth from {sizes[0]} to {sizes[-1]} rows (goal: each <= 0.25): {growth}")
    print(f"written to {write_results('scale', {'results': out, 'growth': growth})}")


if __name__ == "__main__":
    main()
