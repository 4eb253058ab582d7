"""The paths that make statements fast give the answers of the general ones: loads whose tasks
each write their own statement's files (no shuffle), MERGE bucket by bucket with the clauses in
Arrow or in Spark, against MERGE by Spark joins; tables they wrote read back, compact and read
back again."""
import json
import platform
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablerows import read_rows

from airflow_hive_acid.acid.bucket_codec import decode_bucket, decode_statement
from airflow_hive_acid.acid.bucketing import bucket_id
from airflow_hive_acid.compactor import Compactor
from airflow_hive_acid.errors import JobFailed
from airflow_hive_acid.jobs.spec import Insert, Merge, Read
from airflow_hive_acid.spark import merge as merge_mod
from airflow_hive_acid.statements import LOAD_STATEMENT_IDS

pytestmark = pytest.mark.spark


def _parquet(path: Path, **cols) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path, row_group_size=50)
    return {"path": str(path)}


def _rows(runner, table, tmp_path) -> list[dict]:
    out = tmp_path / "read.jsonl"
    runner.read(table, Read.from_dict({"output": str(out), "with_row_id": True}))
    return sorted((json.loads(x) for x in out.read_text().splitlines()), key=lambda r: (r["id"] is None, r["id"] or 0))


def test_load_tasks_write_their_own_statements(runner, in_process, tmp_path, warehouse, monkeypatch):
    """A bucketed load split over several tasks: each task's rows under its own statement id,
    every row in Hive's bucket; the table reads, compacts and reads the same."""
    monkeypatch.setattr("airflow_hive_acid.spark.load.TARGET_TASK_BYTES", 1)     # one task per row group
    ms = runner.ms
    ms.catalog.create_table("db.facts", "id bigint, v string", partitioned_by="ds string", bucketed_by="id",
                            buckets=4)
    n = 400
    src = _parquet(tmp_path / "load" / "part-0.parquet", id=list(range(n)), v=[f"v{i}" for i in range(n)],
                   ds=["d1" if i % 3 else "d2" for i in range(n)])
    _parquet(tmp_path / "load" / "part-1.parquet", id=list(range(n, 2 * n)), v=["w"] * n, ds=["d1"] * n)
    res = runner.run(Insert.from_dict({"source": {"path": str(Path(src["path"]).parent), "format": "parquet"}}), "db.facts")
    assert res.manifest.rows_inserted == 2 * n and res.statement_id == 0
    rows = _rows(runner, "db.facts", tmp_path)
    assert [r["id"] for r in rows] == list(range(2 * n))
    statements = {decode_statement(r["ROW__ID"]["bucketId"]) for r in rows}
    assert len(statements) > 1 and statements <= {0} | set(range(4096 - LOAD_STATEMENT_IDS, 4096))
    for r in rows:
        assert decode_bucket(r["ROW__ID"]["bucketId"]) == bucket_id((r["id"],), ["bigint"], 4)
    part = warehouse / "db.db" / "facts" / "ds=d1"
    deltas = sorted(p.name for p in part.iterdir() if p.name.startswith("delta_"))
    assert deltas[0] == "delta_0000001_0000001_0000" and len(deltas) == len(statements)
    # a second statement of the same kind in one txn gets the next statement id, not one of these
    txn = ms.txns.open_txn()
    second = runner.run(Insert.from_dict({"source": _parquet(tmp_path / "more.parquet", id=[5000], v=["x"],
                                                                  ds=["d1"])}), "db.facts", txn_id=txn, statement_key="b")
    assert second.statement_id == 0                 # its own write id: counting starts again
    ms.txns.commit_txn(txn)
    before = read_rows(ms, "db.facts")
    c = Compactor(ms, in_process)
    for p in ("ds=d1", "ds=d2"):
        assert c.run_worker(cq_id=c.compact("db.facts", p, "major")["id"]).state == "ready for cleaning"
    c.clean(table="db.facts")
    after = read_rows(ms, "db.facts")
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(after, key=key) == sorted(before, key=key) and len(after) == 2 * n + 1


def test_unbucketed_load_writes_one_file_per_task(runner, tmp_path, warehouse, monkeypatch):
    monkeypatch.setattr("airflow_hive_acid.spark.load.TARGET_TASK_BYTES", 1)
    runner.ms.catalog.create_table("db.plain", "id bigint, v string")
    src = _parquet(tmp_path / "p.parquet", id=list(range(300)), v=["a"] * 300)
    runner.run(Insert.from_dict({"source": src}), "db.plain")
    delta = warehouse / "db.db" / "plain" / "delta_0000001_0000001_0000"
    files = sorted(p.name for p in delta.iterdir() if p.name.startswith("bucket_"))
    assert len(files) > 1 and files[0] == "bucket_00000"
    assert [r["id"] for r in _rows(runner, "db.plain", tmp_path)] == list(range(300))


CLAUSES = ["WHEN MATCHED AND s.op = 'D' THEN DELETE",
           "WHEN MATCHED AND t.v <> s.v THEN UPDATE SET v = s.v, n = t.n + s.n",
           "WHEN NOT MATCHED AND s.op <> 'D' THEN INSERT *"]


def _merge_table(runner, tmp_path, name: str, partitioned: bool) -> str:
    ms = runner.ms
    ms.catalog.create_table(name, "id bigint, v string, n int", partitioned_by="ds string" if partitioned else None,
                            bucketed_by="id", buckets=3)
    cols = {"id": list(range(60)), "v": [f"v{i % 7}" for i in range(60)], "n": [i if i % 5 else None for i in range(60)]}
    if partitioned:
        cols["ds"] = ["a" if i % 2 else "b" for i in range(60)]
    runner.run(Insert.from_dict({"source": _parquet(tmp_path / f"{name}-init.parquet", **cols)}), name)
    return name


def _changes(tmp_path: Path, partitioned: bool) -> dict:
    ids = [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 70, 71, 72, None]
    cols = {"id": ids, "v": ["v0", "x", "v2", "y", "z", "v1", "w", "q", "v6", "r", "new", "new", "gone", "nokey"],
            "n": [1, 2, None, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
            "op": ["U", "U", "D", "U", "D", "U", "U", "U", "U", "U", "I", "I", "D", "I"]}
    if partitioned:
        cols["ds"] = ["b", "a", "b", "a", "a", "b", "a", "a", "b", "a", "a", "b", "a", "a"]
    return _parquet(tmp_path / f"changes-{partitioned}.parquet", **cols)


@pytest.mark.parametrize("partitioned", [False, True])
def test_bucketwise_merge_equals_the_spark_join(runner, tmp_path, monkeypatch, partitioned):
    """The same MERGE three ways: bucket by bucket with the clauses in Arrow, bucket by bucket
    with the clauses in Spark, and by Spark joins: the same rows, ROW__IDs apart."""
    on = ["id", "ds"] if partitioned else ["id"]
    src = _changes(tmp_path, partitioned)
    results = {}
    used = []
    real_arrow, real_program, real_source = merge_mod.run_in_arrow, merge_mod.arrow_program, merge_mod.source_rows
    monkeypatch.setattr(merge_mod, "run_in_arrow", lambda *a, **k: used.append("arrow") or real_arrow(*a, **k))
    for way in ("arrow", "bucketwise-spark", "spark-join"):
        if way == "bucketwise-spark":
            monkeypatch.setattr(merge_mod, "arrow_program", lambda *a, **k: None)
        if way == "spark-join":
            monkeypatch.setattr(merge_mod, "source_rows", lambda *a, **k: None)
        table = _merge_table(runner, tmp_path, f"db.m_{way.replace('-', '_')}_{int(partitioned)}", partitioned)
        res = runner.run(Merge.from_dict({"source": src, "on": on, "clauses": CLAUSES}), table)
        results[way] = ([{k: v for k, v in r.items() if k != "ROW__ID"} for r in _rows(runner, table, tmp_path)],
                        (res.manifest.rows_inserted, res.manifest.rows_updated, res.manifest.rows_deleted))
    monkeypatch.setattr(merge_mod, "arrow_program", real_program)
    monkeypatch.setattr(merge_mod, "source_rows", real_source)
    assert used == ["arrow"]
    assert results["arrow"] == results["bucketwise-spark"] == results["spark-join"]
    rows, counts = results["arrow"]
    by_id = {r["id"]: r for r in rows}
    assert counts == (3, 5, 2) and 2 not in by_id and 5 not in by_id and 72 not in by_id
    assert by_id[1]["v"] == "x" and by_id[1]["n"] == 3 and by_id[3]["n"] == 7 and by_id[0]["n"] is None
    assert by_id[70]["v"] == "new" and by_id[None]["v"] == "nokey", "a NULL key matches nothing: inserted"


def test_clauses_in_arrow_give_spark_sqls_answer(runner, tmp_path, monkeypatch):
    """Issue 25: NaN equals NaN (Spark SQL); an IN list with a literal beyond the int column's
    range widens instead of failing the task; an overflow in a row an earlier clause took is
    never evaluated (as in Spark); a bigint rounds to the nearest double. The same MERGE with
    the clauses in Arrow and in Spark."""
    clauses = ["WHEN MATCHED AND t.n = 2147483647 THEN UPDATE SET v = 'max'",
               "WHEN MATCHED AND t.x = s.x THEN DELETE",
               "WHEN MATCHED AND t.n + 1 IN (2, 3000000000) THEN UPDATE SET v = 'in', x = s.n"]
    nan = float("nan")
    src = _parquet(tmp_path / "nan-src.parquet", id=[1, 2, 3, 4, 5], x=[nan, 1.0, 5.0, 3.0, 0.0],
                   n=pa.array([0, 0, 0, 2**53 + 1, 0], pa.int64()))
    used = []
    real_arrow = merge_mod.run_in_arrow
    monkeypatch.setattr(merge_mod, "run_in_arrow", lambda *a, **k: used.append("arrow") or real_arrow(*a, **k))
    results = {}
    for way in ("arrow", "spark"):
        if way == "spark":
            monkeypatch.setattr(merge_mod, "arrow_program", lambda *a, **k: None)
        table = f"db.nan_{way}"
        runner.ms.catalog.create_table(table, "id bigint, x double, n int, v string", bucketed_by="id", buckets=2)
        runner.run(Insert.from_dict({"source": _parquet(
            tmp_path / f"nan-{way}.parquet", id=[1, 2, 3, 4, 5], x=[nan, 1.0, 2.0, 4.0, 0.0],
            n=pa.array([0, 0, 0, 1, 2**31 - 1], pa.int32()), v=["a"] * 5)}), table)
        runner.run(Merge.from_dict({"source": src, "on": ["id"], "clauses": clauses}), table)
        results[way] = {r["id"]: (r["x"], r["n"], r["v"]) for r in _rows(runner, table, tmp_path)}
    assert used == ["arrow"]
    assert results["arrow"] == results["spark"] == {3: (2.0, 0, "a"), 4: (float(2**53), 1, "in"),
                                                    5: (0.0, 2**31 - 1, "max")}


def test_bucketwise_merge_refuses_two_source_rows_for_one_target_row(runner, tmp_path):
    table = _merge_table(runner, tmp_path, "db.dup", False)
    src = _parquet(tmp_path / "dup.parquet", id=[4, 4], v=["a", "b"], n=[1, 2], op=["U", "U"])
    with pytest.raises(JobFailed, match="cardinality violation"):
        runner.run(Merge.from_dict({"source": src, "on": ["id"], "clauses": CLAUSES[1:2]}), table)
    assert len(_rows(runner, table, tmp_path)) == 60


def test_bucketwise_merge_not_matched_by_source(runner, in_process, tmp_path):
    table = _merge_table(runner, tmp_path, "db.nmbs", False)
    src = _parquet(tmp_path / "keep.parquet", id=[1, 2, 3, 100], v=["a", "b", "c", "d"], n=[1, 2, 3, 4],
                   op=["U"] * 4)
    res = runner.run(Merge.from_dict({"source": src, "on": ["id"], "clauses": [
        "WHEN MATCHED THEN UPDATE SET v = s.v", "WHEN NOT MATCHED THEN INSERT *",
        "WHEN NOT MATCHED BY SOURCE AND t.id >= 10 THEN DELETE"]}), table)
    got = {r["id"]: r["v"] for r in _rows(runner, table, tmp_path)}
    assert sorted(got) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100] and got[2] == "b" and got[5] == "v5"
    assert (res.manifest.rows_updated, res.manifest.rows_inserted, res.manifest.rows_deleted) == (3, 1, 50)
    # what the bucket-wise MERGE wrote compacts and reads the same
    c = Compactor(runner.ms, in_process)
    for kind in ("minor", "major"):
        assert c.run_worker(cq_id=c.compact(table, type=kind)["id"]).state == "ready for cleaning"
        assert {r["id"]: r["v"] for r in _rows(runner, table, tmp_path)} == got


def test_fast_jvm_archive_is_made_once_then_reused(tmp_path, monkeypatch):
    """The first job dumps the driver's class archive under a temporary name; once it ends that
    becomes the archive every later job maps; without a writable cache nothing is added."""
    from airflow_hive_acid.jobs.launcher import FastJvm

    monkeypatch.setenv("HIVE_ACID_CACHE_DIR", str(tmp_path / "cache"))
    first = FastJvm()
    conf = first.conf({"spark.driver.extraJavaOptions": "-Dmine=1"})
    opts = conf["spark.driver.extraJavaOptions"]
    assert opts.startswith("-Dmine=1 -XX:ArchiveClassesAtExit=") and "-XX:TieredStopAtLevel=1" in opts
    dumped = Path(opts.split("-XX:ArchiveClassesAtExit=")[1].split()[0])
    dumped.write_bytes(b"archive")                     # what the JVM writes as it exits
    first.finish()
    assert first.archive.read_bytes() == b"archive" and not dumped.exists()
    again = FastJvm().conf({})["spark.driver.extraJavaOptions"]
    assert again.startswith(f"-XX:SharedArchiveFile={first.archive} ")
    monkeypatch.setenv("HIVE_ACID_FAST_JVM", "0")
    assert FastJvm().conf({"a": "b"}) == {"a": "b"}
    monkeypatch.setenv("HIVE_ACID_FAST_JVM", "1")
    monkeypatch.setenv("HIVE_ACID_CACHE_DIR", "/proc/no-such-cache")
    assert FastJvm().conf({"a": "b"}) == {"a": "b"}
    assert FastJvm("cluster").conf({"a": "b"}) == {"a": "b"}, "a driver elsewhere gets nothing"


_WRITE_THEN_RELEASE = """
import os, sys, tempfile
import numpy as np, psutil, pyarrow as pa, pyarrow.fs as pafs
from airflow_hive_acid.acid.types import parse_columns
from airflow_hive_acid.acid.writer import InsertFile
from airflow_hive_acid.spark.tasks import release_freed_memory

ids = np.arange(250_000)
rows = pa.table({"id": ids, "name": pa.array(np.char.add("name-", (ids * 7919 % 1000003).astype(str)))})
out = tempfile.mkdtemp()
files = [InsertFile(parse_columns("id bigint, name string"), 1, b, 0, pafs.LocalFileSystem(), os.path.join(out, str(b)))
         for b in range(8)]
for f in files:
    f.write(rows)
for f in files:
    f.close()
del files
before = psutil.Process().memory_info().rss
if sys.argv[1] == "release":
    release_freed_memory()
print(before, psutil.Process().memory_info().rss)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="trims glibc's heap")
def test_a_finished_task_returns_its_writers_memory():
    """What a task's eight bucket writers freed stays in the process until the task releases it
    (a reused worker's next task would grow the heap past it): in a fresh interpreter, closing
    the files returns nothing, releasing returns most of it."""
    def rss(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", _WRITE_THEN_RELEASE, mode], capture_output=True, text=True,
                             check=True, cwd=Path(__file__).parent.parent)
        before, after = map(int, out.stdout.split())
        return before, after

    before, after = rss("keep")
    assert before - after < 8 << 20, "closed writers' memory came back without a release"
    before, after = rss("release")
    assert before - after > 40 << 20, f"released only {(before - after) >> 20} MiB"


def test_group_rows_by_integer_and_other_keys():
    """Small integer keys (bucket ids) are grouped by their values directly, wide or NULL-holding
    ones and strings through a dictionary: every way gives each combination's rows, in order."""
    from airflow_hive_acid.spark.write import group_rows

    bucket = pa.array([3, -1, 3, 0, -1, 3], pa.int32())
    wide = pa.array([1, 1 << 40, 1, 1 << 40, 1, 7], pa.int64())
    nulls = pa.array([5, None, 5, None, 6, 5], pa.int64())
    part = pa.array(["a", "b", "a", "b", None, "a"])
    batch = pa.record_batch([pa.array(range(6))], names=["row"])
    for keys in ([bucket], [wide], [nulls], [part, bucket], [bucket, nulls, wide]):
        groups = {tuple(values): rows.column(0).to_pylist() for values, rows in group_rows(batch, keys)}
        expected: dict[tuple, list[int]] = {}
        for i in range(6):
            expected.setdefault(tuple(k[i].as_py() for k in keys), []).append(i)
        assert groups == expected


def test_loads_merges_compactions_and_cleans_run_without_a_sql_session(sqlite_ms, spark, tmp_path):
    """The jobs whose tasks only write files never make Spark's SQL session (``JobSpark``), which
    costs a job ~0.6 s: a load, a bucket-by-bucket MERGE, minor and major compaction, a clean.
    What they wrote reads back right through the usual (SQL) path."""
    from airflow_hive_acid.jobs import Manifest
    from airflow_hive_acid.spark.runner import run_job
    from airflow_hive_acid.spark.session import JobSpark
    from airflow_hive_acid.statements import StatementRunner

    class NoSql(JobSpark):
        @property
        def session(self):
            raise AssertionError("this job made Spark's SQL session")

    def no_sql(spec):
        run_job(NoSql(session=spark), spec).save(spec.manifest_path)
        m = Manifest.load(spec.manifest_path)
        m.raise_for_failure()
        return m

    plain = StatementRunner(sqlite_ms, no_sql, lock_wait=5)
    sqlite_ms.catalog.create_table("db.nosql", "id bigint, v string", bucketed_by="id", buckets=4)
    plain.run(Insert.from_dict({"source": _parquet(tmp_path / "base.parquet", id=list(range(40)),
                                                   v=[f"v{i}" for i in range(40)])}), "db.nosql")
    res = plain.run(Merge.from_dict({"source": _parquet(tmp_path / "chg.parquet", id=[1, 2, 99], v=["a", "b", "c"]),
                                     "on": ["id"], "clauses": ["WHEN MATCHED THEN UPDATE SET v = s.v",
                                                               "WHEN NOT MATCHED THEN INSERT *"]}), "db.nosql")
    assert (res.manifest.rows_updated, res.manifest.rows_inserted) == (2, 1)
    with pytest.raises(JobFailed, match="made Spark's SQL session"):      # a read needs Spark SQL
        plain.read("db.nosql", Read.from_dict({"output": str(tmp_path / "r.jsonl")}))
    want = {i: f"v{i}" for i in range(40)} | {1: "a", 2: "b", 99: "c"}
    assert {r["id"]: r["v"] for r in read_rows(sqlite_ms, "db.nosql")} == want
    c = Compactor(sqlite_ms, no_sql)
    for kind in ("minor", "major"):
        assert c.run_worker(cq_id=c.compact("db.nosql", type=kind)["id"]).state == "ready for cleaning"
    assert [r.state for r in c.clean(table="db.nosql")] == ["succeeded"] * 2     # one per compaction
    assert {r["id"]: r["v"] for r in read_rows(sqlite_ms, "db.nosql")} == want


def test_numpy_values_convert_without_importing_pyspark_testing(spark):
    """The driver's py4j converters of NumPy values no longer import ``pyspark.testing.utils``
    (pandas, protobufs) to learn that NumPy is installed; arrays and scalars still reach Java."""
    import numpy as np
    from py4j import protocol

    from airflow_hive_acid.spark.session import cheap_numpy_converters

    probe = subprocess.run([sys.executable, "-c", (
        "import sys; from airflow_hive_acid.spark.session import cheap_numpy_converters\n"
        "import numpy as np; from py4j import protocol\n"
        "cheap_numpy_converters()\n"
        "assert any(c.can_convert(np.array([1, 2])) for c in protocol.INPUT_CONVERTER)\n"
        "assert any(c.can_convert(np.int64(3)) for c in protocol.INPUT_CONVERTER)\n"
        "print(sorted(m for m in ('pyspark.testing.utils', 'pandas') if m in sys.modules))")],
        capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"
    cheap_numpy_converters()
    names = [type(c).__name__ for c in protocol.INPUT_CONVERTER]
    assert "NumpyArrays" in names and "NumpyScalars" in names
    assert "NumpyArrayConverter" not in names and "NumpyScalarConverter" not in names
    jvm = spark.sparkContext._jvm
    assert jvm.java.lang.Math.abs(np.int64(-3)) == 3
    assert jvm.java.util.Arrays.toString(np.array([4, 5], dtype=np.int32)) == "[4, 5]"
    assert not any(c.can_convert([1, 2]) for c in protocol.INPUT_CONVERTER if type(c).__name__ == "NumpyArrays")


def test_job_workers_start_with_the_job_modules_imported(tmp_path):
    """Workers fork from the job's daemon with pyarrow, pandas and the job modules already
    imported (``spark/entrypoints/daemon.py``), instead of importing them in every worker."""
    from airflow_hive_acid.jobs.launcher import FAST_START_CONF, job_env, spark_submit_binary

    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from pyspark import SparkContext\n"
        "sc = SparkContext.getOrCreate()\n"
        "mods = ('pandas', 'pyarrow.parquet', 'airflow_hive_acid.spark.load', 'airflow_hive_acid.spark.merge')\n"
        "print('PRELOADED', sc.parallelize([0], 1).map(lambda _: [m in sys.modules for m in mods]).collect())\n")
    conf = [a for k, v in FAST_START_CONF.items() for a in ("--conf", f"{k}={v}")]
    out = subprocess.run([spark_submit_binary(), "--master", "local[1]", *conf, str(script)], env=job_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "PRELOADED [[True, True, True, True]]" in out.stdout
