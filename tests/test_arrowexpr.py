"""The Arrow evaluation of MERGE expressions against Spark's own: every expression the subset
accepts gives Spark's values on rows full of NULLs and edge values, and what it refuses is left to
Spark."""
import datetime as dt
import math

import pyarrow as pa
import pytest

from airflow_hive_acid.spark import arrowexpr as ax

pytestmark = pytest.mark.spark

T = pa.struct([("i", pa.int32()), ("b", pa.int64()), ("d", pa.float64()), ("f", pa.float32()),
               ("x", pa.string()), ("day", pa.date32()), ("ts", pa.timestamp("us")), ("ok", pa.bool_()),
               ("m", pa.decimal128(10, 2)), ("y", pa.int8())])
ROWS = [
    {"i": 1, "b": 10, "d": 1.5, "f": 2.5, "x": "a", "day": dt.date(2024, 1, 1), "ts": dt.datetime(2024, 1, 1, 1),
     "ok": True, "m": 1, "y": 3},
    {"i": None, "b": None, "d": None, "f": None, "x": None, "day": None, "ts": None, "ok": None, "m": None, "y": None},
    {"i": -7, "b": 2**40, "d": -0.0, "f": 1e30, "x": "it's", "day": dt.date(1, 1, 1),
     "ts": dt.datetime(1969, 12, 31, 23, 59, 58, 999999), "ok": False, "m": -5, "y": -128},
    {"i": 2**31 - 1, "b": -1, "d": float("inf"), "f": -0.5, "x": "", "day": dt.date(9999, 12, 31),
     "ts": dt.datetime(9999, 1, 1), "ok": True, "m": 0, "y": 127},
]

SUPPORTED = [
    "t.i = s.i", "t.i <> s.i", "t.x != s.x", "t.b < s.i", "t.d >= s.f", "t.x <=> s.x", "t.i <=> 1",
    "t.x = 'a'", "s.x = 'it\\'s'", "t.i IS NULL", "s.x IS NOT NULL", "NOT (t.ok)", "t.ok AND s.ok", "t.ok OR s.ok",
    "NOT t.ok OR s.i > 0 AND t.b IS NOT NULL", "t.i IN (1, -7, NULL)", "t.x NOT IN ('a', 'b')", "t.i IN (1, 2)",
    "t.i + 1", "t.b - s.i", "t.i * 2", "-t.i", "t.d * 1.1", "t.d + t.f", "t.y + t.y", "t.y + 1",
    "coalesce(s.x, t.x)", "coalesce(t.i, s.i, 0)", "t.day = s.day", "t.ts > s.ts", "t.m = s.m",
    "t.d > 0.5", "t.i = NULL", "NULL", "TRUE AND t.ok", "t.b = 1099511627776L",
    "t.i BETWEEN 1 AND 2", "t.x NOT BETWEEN 'a' AND s.x", "t.i IN (1, 3000000000)", "t.d = s.d", "t.d IN (-0.0D)",
    "t.i + -2147483648", "t.b + t.d", "CASE WHEN t.ok THEN 1 END", "CASE WHEN t.i > 0 THEN t.x ELSE s.x END",
]
UNSUPPORTED = ["upper(t.x)", "t.i / 2", "t.m + 1", "t.i > 0.5", "t.x = 1", "t.day = '2024-01-01'", "t.x || 'a'",
               "t.i + t.f", "t.f = 1", "0.1 + 0.2", "t.i --1", "'\\U00000041'", "1e400", "x = 1", "t.s.inner",
               "CASE t.i WHEN 1 THEN 2 END", "'a' 'b'"]


SCHEMA = ("t struct<i:int,b:bigint,d:double,f:float,x:string,day:date,ts:timestamp_ntz,ok:boolean,"
          "m:decimal(10,2),y:tinyint>, s struct<i:int,b:bigint,d:double,f:float,x:string,day:date,"
          "ts:timestamp_ntz,ok:boolean,m:decimal(10,2),y:tinyint>")


@pytest.fixture(scope="module")
def data(spark):
    """The same rows as Arrow structs ``t`` and ``s`` and as a Spark DataFrame."""
    scope = ax.Scope({"t": pa.array(ROWS, T), "s": pa.array(ROWS[1:] + ROWS[:1], T)})
    rows = [{"t": t, "s": s} for t, s in zip(scope.structs["t"].to_pylist(), scope.structs["s"].to_pylist())]
    return scope, spark.createDataFrame(rows, SCHEMA)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@pytest.mark.parametrize("text", SUPPORTED)
def test_supported_expressions_give_sparks_values(data, text):
    from pyspark.errors import ArithmeticException
    scope, df = data
    node = ax.parse(text)
    ax.type_of(node, scope)
    try:
        want = [r[0] for r in df.selectExpr(text).collect()]
    except ArithmeticException:            # ANSI mode: overflow is an error; so it is here
        with pytest.raises(ArithmeticError):
            ax.evaluate(node, scope)
        return
    got = ax.evaluate(node, scope)
    got = [got.as_py()] * scope.length if isinstance(got, pa.Scalar) else got.to_pylist()
    assert all(_same(float(g) if isinstance(g, float) else g, float(w) if isinstance(w, float) else w)
               for g, w in zip(got, want)), (got, want)


@pytest.mark.parametrize("text", UNSUPPORTED)
def test_the_rest_is_left_to_spark(data, text):
    scope, _ = data
    with pytest.raises(ax.Unsupported):
        ax.type_of(ax.parse(text), scope)


def test_integer_overflow_is_an_error_as_in_ansi_spark(data):
    scope, _ = data
    with pytest.raises(ArithmeticError, match="overflow"):
        ax.evaluate(ax.parse("t.i + 1"), ax.Scope({"t": pa.array([{"i": 2**31 - 1}], pa.struct([("i", pa.int32())]))}))
