import pytest

from airflow_hive_acid.acid import bucket_codec as bc
from airflow_hive_acid.acid.names import (
    NameError_,
    base_name,
    bucket_file_name,
    delta_name,
    parse_base,
    parse_bucket_file,
    parse_delta,
    parse_dir,
    parse_original_file,
)


def test_parse_and_format_directory_names():
    assert parse_base("base_0000010").write_id == 10
    b = parse_base("base_0000009_v0000049")
    assert (b.write_id, b.visibility_txn_id) == (9, 49)
    assert parse_base("base_-9223372036854775808").write_id == -9223372036854775808
    d = parse_delta("delta_0000001_0000001_0000")
    assert (d.min_write_id, d.max_write_id, d.statement_id, d.is_delete) == (1, 1, 0, False)
    d = parse_delta("delete_delta_10000001_10000001_0000")
    assert (d.min_write_id, d.statement_id, d.is_delete) == (10000001, 0, True)
    d = parse_delta("delete_delta_0000004_0000004")
    assert d.statement_id == -1
    d = parse_delta("delta_0000001_0000004_v0000034")
    assert (d.max_write_id, d.statement_id, d.visibility_txn_id) == (4, -1, 34)
    d = parse_delta("delta_0000005_0000005_0002_v0000007")
    assert (d.statement_id, d.visibility_txn_id) == (2, 7)
    assert base_name(10) == "base_0000010" and base_name(9, 49) == "base_0000009_v0000049"
    assert delta_name(1, 1, 0) == "delta_0000001_0000001_0000"
    assert delta_name(1, 4, visibility_txn_id=34) == "delta_0000001_0000004_v0000034"
    assert delta_name(10000001, 10000001, 0, delete=True) == "delete_delta_10000001_10000001_0000"
    for name in ("base_0000009_v0000049", "delta_0000001_0000004_v0000034", "delete_delta_0000004_0000004",
                 "delta_0000005_0000005_0002_v0000007"):
        p = parse_dir(name)
        again = base_name(p.write_id, p.visibility_txn_id) if p.kind == "base" else delta_name(
            p.min_write_id, p.max_write_id, p.statement_id, p.visibility_txn_id, p.is_delete)
        assert again == name


@pytest.mark.parametrize("bad", ["base_", "base_x", "delta_1", "delta_2_1", "delta_1_2_x", "deltas_1_2",
                                 "base_1_v", "delta_1_1_0000_v", "Delta_1_1", "base_1 ", "../base_1"])
def test_bad_directory_names(bad):
    with pytest.raises(NameError_):
        parse_dir(bad)


def test_bucket_and_original_file_names():
    assert parse_bucket_file("bucket_00003") == 3 and parse_bucket_file("bucket_00003_1") == 3
    assert bucket_file_name(7) == "bucket_00007"
    with pytest.raises(NameError_):
        parse_bucket_file("bucket_00003_flush_length")
    assert parse_original_file("000002_0_copy_1").bucket_id == 2
    assert parse_original_file("000002_0_copy_1").copy == 1
    assert parse_original_file("bucket_00000") is None


def test_bucket_codec_v1():
    assert bc.encode_v1(0, 0) == 536870912
    assert bc.encode_v1(2, 0) == 537001984
    assert bc.encode_v1(1, 1) == 536936449
    assert bc.decode_bucket(537001984) == 2 and bc.decode_statement(536936449) == 1
    assert bc.decode_bucket(5) == 5  # V0: the value is the bucket
    with pytest.raises(bc.BucketCodecError):
        bc.encode_v1(4096)
    with pytest.raises(bc.BucketCodecError):
        bc.decode_bucket(0x40000000)
    import numpy as np
    arr = np.array([536870912, 537001984, 536936449, 7], dtype=np.int32)
    assert bc.decode_bucket_array(arr).tolist() == [0, 2, 1, 7]
