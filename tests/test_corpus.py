"""Conformance on real Hive- and Trino-written ACID files (tests/data/acid_corpus, see SOURCES.md),
read with the pure-pyarrow reader the Spark tasks use."""
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pytest
from conftest import CORPUS

from airflow_hive_acid.acid import fs as afs
from airflow_hive_acid.acid.reader import AcidReadError, KeySet, ReadRequest, bucket_groups, read_bucket_group
from airflow_hive_acid.acid.state import get_acid_state
from airflow_hive_acid.acid.types import parse_columns
from airflow_hive_acid.acid.writeids import ValidTxnList, ValidWriteIdList

TRINO = CORPUS / "trinodb_trino/plugin/trino-hive/src/test/resources"
HIVE = CORPUS / "apache_hive/data/files"
NATION = "n_nationkey int, n_name string, n_regionkey int, n_comment string"
ALL_TXNS = ValidTxnList.parse("20000000:9223372036854775807::")


def read(root: Path, columns: str, write_ids: str, want=None, row_id=False, key_filter=None) -> pa.Table:
    fs, path = afs.filesystem_for(str(root))
    wl = ValidWriteIdList.parse(write_ids)
    cols = parse_columns(columns)
    st = get_acid_state(afs.list_table(fs, path, []).partitions[""], wl, ALL_TXNS)
    batches = [b for g in bucket_groups("", path, st, wl) for b in
               read_bucket_group(fs, g, wl, ReadRequest(cols, want, row_id, key_filter))]
    return pa.Table.from_batches(batches) if batches else pa.table({})


def layout(tmp: Path, files: dict[str, Path]) -> Path:
    root = tmp / "t"
    for rel, src in files.items():
        dst = root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
    root.mkdir(exist_ok=True)
    return root


def test_nation_25k_with_both_delete_deltas_loses_keys_5_and_19(tmp_path):
    root = layout(tmp_path, {
        "delta_0000002_0000002_0000/bucket_00000": TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000",
        **{f"{d}/bucket_00000": TRINO / "nation_delete_deltas" / d / "bucket_00000"
           for d in ("delete_delta_0000003_0000003_0000", "delete_delta_0000004_0000004_0000")}})
    t = read(root, NATION, "db.nation:4:9223372036854775807::")
    keys = t.column("n_nationkey").to_pylist()
    assert t.num_rows == 23000 and set(range(25)) - set(keys) == {5, 19}
    assert all(keys.count(k) == 1000 for k in set(keys))
    # an older snapshot sees only the first delete; an aborted delete is ignored
    assert set(range(25)) - set(read(root, NATION, "db.nation:3:9223372036854775807::").column(
        "n_nationkey").to_pylist()) == {5}
    assert set(range(25)) - set(read(root, NATION, "db.nation:4:9223372036854775807::3").column(
        "n_nationkey").to_pylist()) == {19}
    rid = read(root, NATION, "db.nation:4:9223372036854775807::", ["n_nationkey"], True)
    first = rid.slice(0, 1).to_pylist()[0]["ROW__ID"]
    assert first == {"writeId": 2, "bucketId": 536870912, "rowId": 0}


def test_key_filtered_reads_keep_exactly_the_rows_of_their_keys(tmp_path):
    """A MERGE's target read decodes the key first and the other columns only for the rows it
    keeps: it gives the full read's rows of those keys, deletes and aborted writes applied,
    whether the key is an integer, a string, or the only column asked for."""
    root = layout(tmp_path, {
        "delta_0000002_0000002_0000/bucket_00000": TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000",
        **{f"{d}/bucket_00000": TRINO / "nation_delete_deltas" / d / "bucket_00000"
           for d in ("delete_delta_0000003_0000003_0000", "delete_delta_0000004_0000004_0000")}})
    assert po.ORCFile(root / "delta_0000002_0000002_0000/bucket_00000").nstripes > 1
    filters = [("n_nationkey", pa.array([0, 5, 7, 24])), ("n_nationkey", pa.array([], pa.int64())),
               ("n_nationkey", pa.array([99, None])), ("n_nationkey", pa.array([-2_000_000_000, 3, 24])),
               ("n_name", pa.array(["ALGERIA", "CHINA", "NOWHERE"]))]
    for write_ids in ("db.nation:4:9223372036854775807::", "db.nation:4:9223372036854775807::3"):
        for want in (None, ["n_nationkey", "n_comment"], ["n_nationkey"]):
            full = read(root, NATION, write_ids, want, True)
            for key, values in filters:
                if want is not None and key not in want:
                    continue
                got = read(root, NATION, write_ids, want, True, (key, KeySet(values)))
                expected = full.filter(pc.is_in(full.column(key), value_set=values.cast(full.column(key).type)))
                assert got.to_pylist() == expected.to_pylist(), (write_ids, want, key)
                assert got.num_rows == (1000 * sum(v in values.to_pylist() for v in full.column(key).unique().to_pylist()))


def test_a_key_set_matches_exactly_the_rows_arrow_finds_in_its_keys():
    """Both forms of a key set (a bitmap over a small integer span, an Arrow value set
    otherwise) agree with Arrow's is_in: NULLs on either side, the extremes of int64, other
    integer widths, strings."""
    rng = np.random.default_rng(3)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    rows = pa.array(np.concatenate([rng.integers(-500, 500, 5000), [lo, hi, 0, -1]]).tolist() + [None])
    cases = [
        (pa.array(rng.integers(-300, 300, 200).tolist() + [None]), True),
        (pa.array([lo, lo + 1, -1]), False),
        (pa.array([hi - 3, hi]), True),
        (pa.array([lo, hi]), False),
        (pa.array([7]), True),
        (pa.array([], pa.int64()), False),
        (pa.array([None, None], pa.int64()), False),
    ]
    for keys, bitmap in cases:
        ks = KeySet(keys)
        assert ks.is_bitmap == bitmap, keys
        expected = pc.fill_null(pc.is_in(rows, value_set=keys.drop_null()), False).to_numpy(zero_copy_only=False)
        assert ks.contains(rows).tolist() == expected.tolist(), keys
        assert ks.contains(pa.chunked_array([rows.slice(0, 10), rows.slice(10)])).tolist() == expected.tolist()
    small = pa.array([-128, 5, 127, None], pa.int8())
    assert KeySet(pa.array([5, 127], pa.int8())).contains(small).tolist() == [False, True, True, False]
    words = KeySet(pa.array(["b", None, "c"]))
    assert not words.is_bitmap and len(words) == 2
    assert words.contains(pa.array(["a", "b", None, "c"])).tolist() == [False, True, False, True]


def test_original_files_get_synthetic_row_ids_and_their_delete_applies(tmp_path):
    src = TRINO / "fullacidNationTableWithOriginalFiles"
    root = layout(tmp_path, {
        "000000_0": src / "000000_0",
        "delete_delta_10000001_10000001_0000/bucket_00000": src / "delete_delta_10000001_10000001_0000/bucket_00000"})
    before = read(root, NATION, "db.n:10000000:9223372036854775807::", row_id=True)
    assert before.num_rows == 25
    us = [r for r in before.to_pylist() if r["n_name"] == "UNITED STATES"][0]
    assert us["ROW__ID"] == {"writeId": 0, "bucketId": 536870912, "rowId": 24}
    after = read(root, NATION, "db.n:10000001:9223372036854775807::")
    assert after.num_rows == 24 and "UNITED STATES" not in after.column("n_name").to_pylist()


def test_original_copies_are_numbered_across_files_of_the_same_bucket(tmp_path):
    src = TRINO / "dummy_id_data_orc"
    names = ["000000_0", "000001_0", "000002_0", "000002_0_copy_1", "000002_0_copy_2"]
    root = layout(tmp_path, {**{n: src / n for n in names}, "delete_delta_10000001_10000001_0000/bucket_00000":
                             src / "delete_delta_10000001_10000001_0000/bucket_00000"})
    cols = "id int, data string, comment string"
    full = read(root, cols, "db.d:10000000:9223372036854775807::", row_id=True)
    assert full.num_rows == 20
    b2 = sorted(r["ROW__ID"]["rowId"] for r in full.to_pylist() if r["ROW__ID"]["bucketId"] == 537001984)
    assert b2 == list(range(12)), "bucket 2's three files are one sequence of row ids"
    gone = {(r["id"], r["data"]) for r in full.to_pylist() if r["ROW__ID"] == {
        "writeId": 0, "bucketId": 536870912, "rowId": 2}}
    after = read(root, cols, "db.d:10000001:9223372036854775807::")
    assert after.num_rows == 19
    assert not gone & {(r["id"], r["data"]) for r in after.to_pylist()}
    expected_third = po.ORCFile(str(src / "000000_0")).read().slice(2, 1).to_pylist()[0]
    assert gone == {(expected_third["id"], expected_third["data"])}


def test_delete_deltas_with_and_without_statement_id(tmp_path):
    src = TRINO / "fullacid_delete_delta_test"
    import numpy as np

    from airflow_hive_acid.acid.reader import DataFile, DeleteSet, _load_deletes
    fs, _ = afs.filesystem_for(str(src))
    d = DeleteSet()
    for name in ("delete_delta_0000004_0000004", "delete_delta_0000007_0000007_0000"):
        f = DataFile(str(src / name / "bucket_00000"), 0, name, False, True)
        _load_deletes(fs, f, 0, ValidWriteIdList.parse("db.t:7:9223372036854775807::"), d, parse_columns("col int"))
    gone = d.deleted_mask(np.array([2, 6, 2], dtype=np.int64), np.array([536870912] * 3, dtype=np.int32),
                          np.array([0, 0, 1], dtype=np.int64))
    assert gone.tolist() == [True, True, False]


def test_hive3_insert_deltas_of_test_hcube_read_with_hives_own_snapshot_strings():
    import json
    meta = json.loads((HIVE / "repl_dump/hive/test_hcube_2/tbl1/_metadata").read_text())
    wids, txns = meta["repl.valid.writeid.list"], meta["repl.valid.txnid.list"]
    assert ValidWriteIdList.parse(wids).to_string() == wids and ValidTxnList.parse(txns).to_string() == txns
    t = read(HIVE / "test_hcube_2.db/tbl1", "fld int", wids, row_id=True)
    assert sorted(r["ROW__ID"]["writeId"] for r in t.to_pylist()) == [1, 2, 3]
    assert read(HIVE / "test_hcube_2.db/tbl1", "fld int", "test_hcube_2.tbl1:3:2:2:").num_rows == 2


def test_acid_version_validation(tmp_path):
    src = TRINO / "acid_version_validation"
    ok = layout(tmp_path / "ok", {"delta_0000001_0000001_0000/bucket_00002": src / "acid_version_hive_3/00000_0"})
    assert read(ok, "a bigint", "db.t:1:9223372036854775807::").column("a").to_pylist() == [
        po.ORCFile(str(src / "acid_version_hive_3/00000_0")).read().column("row").to_pylist()[0]["a"]]
    bad = layout(tmp_path / "bad", {"delta_0000001_0000001_0000/bucket_00000":
                                    src / "no_orc_acid_version_in_metadata/00000_0"})
    with pytest.raises(AcidReadError, match="not an ACID data file"):
        read(bad, "id int, data string, comment string", "db.t:1:9223372036854775807::")


def test_acid_file_without_version_anywhere_is_rejected(tmp_path):
    from airflow_hive_acid.acid.writer import insert_events
    cols = parse_columns("id int")
    events = insert_events(pa.table({"id": [1, 2]}), cols, 1, 0, 0)
    path = tmp_path / "t" / "delta_0000001_0000001_0000" / "bucket_00000"
    path.parent.mkdir(parents=True)
    po.write_table(events, str(path))          # no footer metadata, no _orc_acid_version
    with pytest.raises(AcidReadError, match="no hive.acid.version"):
        read(tmp_path / "t", "id int", "db.t:1:9223372036854775807::")
    (path.parent / "_orc_acid_version").write_bytes(b"2")
    assert read(tmp_path / "t", "id int", "db.t:1:9223372036854775807::").num_rows == 2


def test_corrupt_orc_file_is_a_clear_error(tmp_path):
    root = layout(tmp_path, {"delta_0000002_0000002_0000/bucket_00000":
                             TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000"})
    f = root / "delta_0000002_0000002_0000/bucket_00000"
    f.write_bytes(f.read_bytes()[:4000])
    with pytest.raises(AcidReadError, match="corrupt or unreadable ORC file .*bucket_00000"):
        read(root, NATION, "db.n:2:9223372036854775807::")


def test_schema_mismatch_is_a_clear_error(tmp_path):
    from airflow_hive_acid.acid.schema import SchemaMismatchError
    root = layout(tmp_path, {"delta_0000002_0000002_0000/bucket_00000":
                             TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000"})
    with pytest.raises(SchemaMismatchError, match="n_name.*string in the file but bigint"):
        read(root, "n_nationkey int, n_name bigint", "db.n:2:9223372036854775807::")


def test_written_files_have_the_corpus_schema_and_metadata(tmp_path):
    import numpy as np

    from airflow_hive_acid.acid.writer import delete_events, encode_acid_file, insert_events
    cols = parse_columns(NATION)
    rows = pa.table({"n_nationkey": pa.array([1, 2], pa.int32()), "n_name": ["A", "B"],
                     "n_regionkey": pa.array([0, 0], pa.int32()), "n_comment": ["x", "y"]})
    ours = po.ORCFile(pa.BufferReader(encode_acid_file(insert_events(rows, cols, 5, 0, 0), cols)))
    hive = po.ORCFile(str(TRINO / "nationFile25kRowsSortedOnNationKey/bucket_00000"))
    assert ours.schema.remove_metadata().equals(hive.schema.remove_metadata())
    assert ours.metadata == {b"hive.acid.key.index": b"5,536870912,1;", b"hive.acid.stats": b"2,0,0",
                             b"hive.acid.version": b"2"}
    dels = po.ORCFile(pa.BufferReader(encode_acid_file(delete_events(
        np.array([2, 2]), np.array([536870912, 536870912]), np.array([7, 3]), cols, 9), cols)))
    hive_del = po.ORCFile(str(TRINO / "nation_delete_deltas/delete_delta_0000003_0000003_0000/bucket_00000"))
    assert dels.schema.remove_metadata().equals(hive_del.schema.remove_metadata())
    t = dels.read().to_pylist()
    assert [(r["operation"], r["rowId"], r["currentTransaction"], r["row"]) for r in t] == [(2, 3, 9, None), (2, 7, 9, None)]
    assert dels.metadata[b"hive.acid.stats"] == b"0,0,2"
