"""Metastore throughput: transactions per second (open + allocate write id + commit) with 1, 4
and 16 client processes, on SQLite and PostgreSQL, next to two peers measured in the same run:

* ``raw SQL floor`` — the same number of database round-trip transactions per iteration (3)
  with the cheapest statements, from the same driver: what the database itself allows here;
* ``pyiceberg SqlCatalog`` — commits of an Iceberg table property through pyiceberg's SQL
  catalog on the same database (its commit protocol: write metadata file + compare-and-swap).

``begin_write_txn_per_s`` is the same transaction through ``begin_write`` (open + allocate in one
call), as the operators and the CLI run it.

Usage: python bench/metastore.py [--seconds 5] [--clients 1,4,16] [--backends sqlite,postgres]
Results: printed as a table and written to bench/results/metastore.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PG = os.environ.get("HIVE_ACID_BENCH_PG", "postgresql://127.0.0.1:5432/test")
RESULTS = Path(__file__).resolve().parent / "results"


# -- workloads (each runs in its own process, returns completed iterations) -------------------
def ours(url: str, seconds: float, start_at: float, table: str) -> int:
    from airflow_hive_acid.metastore import Metastore
    ms = Metastore(url)
    if table == "per-client":
        table = f"bench.t{os.getpid()}"
        ms.catalog.create_table(table, "id bigint")
    n = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    while time.time() < end:
        txn = ms.txns.open_txn()
        ms.txns.allocate_write_id(txn, table)
        ms.txns.commit_txn(txn)
        n += 1
    ms.close()
    return n


def ours_begin_write(url: str, seconds: float, start_at: float, table: str) -> int:
    """The same work through ``begin_write`` (open + allocate in one call), as the operators do."""
    from airflow_hive_acid.metastore import Metastore
    ms = Metastore(url)
    n = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    while time.time() < end:
        txn, _ = ms.txns.begin_write([table])
        ms.txns.commit_txn(txn)
        n += 1
    ms.close()
    return n


def raw_floor(url: str, seconds: float, start_at: float, table: str) -> int:
    from sqlalchemy import create_engine, text

    from airflow_hive_acid.metastore.db import normalize_url
    eng = create_engine(normalize_url(url), connect_args={"timeout": 60} if url.startswith("sqlite") else {})
    n = 0
    with eng.connect() as conn:
        while time.time() < start_at:
            time.sleep(0.001)
        end = start_at + seconds
        while time.time() < end:
            for _ in range(3):
                with conn.begin():
                    conn.execute(text("UPDATE bench_floor SET n = n + 1 WHERE id = :i"), {"i": os.getpid() % 64})
            n += 1
    eng.dispose()
    return n


def _run(fn, url: str, clients: int, seconds: float, table: str) -> float:
    ctx = mp.get_context("spawn")
    start_at = time.time() + 3.0 + 0.25 * clients  # all processes imported and connected
    with ctx.Pool(clients) as pool:
        counts = pool.starmap(fn, [(url, seconds, start_at, table)] * clients)
    return sum(counts) / seconds


# -- setup ----------------------------------------------------------------------------------------
def setup_backend(name: str, tmp: Path) -> tuple[str, callable]:
    from airflow_hive_acid.metastore import Metastore
    if name == "sqlite":
        url = f"sqlite:///{tmp / 'metastore.db'}"
        cleanup = lambda: None  # noqa: E731
    else:
        import psycopg
        schema = f"ha_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(PG, autocommit=True) as c:
            c.execute(f'CREATE SCHEMA "{schema}"')
        url = f"{PG}?options=-csearch_path%3D{schema}"

        def cleanup() -> None:
            with psycopg.connect(PG, autocommit=True) as c:
                c.execute(f'DROP SCHEMA "{schema}" CASCADE')
    ms = Metastore.initialize(url, warehouse=str(tmp / "warehouse"))
    ms.catalog.create_table("bench.t", "id bigint")
    from sqlalchemy import text
    with ms.store.write() as conn:
        conn.execute(text("CREATE TABLE bench_floor (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)"))
        for i in range(64):
            conn.execute(text("INSERT INTO bench_floor VALUES (:i, 0)"), {"i": i})
    ms.close()
    return url, cleanup


def setup_iceberg(url: str, tmp: Path, clients: int) -> str | None:
    try:
        from pyiceberg.catalog.sql import SqlCatalog
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField
    except ImportError:
        return None
    from airflow_hive_acid.metastore.db import normalize_url
    wh = tmp / "iceberg"
    wh.mkdir(exist_ok=True)
    cat = SqlCatalog("bench", uri=normalize_url(url), warehouse=f"file://{wh}")
    if ("bench",) not in cat.list_namespaces():
        cat.create_namespace("bench")
    return str(wh), cat, Schema(NestedField(1, "id", LongType(), required=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    rows = []
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td)
            url, cleanup = setup_backend(backend, tmp)
            try:
                ice = None if args.no_peers else setup_iceberg(url, tmp, max(clients))
                for n in clients:
                    row = {"backend": backend, "clients": n,
                           "hive_acid_txn_per_s": round(_run(ours, url, n, args.seconds, "bench.t"), 1),
                           "begin_write_txn_per_s": round(_run(ours_begin_write, url, n, args.seconds, "bench.t"), 1)}
                    if not args.no_peers:
                        row["raw_sql_floor_per_s"] = round(_run(raw_floor, url, n, args.seconds, ""), 1)
                        if ice:
                            wh, cat, schema = ice
                            # one table per client process so commits measure the catalog, not retries
                            rate = _iceberg_run(url, wh, cat, schema, n, args.seconds)
                            row["pyiceberg_commits_per_s"] = round(rate, 1)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
            finally:
                cleanup()
    _print_table(rows)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "metastore.json"
    out.write_text(json.dumps({"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": platform.platform(),
                               "cpus": os.cpu_count(), "seconds_per_cell": args.seconds, "rows": rows}, indent=2))
    print(f"\nwritten to {out}")


def _iceberg_run(url, wh, cat, schema, clients, seconds) -> float:
    ctx = mp.get_context("spawn")
    start_at = time.time() + 4.0 + 0.3 * clients
    with ctx.Pool(clients) as pool:
        # each pool worker loads table t<pid>; create them lazily by pid inside the worker
        counts = pool.starmap(_iceberg_worker, [(url, wh, seconds, start_at)] * clients)
    return sum(counts) / seconds


def _iceberg_worker(url: str, wh: str, seconds: float, start_at: float) -> int:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    from airflow_hive_acid.metastore.db import normalize_url
    cat = SqlCatalog("bench", uri=normalize_url(url), warehouse=f"file://{wh}")
    tbl = cat.create_table(("bench", f"t{os.getpid()}_{uuid.uuid4().hex[:6]}"),
                           Schema(NestedField(1, "id", LongType(), required=False)))
    n = 0
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + seconds
    while time.time() < end:
        with tbl.transaction() as tx:
            tx.set_properties(counter=str(n))
        n += 1
    return n


def _print_table(rows: list[dict]) -> None:
    cols = ["backend", "clients", "hive_acid_txn_per_s", "begin_write_txn_per_s", "raw_sql_floor_per_s",
            "pyiceberg_commits_per_s"]
    print("\n" + " | ".join(f"{c:>24}" for c in cols))
    print("-" * (27 * len(cols)))
    for r in rows:
        print(" | ".join(f"{str(r.get(c, '-')):>24}" for c in cols))


if __name__ == "__main__":
    main()
