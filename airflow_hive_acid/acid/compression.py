"""A table's ORC codec: Hive's ``orc.compress`` table property (no Arrow needed to read it)."""
from __future__ import annotations

from collections.abc import Mapping

from .errors import AcidInputError

ORC_COMPRESS_PROPERTY = "orc.compress"
# ZSTD when unset: smaller files than ZLIB (Hive's default) and about twice as fast to write;
# every reader of Hive 4 tables (ORC >= 1.6: Hive 4, Trino, Spark) reads it. Hive 3.1 readers
# need ``orc.compress=ZLIB`` (they cannot read Hive 4's compacted ``_v`` directories either).
DEFAULT_TABLE_COMPRESSION = "ZSTD"
TABLE_COMPRESSIONS = {"ZLIB": "zlib", "ZSTD": "zstd", "SNAPPY": "snappy", "LZ4": "lz4", "NONE": "uncompressed"}


class CompressionError(AcidInputError):
    """An ``orc.compress`` value no writer here knows."""


def table_compression(properties: Mapping[str, str]) -> str:
    """The pyarrow codec name for a table's ``orc.compress`` property (ZSTD if unset)."""
    value = str(properties.get(ORC_COMPRESS_PROPERTY, DEFAULT_TABLE_COMPRESSION)).upper()
    if value not in TABLE_COMPRESSIONS:
        raise CompressionError(f"{ORC_COMPRESS_PROPERTY} must be one of {', '.join(TABLE_COMPRESSIONS)}, "
                               f"not {value!r}")
    return TABLE_COMPRESSIONS[value]
