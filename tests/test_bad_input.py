"""Input a new user gets wrong, each refused with a message naming the problem and with nothing
written: no table files, no staging left behind."""
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hive_acid.acid.bucket_codec import BucketCodecError, decode_statement, encode_v1
from airflow_hive_acid.acid.writeids import SnapshotStringError, ValidCompactorWriteIdList, ValidWriteIdList
from airflow_hive_acid.errors import JobFailed
from airflow_hive_acid.jobs import Insert, Merge, SourceSpec, Update, parse_assignments
from airflow_hive_acid.metastore import TxnState


def table_files(location: Path) -> list[str]:
    """Every file under a table directory, staging included."""
    return sorted(str(p.relative_to(location)) for p in location.rglob("*") if p.is_file())


def cli(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "airflow_hive_acid.cli", "--metastore", url, *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_partition_spec_naming_a_column_twice_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    assert cli(url, "init", "--warehouse", str(tmp_path / "wh")).returncode == 0
    assert cli(url, "create-table", "db.t", "--columns", "id bigint", "--partitioned-by", "ds string").returncode == 0
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "rows.parquet")
    proc = cli(url, "insert", "db.t", "--source", str(tmp_path / "rows.parquet"), "--partition", "ds=x,ds=y")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "hive-acid: error: partition column 'ds' given twice in 'ds=x,ds=y'"
    assert not (tmp_path / "wh" / "db.db" / "t").exists() or table_files(tmp_path / "wh" / "db.db" / "t") == []


def test_parse_writeids_refuses_a_negative_high_watermark(tmp_path):
    with pytest.raises(SnapshotStringError, match="high watermark -1 is below 0"):
        ValidWriteIdList.parse("b.t:-1:0::")
    url = f"sqlite:///{tmp_path / 'm.db'}"
    proc = cli(url, "parse-writeids", "b.t:-1:0::")
    assert proc.returncode == 1 and "high watermark -1 is below 0" in proc.stderr
    assert ValidWriteIdList.parse("b.t:0:9223372036854775807::").high_watermark == 0


def test_compactor_write_id_list_drops_ids_above_its_high_watermark():
    wl = ValidCompactorWriteIdList(5, (), (3, 7, 9), table="b.t")
    assert wl.aborted_ids == (3,) and wl.exceptions == (3,)
    assert wl.to_string() == "b.t:5:9223372036854775807::3"
    again = ValidWriteIdList.parse(wl.to_string())          # its own parser takes it back
    assert (again.high_watermark, again.aborted_ids) == (5, (3,))


def test_bucket_codec_refuses_statement_ids_below_minus_one():
    assert decode_statement(encode_v1(1, -1)) == 0           # -1: no statement id, written as 0
    assert decode_statement(encode_v1(1, 7)) == 7
    for bad in (-2, -100):
        with pytest.raises(BucketCodecError, match=f"statement id {bad} out of range -1..4095"):
            encode_v1(1, bad)


def test_escaped_quote_in_a_string_literal_does_not_split_a_set_list():
    sets = parse_assignments(r"name = concat(name, ' it\'s'), amount = amount + 1")
    assert sets == {"name": r"concat(name, ' it\'s')", "amount": "amount + 1"}
    assert parse_assignments(r'a = "x\", y", b = 2') == {"a": r'"x\", y"', "b": "2"}


# -- through the Spark job -------------------------------------------------------------------------
@pytest.fixture
def events(runner):
    runner.ms.catalog.create_table("db.events", "id bigint, name string, amount bigint",
                                   partitioned_by="ds string", bucketed_by="id", buckets=2)
    return Path(runner.ms.catalog.get_table("db.events").location)


@pytest.mark.spark
@pytest.mark.parametrize("bad", ["../evil", "a/b"])
def test_insert_with_an_unsafe_partition_value_writes_nothing(runner, events, tmp_path, bad):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": list(range(100)), "name": ["n"] * 100, "amount": list(range(100)),
                             "ds": ["2024-01-01"] * 99 + [bad]}), path)
    with pytest.raises(JobFailed, match=f"partition value '{bad}' for 'ds' contains") as failed:
        runner.run(Insert(source=SourceSpec(path=str(path))), "db.events")
    # found inside a Spark task, wrapped by Spark: still bad input, so no retry is wasted on it
    assert failed.value.bad_input and failed.value.manifest.error_type == "PartitionSpecError"
    assert table_files(events) == []
    assert not events.exists() or not any(events.iterdir()), "not even an empty staging folder"
    assert not (events.parent / "evil").exists()
    [txn] = runner.ms.txns.show_transactions(include_committed=True)
    assert txn.state is TxnState.ABORTED


def test_a_jobs_staging_goes_and_the_staging_folder_only_if_nothing_else_is_there(tmp_path):
    import pyarrow.fs as pafs

    from airflow_hive_acid.acid import fs as afs
    local = pafs.LocalFileSystem()
    staging = tmp_path / afs.STAGING_DIR
    (staging / "job_a").mkdir(parents=True)
    (staging / "job_a" / "manifest.json").write_text("{}")
    (staging / "job_b").mkdir()                    # a concurrent job's folder
    (staging / "read_c.jsonl").write_text("{}")
    afs.remove_staged(local, str(staging / "job_a"))
    assert sorted(p.name for p in staging.iterdir()) == ["job_b", "read_c.jsonl"]
    afs.remove_staged(local, str(staging / "read_c.jsonl"))
    assert [p.name for p in staging.iterdir()] == ["job_b"], "the other job's folder stays, and the staging folder"
    afs.remove_staged(local, str(staging / "job_b"))
    assert not staging.exists()
    afs.remove_staged(local, str(staging / "job_b"))          # gone already, by another job: no error
    (tmp_path / "empty").mkdir()
    assert afs.remove_if_empty(local, str(tmp_path / "empty")) is True and not (tmp_path / "empty").exists()


@pytest.mark.spark
@pytest.mark.parametrize("fmt, magic", [("parquet", "PAR1"), ("orc", "ORC")])
def test_a_source_that_is_not_the_format_it_claims_says_so(runner, events, tmp_path, fmt, magic):
    path = tmp_path / f"rows.{fmt}"
    path.write_text("id,name,amount,ds\n1,a,2,2024-01-01\n")
    for request in (Insert(source=SourceSpec(path=str(path))),
                    Merge(source=SourceSpec(path=str(path)), on=["id"], clauses=["WHEN NOT MATCHED THEN INSERT *"])):
        with pytest.raises(JobFailed, match=f"rows.{fmt} is not a {fmt.upper()} file "
                                            f"\\(it does not start with {magic}\\)"):
            runner.run(request, "db.events")
    directory = tmp_path / "dir"                 # the Spark path (partition directories) checks too
    (directory / "ds=2024-01-01").mkdir(parents=True)
    (directory / "ds=2024-01-01" / f"part-0.{fmt}").write_text("not columnar")
    with pytest.raises(JobFailed, match=f"part-0.{fmt} is not a {fmt.upper()} file"):
        runner.run(Insert(source=SourceSpec(path=str(directory), format=fmt)), "db.events")
    assert table_files(events) == []


@pytest.mark.spark
def test_update_with_an_escaped_quote_and_a_second_assignment(runner, events, tmp_path):
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"], "amount": [10, 20], "ds": ["d", "d"]}), path)
    runner.run(Insert(source=SourceSpec(path=str(path))), "db.events")
    sets = parse_assignments(r"name = concat(name, ' it\'s'), amount = amount + 1")
    runner.run(Update(set=sets, where="id = 1"), "db.events")
    from airflow_hive_acid.jobs import Read
    got = {r["id"]: (r["name"], r["amount"]) for r in runner.read_rows("db.events", Read())}
    assert got == {1: ("a it's", 11), 2: ("b", 20)}
