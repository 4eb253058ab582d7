"""The ACID event schema of ORC data files (``OrcRecordUpdater``'s event struct).

``struct<operation:int, originalTransaction:bigint, bucket:int, rowId:bigint,
currentTransaction:bigint, row:struct<...table columns...>>`` — field names exactly Hive's, the
inner struct with the table's own column names.
"""
from __future__ import annotations

import pyarrow as pa

from .errors import AcidInputError
from .types import Column, HiveType

OPERATION = "operation"
ORIGINAL_TRANSACTION = "originalTransaction"
BUCKET = "bucket"
ROW_ID = "rowId"
CURRENT_TRANSACTION = "currentTransaction"
ROW = "row"
ACID_COLUMNS = (OPERATION, ORIGINAL_TRANSACTION, BUCKET, ROW_ID, CURRENT_TRANSACTION, ROW)

INSERT_OPERATION = 0
UPDATE_OPERATION = 1   # never written by Hive 3+ (split update); accepted when read
DELETE_OPERATION = 2

ROW_ID_FIELDS = (("writeId", pa.int64()), ("bucketId", pa.int32()), ("rowId", pa.int64()))


class SchemaMismatchError(AcidInputError):
    """A data file or input whose schema does not match the table's."""


def row_struct(columns: list[Column], timestamp_unit: str = "us") -> pa.StructType:
    return pa.struct([pa.field(c.name, c.type.to_arrow(timestamp_unit)) for c in columns])


def acid_schema(columns: list[Column], timestamp_unit: str = "us") -> pa.Schema:
    """The ORC schema Hive writes for a full-ACID table with these columns."""
    return pa.schema([
        pa.field(OPERATION, pa.int32()),
        pa.field(ORIGINAL_TRANSACTION, pa.int64()),
        pa.field(BUCKET, pa.int32()),
        pa.field(ROW_ID, pa.int64()),
        pa.field(CURRENT_TRANSACTION, pa.int64()),
        pa.field(ROW, row_struct(columns, timestamp_unit)),
    ])


def acid_hive_type(columns: list[Column]) -> HiveType:
    """The event struct as an ORC/Hive type, with the columns' declared types (``varchar(n)``,
    ``char(n)``), which the Arrow schema cannot carry."""
    row = HiveType("struct", children=tuple(c.type for c in columns), field_names=tuple(c.name for c in columns))
    ids = (HiveType("int"), HiveType("bigint"), HiveType("int"), HiveType("bigint"), HiveType("bigint"))
    return HiveType("struct", children=ids + (row,), field_names=ACID_COLUMNS)


def is_acid_schema(schema: pa.Schema) -> bool:
    """True for the six-field event schema (any row struct), as ``OrcInputFormat.isOriginal`` decides."""
    names = schema.names
    return tuple(names) == ACID_COLUMNS and pa.types.is_struct(schema.field(ROW).type)


def row_id_type() -> pa.StructType:
    """``ROW__ID`` as SQL exposes it: ``struct<writeId:bigint, bucketId:int, rowId:bigint>``."""
    return pa.struct([pa.field(n, t) for n, t in ROW_ID_FIELDS])
