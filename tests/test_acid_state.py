"""AcidState against Hive's getAcidState rules (docs/format.md §3)."""
import pytest

from airflow_hive_acid.acid.state import DirEntry, NotEnoughHistoryError, get_acid_state
from airflow_hive_acid.acid.writeids import ValidTxnList, ValidWriteIdList


def d(name, size=100, metadata_format=None):
    return DirEntry(name, True, children=(DirEntry("bucket_00000", False, size),), metadata_format=metadata_format)


def f(name, size=100):
    return DirEntry(name, False, size)


ALL_VALID_TXNS = ValidTxnList.parse("1000:9223372036854775807::")


def state(children, wids, txns=ALL_VALID_TXNS):
    return get_acid_state(children, ValidWriteIdList.parse(wids), txns)


def test_deltas_only_sorted_and_twins_kept():
    s = state([d("delta_0000001_0000001_0000"), d("delta_0000002_0000002_0000"),
               d("delete_delta_0000002_0000002_0000"), d("delta_0000003_0000003_0000")], "db.t:3:9223372036854775807::")
    assert s.base is None
    assert [x.parsed.name for x in s.deltas] == ["delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
                                                 "delta_0000003_0000003_0000"]
    assert [x.parsed.name for x in s.delete_deltas] == ["delete_delta_0000002_0000002_0000"]
    assert s.obsolete == []


def test_base_makes_older_deltas_and_originals_obsolete():
    s = state([f("000000_0"), d("base_0000005"), d("delta_0000003_0000003_0000"), d("delta_0000006_0000006_0000"),
               d("delete_delta_0000004_0000004_0000")], "db.t:6:9223372036854775807::")
    assert s.base.parsed.write_id == 5
    assert [x.parsed.name for x in s.deltas] == ["delta_0000006_0000006_0000"]
    assert set(s.obsolete) == {"000000_0", "delta_0000003_0000003_0000", "delete_delta_0000004_0000004_0000"}


def test_minor_compacted_delta_covers_its_parts():
    s = state([d("delta_0000001_0000001_0000"), d("delta_0000002_0000002_0000"),
               d("delta_0000001_0000002_v0000010"), d("delete_delta_0000001_0000002_v0000010"),
               d("delete_delta_0000002_0000002_0000")], "db.t:2:9223372036854775807::")
    assert [x.parsed.name for x in s.deltas] == ["delta_0000001_0000002_v0000010"]
    assert [x.parsed.name for x in s.delete_deltas] == ["delete_delta_0000001_0000002_v0000010"]
    assert set(s.obsolete) == {"delta_0000001_0000001_0000", "delta_0000002_0000002_0000",
                               "delete_delta_0000002_0000002_0000"}


def test_open_and_aborted_write_ids():
    s = state([d("delta_0000001_0000001_0000"), d("delta_0000002_0000002_0000"), d("delta_0000003_0000003_0000"),
               d("delta_0000004_0000004_0000")], "db.t:4:2:2:3")
    assert [x.parsed.name for x in s.deltas] == ["delta_0000001_0000001_0000", "delta_0000004_0000004_0000"]
    assert s.aborted == ["delta_0000003_0000003_0000"] and s.aborted_write_ids == {3}
    assert "not committed" in s.skipped["delta_0000002_0000002_0000"]
    assert "aborted" in s.skipped["delta_0000003_0000003_0000"]


def test_streaming_delta_with_some_aborted_ids_is_read_and_flagged():
    s = state([d("delta_0000001_0000005")], "db.t:5:9223372036854775807::3")
    assert [x.parsed.name for x in s.deltas] == ["delta_0000001_0000005"] and s.has_uncompacted_aborts


def test_compactor_output_invisible_until_its_txn_commits():
    children = [d("delta_0000001_0000001_0000"), d("delta_0000002_0000002_0000"), d("base_0000002_v0000050")]
    wids = "db.t:2:9223372036854775807::"
    open_txn = ValidTxnList.parse("60:50:50:")
    s = state(children, wids, open_txn)
    assert s.base is None and len(s.deltas) == 2 and "not committed" in s.skipped["base_0000002_v0000050"]
    s = state(children, wids, ValidTxnList.parse("60:9223372036854775807::"))
    assert s.base.parsed.name == "base_0000002_v0000050" and s.deltas == []
    s = state(children, wids, ValidTxnList.parse("60:9223372036854775807::50"))
    assert s.base is None and "base_0000002_v0000050" in s.aborted


def test_aborted_insert_overwrite_base_is_ignored():
    s = state([d("delta_0000001_0000001_0000"), d("base_0000002")], "db.t:2:9223372036854775807::2")
    assert s.base is None and s.aborted == ["base_0000002"] and len(s.deltas) == 1


def test_open_insert_overwrite_base_is_not_read_hive_29601():
    # The write id of the base is the lowest open one: Hive's old shortcut would pick it.
    s = state([d("delta_0000001_0000001_0000"), d("base_0000002")], "db.t:2:2:2:")
    assert s.base is None and [x.parsed.name for x in s.deltas] == ["delta_0000001_0000001_0000"]


def test_compacted_base_needs_no_open_id_below():
    children = [d("delta_0000001_0000001_0000"), d("base_0000003_v0000009"), d("delta_0000002_0000002_0000")]
    with pytest.raises(NotEnoughHistoryError):
        state(children, "db.t:3:2:2:")


def test_multi_statement_deltas_of_one_txn():
    s = state([d("delta_0000001_0000001_0000"), d("delta_0000001_0000001_0001"),
               d("delete_delta_0000001_0000001_0001")], "db.t:1:9223372036854775807::")
    assert len(s.deltas) == 2 and len(s.delete_deltas) == 1 and s.obsolete == []


def test_original_files_sorted_when_no_base_and_junk_skipped():
    sub = DirEntry("HIVE_UNION_SUBDIR_1", True, children=(f("000000_0"),))
    s = state([f("000001_0"), f("000000_0"), f("000000_0_copy_1"), sub, f("_SUCCESS"), f(".hidden"),
               f("empty", 0), d("not_a_delta_x")], "db.t:0:9223372036854775807::")
    assert [p for p, _ in s.original_files] == ["000000_0", "000000_0_copy_1", "000001_0",
                                                "HIVE_UNION_SUBDIR_1/000000_0", "not_a_delta_x/bucket_00000"]
