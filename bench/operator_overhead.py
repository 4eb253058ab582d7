"""Overhead of an ``AcidMergeOperator`` task beyond its Spark job: the task's wall time minus the
wall time of the spark-submit it runs (the peer: the same job run bare, as SparkSubmitOperator
would run it). The difference is the transaction life cycle — open + write id, lock, snapshot,
statement id, heartbeat thread, spec and manifest files, commit with write stats.

    python bench/operator_overhead.py [--rounds 3] [--backends sqlite,postgres]

Each round MERGEs 1,000 changes (half updates, half inserts) into a 100,000-row table through
real spark-submit. Prints a table, writes bench/results/operator_overhead.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import print_table, write_results

from airflow_hive_acid.hooks.spark import AcidSparkHook
from airflow_hive_acid.metastore import Metastore
from airflow_hive_acid.operators import AcidInsertOperator, AcidMergeOperator

PG = os.environ.get("HIVE_ACID_BENCH_PG", "postgresql://127.0.0.1:5432/test")


class TimedSparkHook(AcidSparkHook):
    """The operator's own Spark hook, timing each spark-submit it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.submit_s: list[float] = []
        self.job_s: list[float] = []

    def submit_job(self, spec, spec_path):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        manifest = super().submit_job(spec, spec_path)
        self.submit_s.append(time.perf_counter() - t0)
        self.job_s.append(manifest.seconds)
        return manifest


def context(task_id: str, run: str) -> dict:
    ti = SimpleNamespace(dag_id="bench", task_id=task_id, run_id=run, map_index=-1)
    return {"ti": ti, "outlet_events": defaultdict(lambda: SimpleNamespace(extra={}))}


def run_backend(name: str, url: str, work: Path, rounds: int) -> list[dict]:
    os.environ["HIVE_ACID_METASTORE"] = url
    ms = Metastore.initialize(url, warehouse=str(work / f"wh-{name}"))
    ms.catalog.create_table("bench.dim", "id bigint, v string, n bigint", bucketed_by="id", buckets=4)
    base = work / "base.parquet"
    pq.write_table(pa.table({"id": pa.array(range(100_000), pa.int64()), "v": [f"v{i}" for i in range(100_000)],
                             "n": pa.array(range(100_000), pa.int64())}), base)
    AcidInsertOperator(task_id="load", table="bench.dim", source=str(base)).execute(context("load", name))
    out = []
    for r in range(rounds):
        start = r * 7919 % 90_000
        ids = list(range(start, start + 500)) + list(range(100_000 + r * 500, 100_500 + r * 500))   # updates, inserts
        changes = work / f"changes-{r}.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": [f"r{r}"] * len(ids),
                                 "n": pa.array([r] * len(ids), pa.int64())}), changes)
        op = AcidMergeOperator(task_id="merge", table="bench.dim", source=str(changes), on="id",
                               clauses=["WHEN MATCHED THEN UPDATE SET v = s.v, n = s.n",
                                        "WHEN NOT MATCHED THEN INSERT *"])
        hook = TimedSparkHook()
        op.__dict__["spark_hook"] = hook
        t0 = time.perf_counter()
        res = op.execute(context("merge", f"{name}-{r}"))
        task_s = time.perf_counter() - t0
        assert (res["rows_updated"], res["rows_inserted"]) == (500, 500), res
        out.append({"backend": name, "round": r + 1, "task_s": round(task_s, 3),
                    "spark_submit_s": round(hook.submit_s[0], 3), "job_in_jvm_s": round(hook.job_s[0], 3),
                    "overhead_s": round(task_s - hook.submit_s[0], 3)})
    ms.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backends", default="sqlite,postgres")
    args = ap.parse_args()
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-"))
    work = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    rows: list[dict] = []
    try:
        for name in args.backends.split(","):
            if name == "sqlite":
                rows += run_backend(name, f"sqlite:///{work / 'm.db'}", work, args.rounds)
            else:
                import psycopg
                schema = f"ha_bench_{uuid.uuid4().hex[:8]}"
                with psycopg.connect(PG, autocommit=True) as c:
                    c.execute(f'CREATE SCHEMA "{schema}"')   # generated name, not user input
                try:
                    rows += run_backend(name, f"{PG}?options=-csearch_path%3D{schema}", work, args.rounds)
                finally:
                    with psycopg.connect(PG, autocommit=True) as c:
                        c.execute(f'DROP SCHEMA "{schema}" CASCADE')
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(rows, ["backend", "round", "task_s", "spark_submit_s", "job_in_jvm_s", "overhead_s"])
    summary = {b: round(statistics.median(r["overhead_s"] for r in rows if r["backend"] == b), 3)
               for b in {r["backend"] for r in rows}}
    print(f"median overhead of the AcidMergeOperator task beyond its spark-submit: {summary}")
    print(f"results: {write_results('operator_overhead', {'rounds': rows, 'median_overhead_s': summary})}")


if __name__ == "__main__":
    main()
