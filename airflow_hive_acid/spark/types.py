"""Hive types in Spark: the Spark type of a column and which Spark types a column may be
assigned from. (The Arrow type Spark exchanges for a column is ``HiveType.to_arrow()``.)"""
from __future__ import annotations

from pyspark.sql import types as T

from ..acid.types import Column, HiveType

_PRIMITIVE = {
    "boolean": T.BooleanType(), "tinyint": T.ByteType(), "smallint": T.ShortType(), "int": T.IntegerType(),
    "bigint": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(), "string": T.StringType(),
    "varchar": T.StringType(), "char": T.StringType(), "date": T.DateType(),
    # Hive timestamps have no time zone: TIMESTAMP_NTZ keeps wall-clock values as they are.
    "timestamp": T.TimestampNTZType(), "binary": T.BinaryType(),
}


def spark_type(t: HiveType) -> T.DataType:
    if t.name == "decimal":
        return T.DecimalType(*t.params)
    if t.name == "array":
        return T.ArrayType(spark_type(t.children[0]), True)
    if t.name == "map":
        return T.MapType(spark_type(t.children[0]), spark_type(t.children[1]), True)
    if t.name == "struct":
        return T.StructType([T.StructField(n, spark_type(c), True) for n, c in zip(t.field_names, t.children)])
    return _PRIMITIVE[t.name]


def spark_schema(columns: list[Column]) -> T.StructType:
    return T.StructType([T.StructField(c.name, spark_type(c.type), True) for c in columns])


ROW_ID_SPARK = T.StructType([T.StructField("writeId", T.LongType()), T.StructField("bucketId", T.IntegerType()),
                             T.StructField("rowId", T.LongType())])

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType, T.DecimalType)


def assignable(source: T.DataType, target: T.DataType) -> bool:
    """Can a value of ``source`` be stored in a ``target`` column without changing its kind?
    (Integers into any number, numbers into fractional numbers, strings into strings, dates and
    timestamps into timestamps; complex types element by element; NULL into anything.)"""
    if isinstance(source, T.NullType) or source == target:
        return True
    if isinstance(target, _INTEGRAL):
        return isinstance(source, _INTEGRAL)
    if isinstance(target, _FRACTIONAL):
        return isinstance(source, _INTEGRAL + _FRACTIONAL)
    if isinstance(target, (T.TimestampNTZType, T.TimestampType)):
        return isinstance(source, (T.TimestampNTZType, T.TimestampType, T.DateType))
    if isinstance(target, T.StringType):
        return isinstance(source, (T.StringType, T.CharType, T.VarcharType))
    if isinstance(target, T.ArrayType):
        return isinstance(source, T.ArrayType) and assignable(source.elementType, target.elementType)
    if isinstance(target, T.MapType):
        return (isinstance(source, T.MapType) and assignable(source.keyType, target.keyType)
                and assignable(source.valueType, target.valueType))
    if isinstance(target, T.StructType):
        return (isinstance(source, T.StructType) and len(source.fields) == len(target.fields)
                and all(assignable(s.dataType, t.dataType) for s, t in zip(source.fields, target.fields)))
    return type(source) is type(target)
