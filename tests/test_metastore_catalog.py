import json

import pytest

from airflow_hive_acid.acid.table import TableSpec
from airflow_hive_acid.jobs.spec import JobSpec, Read, SnapshotSpec
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


def test_the_catalog_gives_the_one_table_model_a_job_carries_unchanged(ms, warehouse):
    t = ms.catalog.create_table("sales.orders", "id bigint, name string", partitioned_by="ds string, hr int",
                                bucketed_by="id", buckets=4, properties={"orc.compress": "SNAPPY"})
    spec = t.to_spec()
    # the job spec's wire format: what jobs in flight and the spark-submit tests read
    wire = json.loads(JobSpec(table=spec, snapshot=SnapshotSpec("t", "w"), request=Read(output="/o")).to_json())
    assert wire["table"] == {"name": "sales.orders", "location": str(warehouse / "sales.db" / "orders"),
                             "columns": "id bigint, name string", "partition_columns": "ds string, hr int",
                             "bucket_columns": ["id"], "num_buckets": 4, "bucketing_version": 2,
                             "insert_only": False, "compression": "snappy"}
    assert JobSpec.from_json(json.dumps(wire)).table == spec and TableSpec.from_dict(wire["table"]) == spec
    assert [c.name for c in spec.all_columns] == ["id", "name", "ds", "hr"] and spec.partition_names == ["ds", "hr"]
    assert spec.bucket_types == ["bigint"]
    # one partition name, whether the spec is a user's text, a mapping or a row's values
    named = {spec.partition_name("ds=2024-01-01,hr=3"), spec.partition_name({"DS": "2024-01-01", "hr": 3}),
             spec.partition_name(["2024-01-01", "3"]), ms.catalog.partition_name(t, "ds=2024-01-01,hr=3")}
    assert named == {"ds=2024-01-01/hr=3"}
    with pytest.raises(InvalidInputError, match="names a column twice"):
        spec.partition_name({"ds": "a", "DS": "b", "hr": "1"})
    flat = ms.catalog.create_table("sales.flat", "id int")
    with pytest.raises(InvalidInputError, match="sales.flat is not partitioned"):
        ms.catalog.partition_name(flat, "ds=1")
    with pytest.raises(InvalidInputError, match="unknown column 'zz' of sales.orders"):
        spec.column("zz")


def test_alter_and_drop(ms):
    ms.catalog.create_table("db.t", "id int")
    t = ms.catalog.set_properties("db.t", {"compactorthreshold.hive.compactor.delta.pct.threshold": "0.5"})
    assert t.properties["compactorthreshold.hive.compactor.delta.pct.threshold"] == "0.5"
    with pytest.raises(InvalidInputError):
        ms.catalog.set_properties("db.t", {"transactional_properties": "insert_only"})
    ms.catalog.drop_table("db.t")
    with pytest.raises(NoSuchObjectError):
        ms.catalog.get_table("db.t")
