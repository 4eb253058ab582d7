"""Read amplification: scanning a table made of a base, 10 insert deltas and 5 delete deltas,
against a base-only table holding the same rows, with the same reader in one SparkSession."""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from common import print_table

COLUMNS = "id bigint, name string, amount double, qty int, category string"


def _session():
    from airflow_hive_acid.jobs.launcher import job_env
    os.environ.update({k: job_env()[k] for k in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")})
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[*]").appName("hive-acid-bench")
             .config("spark.driver.memory", "8g").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "16").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from airflow_hive_acid.spark.session import get_session
    return get_session()


def read_amplification(work: Path, rows: int) -> dict:
    from pyspark.sql import functions as F

    from airflow_hive_acid.jobs.spec import Delete, Insert, SnapshotSpec, SourceSpec
    from airflow_hive_acid.metastore import Metastore
    from airflow_hive_acid.spark.runner import run_job
    from airflow_hive_acid.spark.scan import read_table
    from airflow_hive_acid.statements import StatementRunner

    spark = _session()
    home = work / "amp"
    shutil.rmtree(home, ignore_errors=True)
    ms = Metastore.initialize(f"sqlite:///{home / 'm.db'}", warehouse=str(home / "wh"))

    class InProcess:
        """Jobs in this process's SparkSession (the read is what is measured, not spark-submit)."""

        def __call__(self, spec):
            run_job(spark, spec).save(spec.manifest_path)
            from airflow_hive_acid.jobs import Manifest
            m = Manifest.load(spec.manifest_path)
            m.raise_for_failure()
            return m

        def kill(self):
            spark.sparkContext.cancelAllJobs()

    runner = StatementRunner(ms, InProcess())
    for t in ("bench.deltas", "bench.base_only"):
        ms.catalog.create_table(t, COLUMNS, bucketed_by="id", buckets=8)
    base = str(work / "base.parquet")
    t0 = time.time()
    runner.run(Insert(source=SourceSpec(path=base), overwrite=True), "bench.deltas")
    extra = work / "amp_inserts"
    shutil.rmtree(extra, ignore_errors=True)
    step = max(1, rows // 1000)
    for i in range(10):
        (spark.read.parquet(base).filter(F.col("id") < step).withColumn("id", F.col("id") + rows + i * step)
         .write.parquet(str(extra / f"i{i}")))
        runner.run(Insert(source=SourceSpec(path=str(extra / f"i{i}"), format="parquet")), "bench.deltas")
    for k in range(5):
        runner.run(Delete(where=f"id % 997 = {k}"), "bench.deltas")
    built = time.time() - t0

    def snapshot(t):
        s = ms.txns.snapshot(t)
        return SnapshotSpec(s.valid_txns.to_string(), s.valid_write_ids.to_string())

    final = work / "amp_final"
    shutil.rmtree(final, ignore_errors=True)
    deltas = read_table(spark, ms.catalog.get_table("bench.deltas").to_spec(), snapshot("bench.deltas"))
    deltas.write.parquet(str(final))
    runner.run(Insert(source=SourceSpec(path=str(final), format="parquet"), overwrite=True), "bench.base_only")

    def scan(t):
        df = read_table(spark, ms.catalog.get_table(t).to_spec(), snapshot(t))
        t0 = time.time()
        r = df.agg(F.count("*"), F.sum("amount"), F.max("name"), F.sum("qty"), F.max("category")).collect()[0]
        return time.time() - t0, tuple(r)

    results = {}
    for t in ("bench.base_only", "bench.deltas", "bench.base_only", "bench.deltas", "bench.base_only", "bench.deltas"):
        secs, agg = scan(t)
        prev = results.get(t)
        results[t] = (min(secs, prev[0]) if prev else secs, agg)
    assert results["bench.base_only"][1] == results["bench.deltas"][1], "both tables must hold the same rows"
    dirs = sorted(p.name for p in (home / "wh" / "bench.db" / "deltas").iterdir() if not p.name.startswith("_"))
    out = {"rows": results["bench.deltas"][1][0], "directories": dirs,
           "base_only_scan_s": round(results["bench.base_only"][0], 2),
           "base_10_deltas_5_delete_deltas_scan_s": round(results["bench.deltas"][0], 2),
           "amplification": round(results["bench.deltas"][0] / results["bench.base_only"][0], 3),
           "build_s": round(built, 1)}
    print(f"\nRead amplification ({out['rows']} rows; scan = count + sums/max of every column, best of 3)")
    print_table([out], ["rows", "base_only_scan_s", "base_10_deltas_5_delete_deltas_scan_s", "amplification"])
    spark.stop()
    return out
