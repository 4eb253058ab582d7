"""Small statements from Airflow: the wall time of an ``AcidMergeOperator`` task (1,000 changes,
half updates, half inserts, into a 100,000-row table), an ``AcidUpdateOperator`` and an
``AcidDeleteOperator`` of a few rows, next to a bare ``spark-submit`` of an empty PySpark job
measured in the same run (the peer: what any Spark task costs), plain and with the same JVM
start options the jobs use. Also the task's time beyond its spark-submit: the transaction life
cycle (open + write id, lock, snapshot, statement id, heartbeat thread, spec and manifest files,
commit with write stats).

    python bench/operator_overhead.py [--rounds 3] [--backends sqlite,postgres]

Prints tables, writes bench/results/operator_overhead.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
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
from airflow_hive_acid.jobs.launcher import FastJvm, job_env, spark_submit_binary
from airflow_hive_acid.metastore import Metastore
from airflow_hive_acid.operators import (
    AcidDeleteOperator,
    AcidInsertOperator,
    AcidMergeOperator,
    AcidUpdateOperator,
)

PG = os.environ.get("HIVE_ACID_BENCH_PG", "postgresql://127.0.0.1:5432/test")


class TimedSparkHook(AcidSparkHook):
    """The operator's own Spark hook, timing each spark-submit it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.submit_s: list[float] = []
        self.job_s: list[float] = []

    def submit_job(self, spec):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        manifest = super().submit_job(spec)
        self.submit_s.append(time.perf_counter() - t0)
        self.job_s.append(manifest.seconds)
        return manifest


def context(task_id: str, run: str) -> dict:
    ti = SimpleNamespace(dag_id="bench", task_id=task_id, run_id=run, map_index=-1)
    return {"ti": ti, "outlet_events": defaultdict(lambda: SimpleNamespace(extra={}))}


EMPTY_JOB = "from pyspark.sql import SparkSession\nSparkSession.builder.getOrCreate().stop()\n"


def bare_submit(work: Path, fast: bool) -> float:
    """Seconds of ``spark-submit`` of an empty PySpark job (``local[*]``), plain or with the
    driver JVM options of hive-acid's jobs."""
    script = work / "empty_job.py"
    script.write_text(EMPTY_JOB)
    jvm = FastJvm() if fast else None
    conf = jvm.conf({"spark.ui.enabled": "false"}) if jvm else {"spark.ui.enabled": "false"}
    cmd = [spark_submit_binary(), "--master", "local[*]"]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    t0 = time.perf_counter()
    subprocess.run(cmd + [str(script)], env=job_env(), check=True, capture_output=True)
    if jvm:
        jvm.finish()
    return time.perf_counter() - t0


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
        few = f"id in ({start + 1000}, {start + 1001}, {start + 1002})"
        tasks = [
            ("merge", AcidMergeOperator(task_id="merge", table="bench.dim", source=str(changes), on="id",
                                        clauses=["WHEN MATCHED THEN UPDATE SET v = s.v, n = s.n",
                                                 "WHEN NOT MATCHED THEN INSERT *"]), (500, 500, 0)),
            ("update", AcidUpdateOperator(task_id="update", table="bench.dim", set="n = n + 1", where=few),
             (0, 3, 0)),
            ("delete", AcidDeleteOperator(task_id="delete", table="bench.dim", where=few), (0, 0, 3)),
        ]
        for kind, op, expect in tasks:
            hook = TimedSparkHook()
            op.__dict__["spark_hook"] = hook
            t0 = time.perf_counter()
            res = op.execute(context(kind, f"{name}-{r}"))
            task_s = time.perf_counter() - t0
            assert (res["rows_inserted"], res["rows_updated"], res["rows_deleted"]) == expect, res
            out.append({"backend": name, "round": r + 1, "statement": kind, "task_s": round(task_s, 3),
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
        bare = {"plain": [bare_submit(work, False) for _ in range(args.rounds)],
                "fast JVM": [bare_submit(work, True) for _ in range(args.rounds)]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bare_med = {k: round(statistics.median(v), 3) for k, v in bare.items()}
    for r in rows:
        r["vs_bare"] = round(r["task_s"] / bare_med["plain"], 2)
        r["vs_bare_fast_jvm"] = round(r["task_s"] / bare_med["fast JVM"], 2)
    print_table(rows, ["backend", "round", "statement", "task_s", "vs_bare", "vs_bare_fast_jvm", "spark_submit_s",
                       "job_in_jvm_s", "overhead_s"])
    print(f"bare spark-submit of an empty PySpark job, median of {args.rounds}: {bare_med}")
    summary = {}
    for b in sorted({r["backend"] for r in rows}):
        for kind in ("merge", "update", "delete"):
            sel = [r for r in rows if r["backend"] == b and r["statement"] == kind]
            summary[f"{b} {kind}"] = {"task_s": round(statistics.median(r["task_s"] for r in sel), 3),
                                      "vs_bare": round(statistics.median(r["vs_bare"] for r in sel), 2),
                                      "overhead_s": round(statistics.median(r["overhead_s"] for r in sel), 3)}
    print_table([{"what": k, **v} for k, v in summary.items()], ["what", "task_s", "vs_bare", "overhead_s"])
    print(f"results: {write_results('operator_overhead', {'rounds': rows, 'bare_submit_s': bare, 'summary': summary})}")


if __name__ == "__main__":
    main()
