import pytest

from airflow_hive_acid.acid.writeids import (
    LONG_MAX,
    RangeResponse,
    SnapshotStringError,
    ValidTxnList,
    ValidWriteIdList,
)


def test_write_id_list_round_trip_of_corpus_string():
    s = "test_hcube_2.tbl1:3:9223372036854775807::"
    w = ValidWriteIdList.parse(s)
    assert w.table == "test_hcube_2.tbl1" and w.high_watermark == 3 and w.min_open is None
    assert w.to_string() == s
    assert all(w.is_write_id_valid(i) for i in (1, 2, 3)) and not w.is_write_id_valid(4)


def test_write_id_list_open_and_aborted():
    w = ValidWriteIdList.parse("db.t:10:4:4,8:6,7")
    assert w.open_ids == (4, 8) and w.aborted_ids == (6, 7) and w.min_open == 4
    assert [i for i in range(1, 12) if w.is_write_id_valid(i)] == [1, 2, 3, 5, 9, 10]
    assert w.is_write_id_aborted(6) and not w.is_write_id_aborted(4)
    assert w.is_valid_base(3) and not w.is_valid_base(4) and not w.is_valid_base(11)
    assert w.is_write_id_range_valid(1, 3) is RangeResponse.ALL
    assert w.is_write_id_range_valid(4, 4) is RangeResponse.NONE
    assert w.is_write_id_range_valid(3, 6) is RangeResponse.SOME
    assert w.is_write_id_range_valid(11, 12) is RangeResponse.NONE
    assert w.is_write_id_range_valid(10, 12) is RangeResponse.SOME
    assert w.is_write_id_range_aborted(6, 7) is RangeResponse.ALL
    assert w.is_write_id_range_aborted(5, 7) is RangeResponse.SOME
    assert w.is_write_id_range_aborted(1, 5) is RangeResponse.NONE
    assert ValidWriteIdList.parse(w.to_string()) == w


def test_compactor_and_cleaner_views():
    w = ValidWriteIdList.parse("db.t:10:5:5,9:3")
    c = w.for_compactor()
    assert c.high_watermark == 4 and c.aborted_ids == (3,) and c.open_ids == ()
    assert c.is_write_id_range_valid(1, 4) is RangeResponse.ALL
    assert c.is_write_id_range_valid(1, 5) is RangeResponse.NONE
    assert not c.is_write_id_valid(3)
    cl = w.for_cleaner(4)
    assert cl.high_watermark == 4 and cl.is_write_id_range_valid(1, 5) is RangeResponse.NONE
    assert cl.is_write_id_range_valid(1, 2) is RangeResponse.ALL


@pytest.mark.parametrize("bad", [
    "db.t:x:1::", "db.t:5", "db.t:5:1:7:", "db.t:5:MAX::", "db.t:5:9223372036854775807:2:2",
    "dbt:5:9223372036854775807::", "db.t:5:1:2:", "a:b:c:d:e:f", "",
    "db.t:99999999999999999999:1::",
])
def test_malformed_write_id_lists_are_rejected(bad):
    with pytest.raises(SnapshotStringError):
        ValidWriteIdList.parse(bad)


def test_txn_list_hive3_and_hive4_forms():
    t = ValidTxnList.parse("1915:9223372036854775807::1899,1907")
    assert t.high_watermark == 1915 and t.aborted_ids == (1899, 1907) and t.min_open_txn == LONG_MAX
    assert t.is_txn_valid(1900) and not t.is_txn_valid(1899) and t.is_txn_aborted(1907)
    assert not t.is_txn_valid(1916)
    r = ValidTxnList.parse("100:10:10-14,20:30-36,40")
    assert r.open_ids == (10, 11, 12, 13, 14, 20)
    assert r.aborted_ids == (30, 31, 32, 33, 34, 35, 36, 40)
    assert r.to_string() == "100:10:10-14,20:30-36,40"
    short = ValidTxnList(50, (1, 2, 3), (), min_open_txn=1)
    assert short.to_string() == "50:1:1,2,3:"
    assert ValidTxnList.parse("").is_txn_valid(10**15)


@pytest.mark.parametrize("bad", ["10", "x:1::", "10:1:12:", "10:1:5-3:", "1:2:3:4:5"])
def test_malformed_txn_lists_are_rejected(bad):
    with pytest.raises(SnapshotStringError):
        ValidTxnList.parse(bad)
