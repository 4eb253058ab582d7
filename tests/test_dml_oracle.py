"""A randomized run of INSERT / UPDATE / DELETE / MERGE (and failing statements) on a
partitioned, bucketed table against a pure-Python oracle. After every statement the table is
read at the latest snapshot, and now and then at an older one, and must equal the oracle."""
import os
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tablerows import read_rows

from airflow_hive_acid.errors import JobFailed
from airflow_hive_acid.jobs.spec import Delete, Insert, Merge, Read, Update

pytestmark = pytest.mark.spark

OPS = int(os.environ.get("HIVE_ACID_ORACLE_OPS", "160"))   # more: HIVE_ACID_ORACLE_OPS=1000
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03"]


def read_direct(ms, table, write_id=None):
    """The table's rows at the latest snapshot (or as of ``write_id``): {id: (v, s, ds)}."""
    out = {}
    for r in read_rows(ms, table, write_id=write_id):
        assert r["id"] not in out, f"row {r['id']} visible twice"
        out[r["id"]] = (r["v"], r["s"], r["ds"])
    return out


def write_source(tmp: Path, n: int, rows: list[dict], with_op: bool = True) -> dict:
    path = tmp / f"src{n}.parquet"
    cols = {"id": pa.array([r["id"] for r in rows], pa.int64()), "v": pa.array([r["v"] for r in rows], pa.int64()),
            "s": [r["s"] for r in rows], "ds": [r["ds"] for r in rows]}
    if with_op:
        cols["op"] = [r["op"] for r in rows]
    pq.write_table(pa.table(cols), path)
    return {"path": str(path)}


def test_random_statements_match_the_oracle(runner, tmp_path):
    ms = runner.ms
    ms.catalog.create_table("t.r", "id bigint, v bigint, s string", partitioned_by="ds string",
                            bucketed_by="id", buckets=3)
    rnd = random.Random(20261121)
    oracle: dict[int, tuple] = {}
    history: dict[int, dict] = {}       # write id -> oracle after it committed
    next_id = 1
    failed = 0
    for n in range(OPS):
        kind = rnd.choices(["insert", "update", "delete", "merge", "fail"], [3, 2, 2, 3, 1])[0]
        expected = dict(oracle)
        try:
            if kind == "insert":
                new = [{"id": next_id + i, "v": rnd.randint(0, 100), "s": f"s{rnd.randint(0, 9)}",
                        "ds": rnd.choice(DAYS), "op": "I"} for i in range(rnd.randint(1, 6))]
                next_id += len(new)
                res = runner.run(Insert.from_dict({"source": write_source(tmp_path, n, new, with_op=False)}), "t.r")
                for r in new:
                    expected[r["id"]] = (r["v"], r["s"], r["ds"])
            elif kind == "update":
                lo = rnd.randint(0, 100)
                res = runner.run(Update.from_dict({"set": {"v": "v + 7", "s": "concat(s, 'u')"},
                                                   "where": f"v >= {lo} and v < {lo + 15}"}), "t.r")
                for k, (v, s, ds) in oracle.items():
                    if lo <= v < lo + 15:
                        expected[k] = (v + 7, s + "u", ds)
            elif kind == "delete":
                day = rnd.choice(DAYS)
                cut = rnd.randint(0, 60)
                res = runner.run(Delete.from_dict({"where": f"ds = '{day}' and v < {cut}"}), "t.r")
                expected = {k: r for k, r in oracle.items() if not (r[2] == day and r[0] < cut)}
            elif kind == "merge":
                src_rows = []
                for k in rnd.sample(sorted(oracle), min(len(oracle), rnd.randint(0, 5))):
                    src_rows.append({"id": k, "v": rnd.randint(0, 100), "s": "m", "ds": oracle[k][2],
                                     "op": rnd.choice("UD")})
                for _ in range(rnd.randint(0, 3)):
                    src_rows.append({"id": next_id, "v": rnd.randint(0, 100), "s": "new", "ds": rnd.choice(DAYS),
                                     "op": "I"})
                    next_id += 1
                if not src_rows:
                    continue
                res = runner.run(Merge.from_dict({"source": write_source(tmp_path, n, src_rows), "on": ["id"],
                                                  "clauses": ["WHEN MATCHED AND s.op = 'D' THEN DELETE",
                                                              "WHEN MATCHED THEN UPDATE SET v = s.v, s = s.s",
                                                              "WHEN NOT MATCHED THEN INSERT *"]}), "t.r")
                for r in src_rows:
                    if r["id"] in oracle:
                        if r["op"] == "D":
                            expected.pop(r["id"])
                        else:
                            expected[r["id"]] = (r["v"], r["s"], oracle[r["id"]][2])
                    else:
                        expected[r["id"]] = (r["v"], r["s"], r["ds"])
            else:
                # a statement that fails half-way must leave no trace
                if not oracle:
                    continue
                k = rnd.choice(sorted(oracle))
                dup = [{"id": k, "v": 1, "s": "x", "ds": oracle[k][2], "op": "U"}] * 2
                with pytest.raises(JobFailed):
                    runner.run(Merge.from_dict({"source": write_source(tmp_path, n, dup), "on": ["id"],
                                                "clauses": ["WHEN MATCHED THEN UPDATE SET v = s.v"]}), "t.r")
                failed += 1
                assert read_direct(ms, "t.r") == oracle
                continue
        except JobFailed as exc:
            raise AssertionError(f"statement {n} ({kind}) failed: {exc}") from exc
        oracle = expected
        history[res.write_id] = dict(oracle)
        assert read_direct(ms, "t.r") == oracle, f"after statement {n} ({kind}, write id {res.write_id})"
        if history and rnd.random() < 0.2:
            old = rnd.choice(sorted(history))
            assert read_direct(ms, "t.r", old) == history[old], f"as of write id {old}"
    assert failed > 0 and len(history) > OPS // 2
    # the Spark read path agrees with the direct reader at the end
    out = tmp_path / "final.jsonl"
    runner.read("t.r", Read.from_dict({"output": str(out)}))
    import json
    spark_rows = {r["id"]: (r["v"], r["s"], r["ds"]) for r in map(json.loads, out.read_text().splitlines())}
    assert spark_rows == oracle
