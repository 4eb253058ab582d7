"""Every file this project writes faces the reference Java ORC reader (orc-core 2.3 and Hive's
ACID key-index parser, from pyspark's jars): timestamps before 1970 with fractions, years 0001
and 9999, char/varchar declared as such, decimals, NULLs everywhere, after every statement kind
and both compactions. ``test_every_file_the_suite_wrote_reads_in_java`` runs last and checks
every table file the whole test session wrote."""
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from javaorc import native_rows, problems, written_orc_files

from airflow_hive_acid.acid import bucket_codec, orcfile
from airflow_hive_acid.acid.bucketing import bucket_id
from airflow_hive_acid.acid.orcsplice import InsertEventColumns
from airflow_hive_acid.acid.reader import BucketGroup, DataFile, ReadRequest, read_bucket_group
from airflow_hive_acid.acid.schema import acid_hive_type
from airflow_hive_acid.acid.types import parse_columns, parse_type
from airflow_hive_acid.acid.writeids import ValidWriteIdList
from airflow_hive_acid.acid.writer import AcidWriteError, encode_acid_file, insert_events
from airflow_hive_acid.compactor import Compactor
from airflow_hive_acid.errors import JobFailed
from airflow_hive_acid.jobs.spec import Delete, Insert, Merge, Read, Update

pytestmark = pytest.mark.spark

D = dt.datetime
EDGE_TIMESTAMPS = [
    D(1965, 6, 1, 14, 11, 59, 123457),      # before 1970 with a fraction: negative nanos in pyarrow
    D(1965, 6, 1, 14, 11, 59, 500),         # ... a fraction below 1 ms (no second borrowed on read)
    D(1, 1, 1),                             # year 0001: beyond nanosecond Arrow timestamps
    D(1600, 2, 29, 12, 0, 0, 5),
    D(9999, 12, 31, 23, 59, 59, 999999),    # year 9999
    D(3255, 7, 4, 1, 2, 3, 456789),
    D(1969, 12, 31, 23, 59, 59),            # the last whole second before 1970
    D(1969, 12, 31, 23, 59, 58, 999999),    # the latest fraction before it that ORC can hold
    D(1970, 1, 1),
    D(2024, 2, 29, 23, 59, 59, 999999),
    None,
]
COLUMNS = ("id bigint, ts timestamp, c char(5), v varchar(8), d decimal(12,3), day date, "
           "tags array<timestamp>, attrs map<string,timestamp>, s struct<at:timestamp,note:varchar(4)>")


def _secs_nanos(v: D) -> list[int]:
    seconds = (v - D(1970, 1, 1)) // dt.timedelta(seconds=1)
    return [seconds, v.microsecond * 1000]


def edge_rows(n_copies: int = 1, timestamps: list[D | None] = EDGE_TIMESTAMPS) -> pa.Table:
    ts = timestamps * n_copies
    n = len(ts)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "ts": pa.array(ts, pa.timestamp("us")),
        "c": [None if i % 4 == 3 else ["ab", "", "é", "xyz  "][i % 4] for i in range(n)],
        "v": [None if i % 5 == 4 else ["abcd", "ü", "", "12345678"][i % 4] for i in range(n)],
        "d": pa.array([None if i % 3 == 2 else Decimal(i) / 8 - Decimal("5.125") for i in range(n)],
                      pa.decimal128(12, 3)),
        "day": pa.array([None if i % 6 == 5 else dt.date(1 + i * 997 % 9999, 1 + i % 12, 1) for i in range(n)]),
        "tags": pa.array([None if i % 7 == 6 else [t for t in ts[i:i + 2]] for i in range(n)],
                         pa.list_(pa.timestamp("us"))),
        "attrs": pa.array([None if i % 5 == 1 else [(f"k{i}", ts[i])] for i in range(n)],
                          pa.map_(pa.string(), pa.timestamp("us"))),
        "s": pa.array([None if i % 8 == 7 else {"at": ts[-1 - i % len(ts)], "note": "n"} for i in range(n)],
                      pa.struct([("at", pa.timestamp("us")), ("note", pa.string())])),
    })


def test_edge_values_written_as_java_reads_them(java_orc, tmp_path):
    cols = parse_columns(COLUMNS)
    rows = edge_rows()
    path = tmp_path / "bucket_00000"
    path.write_bytes(encode_acid_file(insert_events(rows, cols, 7, 0, 3), cols))
    [result] = java_orc.read([path])
    assert problems(result) == []
    assert result["schema"].endswith(",row:struct<id:bigint,ts:timestamp,c:char(5),v:varchar(8),d:decimal(12,3),"
                                     "day:date,tags:array<timestamp>,attrs:map<string,timestamp>,"
                                     "s:struct<at:timestamp,note:varchar(4)>>>")
    java_ts = [r[5][1] for r in result["values"]]
    assert java_ts == [None if v is None else _secs_nanos(v) for v in EDGE_TIMESTAMPS]
    assert [r[5][2] for r in result["values"]][:4] == ["ab", "", "é", None], "char read back (Java trims)"
    ts_stats = result["file_stats"][8]                              # row.ts
    assert (ts_stats["min"], ts_stats["max"]) == (_secs_nanos(D(1, 1, 1)), _secs_nanos(D(9999, 12, 31, 23, 59, 59, 999999)))
    # chars are stored padded to their length, as Hive's writer pads them
    assert native_rows(str(path), parse_type(result["schema"]))[0][0][5][2] == "ab   "


def test_many_stripes_statistics_and_key_index(java_orc, tmp_path):
    """Stripe statistics and the key index per stripe, on a file of several stripes that holds
    the edge values (so it goes through the exact writer) and one that does not (pyarrow)."""
    cols = parse_columns(COLUMNS)
    pyarrow_safe = [v for v in EDGE_TIMESTAMPS if v is None or v.year >= 1970 or not v.microsecond]
    for name, rows in (("exact", edge_rows(3000)), ("plain", edge_rows(3000, pyarrow_safe))):
        events = insert_events(rows, cols, 9, 2, 1)
        data = orcfile.write_orc_with_metadata(
            events, lambda stripes, e=events: orcfile.hive_acid_metadata(
                orcfile.hive_key_index(e.column(1), e.column(2), e.column(3), stripes), e.num_rows),
            orc_type=acid_hive_type(cols),
            stripe_size=16 * 1024, batch_size=256, compression_block_size=65536)
        path = tmp_path / name / "delta_0000009_0000009_0001" / "bucket_00002"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        [result] = java_orc.read([path])
        assert problems(result) == [], name
        assert len(result["stripes"]) > 1 and len(result["hive_key_index"]) == len(result["stripes"]), name


def test_spliced_insert_files_read_in_java(java_orc, tmp_path):
    """Insert files whose ACID columns are spliced into pyarrow's stripes (acid/orcsplice.py), over
    several stripes and each codec, with the row struct written by pyarrow or, from the first
    pre-1970 fraction on, by pyorc."""
    cols = parse_columns("id bigint, ts timestamp, v varchar(8), s struct<at:timestamp,note:varchar(4)>, x double")
    pyarrow_safe = [v for v in EDGE_TIMESTAMPS if v is None or v.year >= 1970 or not v.microsecond]

    def sample(timestamps: list) -> pa.Table:       # random doubles: stripes fill up
        rows = edge_rows(2000, timestamps).select(["id", "ts", "v", "s"])
        return rows.append_column("x", pa.array(np.random.default_rng(3).random(rows.num_rows)))

    events = InsertEventColumns(9, bucket_codec.encode_v1(2, 1))
    paths = []
    for codec, name, rows in [*((c, "plain", sample(pyarrow_safe))
                                for c in ("zlib", "zstd", "snappy", "lz4", "uncompressed")),
                              ("zlib", "exact", sample(EDGE_TIMESTAMPS))]:
        path = tmp_path / f"{codec}-{name}" / "delta_0000009_0000009_0001" / "bucket_00002"
        path.parent.mkdir(parents=True)
        writer = orcfile.OrcStreamWriter(acid_hive_type(cols), insert_events=events, compression=codec,
                                         stripe_size=16 * 1024, batch_size=256, compression_block_size=65536,
                                         spill_path=str(path))
        for start in range(0, rows.num_rows, 7000):
            part = insert_events(rows.slice(start, 7000), cols, 9, 2, 1)
            writer.write(part.select(["row"]))
        writer.finish_in_place(lambda stripes, n=rows.num_rows: orcfile.hive_acid_metadata(
            "".join(f"9,{events.bucket_property},{e};" for e in np.cumsum(stripes) - 1), n))
        paths.append(path)
    for path, result in zip(paths, java_orc.read(paths)):
        assert problems(result) == [], path
        assert len(result["stripes"]) > 1, path
        assert [r[3] for r in result["values"]] == list(range(len(result["values"]))), path


def test_unrepresentable_timestamp_is_refused(tmp_path):
    cols = parse_columns("id bigint, ts timestamp")
    rows = pa.table({"id": [1], "ts": pa.array([D(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us"))})
    with pytest.raises(orcfile.OrcFileError, match=r"column 'row.ts': timestamp 1969-12-31 23:59:59.999999000 .*ORC-763"):
        encode_acid_file(insert_events(rows, cols, 1, 0, 0), cols)


def test_char_and_varchar_lengths_are_enforced():
    cols = parse_columns("c char(3), v varchar(3)")
    ok = insert_events(pa.table({"c": ["a", "abc  ", None], "v": ["abc   ", "", None]}), cols, 1, 0, 0)
    assert ok.column("row").combine_chunks().field(0).to_pylist() == ["a  ", "abc", None]
    assert ok.column("row").combine_chunks().field(1).to_pylist() == ["abc", "", None]
    with pytest.raises(AcidWriteError, match=r"column 'v': value 'abcd' has 4 characters, more than varchar\(3\)"):
        insert_events(pa.table({"c": ["a"], "v": ["abcd"]}), cols, 1, 0, 0)
    with pytest.raises(AcidWriteError, match=r"column 'c': .* more than char\(3\)"):
        insert_events(pa.table({"c": ["añob"], "v": ["a"]}), cols, 1, 0, 0)


def test_reader_returns_years_0001_to_9999(tmp_path):
    """Our reader reads back what it wrote, beyond pyarrow's 1677-2262 (through pyorc), and the
    compactor's exact mode refuses to drop digits it cannot carry."""
    cols = parse_columns(COLUMNS)
    rows = edge_rows()
    path = tmp_path / "base_0000001" / "bucket_00000"
    path.parent.mkdir()
    path.write_bytes(encode_acid_file(insert_events(rows, cols, 1, 0, 0), cols, base=True))
    group = BucketGroup("", 0, row_files=[DataFile(str(path), path.stat().st_size, "base_0000001")])
    snap = ValidWriteIdList.parse("db.t:1:9223372036854775807::")
    got = pa.Table.from_batches(list(read_bucket_group(pafs.LocalFileSystem(), group, snap, ReadRequest(cols))))
    assert got.column("ts").to_pylist() == EDGE_TIMESTAMPS
    assert got.column("tags").to_pylist() == rows.column("tags").to_pylist()
    assert got.column("attrs").to_pylist() == rows.column("attrs").to_pylist()
    assert got.column("s").to_pylist() == rows.column("s").to_pylist()
    assert got.column("c").to_pylist()[:4] == ["ab   ", "     ", "é    ", None]
    with pytest.raises(Exception, match="outside 1677-2262|out of range"):
        list(read_bucket_group(pafs.LocalFileSystem(), group, snap, ReadRequest(cols, timestamp_unit="ns", exact=True)))


# -- through the Spark jobs: every statement kind and both compactions --------------------------
def _source(tmp_path: Path, name: str, table: pa.Table) -> dict:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(table, path)
    return {"path": str(path)}


def _read(runner, table, tmp_path) -> list[dict]:
    out = tmp_path / "read.jsonl"
    runner.read(table, Read.from_dict({"output": str(out)}))
    return sorted((json.loads(x) for x in out.read_text().splitlines()), key=lambda r: r["id"])


def test_statements_and_compactions_write_files_java_reads(runner, in_process, java_orc, tmp_path, warehouse):
    """INSERT, UPDATE, DELETE, MERGE, minor and major compaction of a table bucketed by a
    timestamp and holding every edge value; after each step the table reads as expected and
    every file in it passes the Java checks."""
    ms = runner.ms
    t = "db.edge"
    ms.catalog.create_table(t, COLUMNS, bucketed_by="ts", buckets=3)
    root = warehouse / "db.db" / "edge"
    rows = edge_rows(3)
    expect = {r["id"]: r for r in rows.to_pylist()}

    def check(step: str) -> list[dict]:
        got = _read(runner, t, tmp_path)
        assert [r["id"] for r in got] == sorted(expect), step
        for r in got:
            e = expect[r["id"]]
            assert (r["ts"], r["c"], r["v"]) == (None if e["ts"] is None else str(e["ts"]),
                                                 None if e["c"] is None else e["c"].rstrip().ljust(5),
                                                 e["v"]), (step, r["id"])
        files = written_orc_files(root)
        results = java_orc.read(files)
        assert results and [p for res in results for p in problems(res)] == [], step
        return results

    runner.run(Insert.from_dict({"source": _source(tmp_path, "all", rows)}), t)
    for res in check("insert"):
        # every row sits in the bucket Hive's hash gives its timestamp
        bucket = int(Path(res["path"]).name.split("_")[1])
        for event in res["values"]:
            ts = event[5][1]
            value = None if ts is None else D(1970, 1, 1) + dt.timedelta(seconds=ts[0], microseconds=ts[1] // 1000)
            assert bucket_id((value,), ["timestamp"], 3) == bucket, value
    runner.run(Update.from_dict({"set": {"v": "'upd'", "d": "d + 1"}, "where": "id % 3 = 0"}), t)
    expect = {i: {**r, "v": "upd"} if i % 3 == 0 else r for i, r in expect.items()}
    check("update")
    runner.run(Delete.from_dict({"where": "id % 4 = 1"}), t)
    expect = {i: r for i, r in expect.items() if i % 4 != 1}
    check("delete")
    changes = edge_rows().slice(0, 6).set_column(0, "id", pa.array([0, 2, 1000, 1001, 1002, 1003], pa.int64()))
    runner.run(Merge.from_dict({"source": _source(tmp_path, "chg", changes), "on": ["id"],
                            "clauses": ["WHEN MATCHED THEN UPDATE SET c = s.c", "WHEN NOT MATCHED THEN INSERT *"]}), t)
    for r in changes.to_pylist():
        expect[r["id"]] = {**expect[r["id"]], "c": r["c"]} if r["id"] in expect else r
    check("merge")
    c = Compactor(ms, in_process)
    assert c.run_worker(cq_id=c.compact(t, type="minor")["id"]).state == "ready for cleaning"
    check("minor compaction")
    assert c.run_worker(cq_id=c.compact(t, type="major")["id"]).state == "ready for cleaning"
    assert [r.state for r in c.clean(table=t)] == ["succeeded", "succeeded"]
    check("major compaction")
    assert {p.name.split("_")[0] for p in root.iterdir() if not p.name.startswith("_")} == {"base"}
    # a value ORC cannot hold fails the statement with a clear error and writes nothing
    bad = pa.table({**{n: rows.column(n).slice(0, 1) for n in rows.column_names},
                    "ts": pa.array([D(1969, 12, 31, 23, 59, 59, 999999)], pa.timestamp("us"))})
    with pytest.raises(JobFailed, match="ORC-763"):
        runner.run(Insert.from_dict({"source": _source(tmp_path, "bad", bad)}), t)
    assert len(_read(runner, t, tmp_path)) == len(expect)
    assert {p.name.split("_")[0] for p in root.iterdir() if not p.name.startswith("_")} == {"base"}
    assert not any((root / "_hive_acid_staging").glob("*")), "the failed statement's staging is removed"


def test_every_file_the_suite_wrote_reads_in_java(java_orc, tmp_path_factory):
    """Runs last (conftest orders it): every table data file any earlier test of this session
    wrote, through the Java reader and the checks of ``javaorc.problems``."""
    files = written_orc_files(tmp_path_factory.getbasetemp())
    assert files, "the tests before this one write table files"
    found = [p for res in java_orc.read(files) for p in problems(res)]
    assert found == [], f"{len(found)} problems in {len(files)} files, first: {found[:5]}"
