import pytest

from airflow_hive_acid.metastore import AlreadyExistsError, InvalidInputError, NoSuchObjectError


def test_create_describe_list(ms, warehouse):
    t = ms.catalog.create_table("Sales.Orders", "id bigint, amount decimal(10,2), name string",
                                partitioned_by="ds string", bucketed_by="id", buckets=4,
                                properties={"NO_AUTO_COMPACTION": "true",
                                            "compactorthreshold.hive.compactor.delta.num.threshold": "4"})
    assert t.qualified_name == "sales.orders"
    assert t.location == str(warehouse / "sales.db" / "orders")
    assert [c.name for c in t.partition_columns] == ["ds"] and t.bucket_columns == ["id"] and t.num_buckets == 4
    assert t.properties["no_auto_compaction"] == "true" and t.properties["transactional"] == "true"
    assert t.bucketing_version == 2 and not t.is_insert_only
    again = ms.catalog.get_table("sales.orders")
    assert again == t
    assert [x.qualified_name for x in ms.catalog.list_tables()] == ["sales.orders"]
    with pytest.raises(AlreadyExistsError):
        ms.catalog.create_table("sales.orders", "id int")
    assert ms.catalog.create_table("sales.orders", "id int", if_not_exists=True) == t
    mm = ms.catalog.create_table("sales.events", "e string", location=str(warehouse / "elsewhere"),
                                 properties={"transactional_properties": "insert_only"})
    assert mm.is_insert_only and mm.location == str(warehouse / "elsewhere")


@pytest.mark.parametrize("kwargs, match", [
    ({"qualified": "nodot", "columns": "a int"}, "DB.TABLE"),
    ({"qualified": "a.b;drop", "columns": "a int"}, "bad table name"),
    ({"qualified": "a.b", "columns": "a int, a string"}, "duplicate"),
    ({"qualified": "a.b", "columns": "a int", "partitioned_by": "a string"}, "must not also be"),
    ({"qualified": "a.b", "columns": "a int", "bucketed_by": "zz", "buckets": 2}, "not a column"),
    ({"qualified": "a.b", "columns": "a int", "bucketed_by": "a", "buckets": 0}, "buckets"),
    ({"qualified": "a.b", "columns": "a int", "properties": {"transactional": "false"}}, "transactional"),
    ({"qualified": "a.b", "columns": "a int", "properties": {"compactorthreshold.bogus": "1"}}, "unknown compactor"),
    ({"qualified": "a.b", "columns": "a int", "properties": {"bad key!": "1"}}, "property name"),
    ({"qualified": "a.b", "columns": "a unknowntype"}, "unknown type"),
])
def test_create_table_validation(ms, kwargs, match):
    kwargs = dict(kwargs)
    q = kwargs.pop("qualified")
    with pytest.raises(InvalidInputError, match=match):
        ms.catalog.create_table(q, kwargs.pop("columns"), **kwargs)


def test_unknown_table_and_partition_specs(ms):
    with pytest.raises(NoSuchObjectError, match="unknown table db.nope"):
        ms.catalog.get_table("db.nope")
    t = ms.catalog.create_table("db.p", "id int", partitioned_by="ds string, hr int")
    assert ms.catalog.partition_name(t, "ds=2024-01-01,hr=3") == "ds=2024-01-01/hr=3"
    assert ms.catalog.partition_name(t, {"ds": "2024-01-01", "hr": 3}) == "ds=2024-01-01/hr=3"
    for bad in ["ds=../x,hr=1", "ds=a/b,hr=1", "ds=1", "hr=1,ds=2,zz=3", "garbage"]:
        with pytest.raises(InvalidInputError):
            ms.catalog.partition_name(t, bad)


def test_alter_and_drop(ms):
    ms.catalog.create_table("db.t", "id int")
    t = ms.catalog.set_properties("db.t", {"compactorthreshold.hive.compactor.delta.pct.threshold": "0.5"})
    assert t.properties["compactorthreshold.hive.compactor.delta.pct.threshold"] == "0.5"
    with pytest.raises(InvalidInputError):
        ms.catalog.set_properties("db.t", {"transactional_properties": "insert_only"})
    ms.catalog.drop_table("db.t")
    with pytest.raises(NoSuchObjectError):
        ms.catalog.get_table("db.t")
