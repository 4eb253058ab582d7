import pyarrow as pa
import pytest

from airflow_hive_acid.acid.partitions import (
    PartitionSpecError,
    make_part_name,
    parse_part_name,
    parse_spec_text,
)
from airflow_hive_acid.acid.schema import acid_schema, is_acid_schema
from airflow_hive_acid.acid.types import TypeParseError, parse_columns, parse_type


def test_parse_types_round_trip():
    for text in ["bigint", "decimal(10,2)", "varchar(20)", "char(3)", "array<string>",
                 "map<string,array<int>>", "struct<a:int,b:struct<c:timestamp>>", "date", "binary"]:
        assert str(parse_type(text)) == text
    assert str(parse_type("INTEGER")) == "int"
    assert str(parse_type("decimal")) == "decimal(10,0)"
    assert parse_type("decimal(38,18)").to_arrow() == pa.decimal128(38, 18)


@pytest.mark.parametrize("bad", ["bigintt", "decimal(40,2)", "varchar", "array<>", "map<array<int>,int>",
                                 "struct<a int>", "int)", "varchar(0)", "decimal(5,6)"])
def test_bad_types(bad):
    with pytest.raises(TypeParseError):
        parse_type(bad)


def test_columns():
    cols = parse_columns("id bigint, Name string, tags array<string>, amount decimal(12, 2)")
    assert [c.name for c in cols] == ["id", "name", "tags", "amount"]
    with pytest.raises(TypeParseError, match="duplicate"):
        parse_columns("a int, A string")
    with pytest.raises(TypeParseError, match="bad column name"):
        parse_columns("1a int")
    with pytest.raises(TypeParseError):
        parse_columns("a int; drop table x")


def test_acid_schema_matches_hive_layout():
    s = acid_schema(parse_columns("n_nationkey int, n_name string"))
    assert s.names == ["operation", "originalTransaction", "bucket", "rowId", "currentTransaction", "row"]
    assert [str(t) for t in s.types[:5]] == ["int32", "int64", "int32", "int64", "int64"]
    assert is_acid_schema(s)


def test_partition_names_escape_and_refuse_unsafe_values():
    assert make_part_name(["ds", "hr"], ["2024-01-01", "03"]) == "ds=2024-01-01/hr=03"
    name = make_part_name(["ts"], ["2024-01-01 10:00:00"])
    assert name == "ts=2024-01-01 10%3A00%3A00"
    assert parse_part_name(name) == {"ts": "2024-01-01 10:00:00"}
    assert parse_spec_text("ds=2024-01-01, hr=03", ["ds", "hr"]) == "ds=2024-01-01/hr=03"
    for bad in ["a/b", "..", "x/../y", "", "a\nb", "..\\x"]:
        with pytest.raises(PartitionSpecError):
            make_part_name(["ds"], [bad])
    with pytest.raises(PartitionSpecError, match="missing"):
        make_part_name(["ds", "hr"], {"ds": "1"})
    with pytest.raises(PartitionSpecError):
        parse_part_name("ds")
