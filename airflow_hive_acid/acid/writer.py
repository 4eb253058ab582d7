"""Writing ACID data files with pyarrow: insert events, delete events, and the footer metadata
Hive writes (``hive.acid.key.index``, ``hive.acid.stats``, ``hive.acid.version``).

One file holds one bucket of one statement: rows sorted by (originalTransaction, bucket,
rowId), rowId counting from 0 per file, bucket property = BucketCodec V1 (bucket, statement).
Delete events carry the deleted row's ROW__ID, the deleting write id, and a NULL row of the
table's full row type. Insert-only tables get plain files of the table columns instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from . import bucket_codec
from .compression import DEFAULT_TABLE_COMPRESSION, TABLE_COMPRESSIONS
from .errors import AcidInputError
from .fs import open_output, write_bytes
from .orcfile import (
    HIVE_DELTA_STRIPE_SIZE,
    ItemsFn,
    OrcStreamWriter,
    hive_acid_metadata,
    hive_key_index,
    write_orc_with_metadata,
)
from .orcsplice import InsertEventColumns
from .schema import DELETE_OPERATION, INSERT_OPERATION, acid_hive_type, acid_schema, row_struct
from .types import Column, HiveType

DEFAULT_BASE_STRIPE_SIZE = 64 * 1024 * 1024
DEFAULT_CODEC = TABLE_COMPRESSIONS[DEFAULT_TABLE_COMPRESSION]


class AcidWriteError(AcidInputError):
    """Rows that cannot be written as asked (wrong columns, bad ids)."""


@dataclass(frozen=True)
class WrittenFile:
    path: str
    rows: int
    bytes: int


def conform_rows(rows: pa.Table | pa.RecordBatch, columns: list[Column]) -> list[pa.Array]:
    """The table's columns from ``rows`` (by name, case-insensitive), cast to the table types and
    conformed (:func:`conform_values`); a missing or extra column, or a value that does not
    fit, is an error naming it."""
    names = {n.lower(): n for n in rows.schema.names}
    missing = [c.name for c in columns if c.name not in names]
    if missing:
        raise AcidWriteError(f"rows lack table columns {missing} (have {rows.schema.names})")
    extra = sorted(set(names) - {c.name for c in columns})
    if extra:
        raise AcidWriteError(f"rows have columns {extra} that the table does not have")
    out = []
    for c in columns:
        col = rows.column(names[c.name])
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        target = c.type.to_arrow()
        if not col.type.equals(target):
            try:
                col = col.cast(target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise AcidWriteError(f"column {c.name!r}: cannot store {col.type} as {c.type}: {exc}") from None
        out.append(conform_values(col, c.type, c.name))
    return out


def conform_values(arr: pa.Array, t: HiveType, name: str) -> pa.Array:
    """Values as Hive stores them: ``varchar(n)``/``char(n)`` at most n characters, chars
    padded with spaces to n (trailing spaces beyond n are dropped, as Spark does; any other
    character beyond n is an error where Hive would cut silently), and no value under a NULL
    struct (the ORC writer would count it in the column statistics)."""
    if t.name in ("varchar", "char"):
        n = t.params[0]
        over = pc.greater(pc.utf8_length(arr), n)
        if pc.any(over).as_py():
            too_long = pc.and_(over, pc.greater(pc.utf8_length(pc.utf8_rtrim(arr, characters=" ")), n))
            if pc.any(too_long).as_py():
                value = arr.filter(pc.fill_null(too_long, False))[0].as_py()
                raise AcidWriteError(f"column {name!r}: value {value[:60]!r}{'...' if len(value) > 60 else ''} "
                                     f"has {len(value.rstrip(' '))} characters, more than {t}")
            arr = pc.if_else(over, pc.utf8_slice_codeunits(arr, 0, n), arr)
        return pc.utf8_rpad(arr, n, " ") if t.name == "char" else arr
    if not any(x.name in ("varchar", "char", "struct") for x in t.walk()):
        return arr
    mask = pc.invert(arr.is_valid()) if arr.null_count else None
    if t.name == "struct":
        children = [conform_values(child, ct, f"{name}.{fn}")     # flatten(): NULL under a NULL struct
                    for child, fn, ct in zip(arr.flatten(), t.field_names, t.children)]
        return pa.StructArray.from_arrays(children, fields=list(arr.type), mask=mask)
    if t.name == "array":
        values = conform_values(arr.values, t.children[0], f"{name}[]")
        return pa.ListArray.from_arrays(arr.offsets, values, type=arr.type, mask=mask)
    keys = conform_values(arr.keys, t.children[0], f"{name}.key")
    items = conform_values(arr.items, t.children[1], f"{name}.value")
    return pa.MapArray.from_arrays(arr.offsets, keys, items, type=arr.type, mask=mask)


def insert_events(rows: pa.Table | pa.RecordBatch, columns: list[Column], write_id: int, bucket: int,
                  statement_id: int, first_row_id: int = 0) -> pa.Table:
    """Insert events for ``rows`` (in this order): operation 0, ROW__ID (write id, bucket
    property, first_row_id, first_row_id + 1, ...), currentTransaction = write id."""
    acid = InsertEventColumns(write_id, bucket_codec.encode_v1(bucket, statement_id))
    return pa.Table.from_arrays([*acid.arrays(first_row_id, rows.num_rows), row_struct_array(rows, columns)],
                                schema=acid_schema(columns))


def row_struct_array(rows: pa.Table | pa.RecordBatch, columns: list[Column]) -> pa.StructArray:
    """The ``row`` field of ``rows``' insert events (:func:`conform_rows`)."""
    return pa.StructArray.from_arrays(conform_rows(rows, columns), fields=list(row_struct(columns)))


def delete_events(orig_txn: np.ndarray, bucket_prop: np.ndarray, row_id: np.ndarray, columns: list[Column],
                  write_id: int) -> pa.Table:
    """Delete events for the given ROW__IDs, sorted as Hive requires, with a NULL row."""
    order = np.lexsort((row_id, bucket_prop, orig_txn))
    n = len(order)
    if n > 1:
        keys = np.stack([orig_txn[order], bucket_prop[order].astype(np.int64), row_id[order]])
        same = ~np.any(np.diff(keys, axis=1) != 0, axis=0)
        if same.any():
            w, b, r = keys[:, int(np.argmax(same))]
            raise AcidWriteError(
                f"cardinality violation: the row with ROW__ID (writeId={w}, bucketId={b}, rowId={r}) would be "
                "changed twice by one statement (in a MERGE: a target row matched by more than one source row)")
    rtype = row_struct(columns)
    null_row = pa.array([None] * n, type=rtype) if n else pa.array([], type=rtype)
    return pa.Table.from_arrays([
        pa.array(np.full(n, DELETE_OPERATION, dtype=np.int32)),
        pa.array(orig_txn[order].astype(np.int64)),
        pa.array(bucket_prop[order].astype(np.int32)),
        pa.array(row_id[order].astype(np.int64)),
        pa.array(np.full(n, write_id, dtype=np.int64)),
        null_row,
    ], schema=acid_schema(columns))


def compacted_events(operation: int, orig_txn: np.ndarray, bucket_prop: np.ndarray, row_id: np.ndarray,
                     current_txn: np.ndarray, rows: list[pa.Array] | None, columns: list[Column],
                     timestamp_unit: str = "us") -> pa.Table:
    """Events that keep their ROW__IDs, as the compactor copies them (already sorted by the
    caller): insert events with their row values (timestamps in ``timestamp_unit``), or delete
    events (``rows=None``) with a NULL row of the table's row type."""
    n = len(row_id)
    rtype = row_struct(columns, timestamp_unit)
    if rows is None:
        row = pa.array([None] * n, type=rtype) if n else pa.array([], type=rtype)
    else:
        row = pa.StructArray.from_arrays(rows, fields=list(rtype))
    return pa.Table.from_arrays([
        pa.array(np.full(n, operation, dtype=np.int32)),
        pa.array(np.asarray(orig_txn, dtype=np.int64)),
        pa.array(np.asarray(bucket_prop, dtype=np.int32)),
        pa.array(np.asarray(row_id, dtype=np.int64)),
        pa.array(np.asarray(current_txn, dtype=np.int64)),
        row,
    ], schema=acid_schema(columns, timestamp_unit))


def encode_acid_file(events: pa.Table, columns: list[Column], *, base: bool = False,
                     compression: str = DEFAULT_CODEC) -> bytes:
    """ORC bytes of ACID events with Hive's footer metadata and the columns' declared types;
    deltas use Hive's smaller stripes."""
    op = events.column(0).to_numpy()
    inserts = int(np.count_nonzero(op == INSERT_OPERATION))
    deletes = int(np.count_nonzero(op == DELETE_OPERATION))
    ot, bp, rid = events.column(1), events.column(2), events.column(3)

    def items(stripes: list[int]) -> dict[str, str]:
        return hive_acid_metadata(hive_key_index(ot, bp, rid, stripes), inserts, 0, deletes)

    return write_orc_with_metadata(events, items, orc_type=acid_hive_type(columns), compression=compression,
                                   stripe_size=DEFAULT_BASE_STRIPE_SIZE if base else HIVE_DELTA_STRIPE_SIZE)


def write_acid_file(fs: pafs.FileSystem, path: str, events: pa.Table, columns: list[Column], *,
                    base: bool = False, compression: str = DEFAULT_CODEC) -> WrittenFile:
    data = encode_acid_file(events, columns, base=base, compression=compression)
    write_bytes(fs, path, data)
    return WrittenFile(path, events.num_rows, len(data))


class InsertFile:
    """One file of inserted rows at ``path``, written as they arrive: the insert events of one
    bucket of a full-ACID statement (ROW__IDs counting on across batches), or, for an
    insert-only table, the plain table columns. :meth:`close` adds Hive's footer metadata, and
    to insert events their ACID columns (:mod:`.orcsplice`: pyarrow writes only the rows).
    The file grows on local disk, not in memory (a task writes many of them at once): in a
    temporary file beside a local destination (insert-only: at the destination itself), or in
    one anywhere for a remote filesystem, copied there at the end."""

    def __init__(self, columns: list[Column], write_id: int, bucket: int, statement_id: int,
                 fs: pafs.FileSystem, path: str, *, base: bool = False, insert_only: bool = False,
                 compression: str = DEFAULT_CODEC):
        statement_bucket_ok(bucket)
        self.columns, self.write_id, self.bucket, self.statement_id = columns, write_id, bucket, statement_id
        self.insert_only = insert_only
        self.fs, self.path = fs, path
        if insert_only:
            orc_type = HiveType("struct", children=tuple(c.type for c in columns),
                                field_names=tuple(c.name for c in columns))
        else:
            orc_type = acid_hive_type(columns)
        events = None if insert_only else InsertEventColumns(write_id, bucket_codec.encode_v1(bucket, statement_id))
        self._orc = OrcStreamWriter(orc_type, compression=compression, spill=True,
                                    spill_path=path if isinstance(fs, pafs.LocalFileSystem) else None,
                                    stripe_size=DEFAULT_BASE_STRIPE_SIZE if base else HIVE_DELTA_STRIPE_SIZE,
                                    insert_events=events)

    @property
    def rows(self) -> int:
        return self._orc.rows

    def write(self, rows: pa.Table | pa.RecordBatch) -> None:
        if self.insert_only:
            names = [c.name for c in self.columns]
            self._orc.write(pa.Table.from_arrays(conform_rows(rows, self.columns), names=names))
        else:                           # the row struct; the ACID columns are spliced in at close
            self._orc.write(pa.Table.from_arrays([row_struct_array(rows, self.columns)], names=["row"]))

    def close(self) -> WrittenFile:
        n = self._orc.rows
        items: ItemsFn | None = None
        events = self._orc.insert_events
        if events is not None:

            def items(stripes: list[int]) -> dict[str, str]:     # the last ROW__ID of each stripe
                ends = np.cumsum(stripes) - 1
                return hive_acid_metadata(
                    "".join(f"{events.write_id},{events.bucket_property},{e};" for e in ends), n)

        if self._orc.spill_path is not None:
            size = self._orc.finish_in_place(items)
        else:
            with open_output(self.fs, self.path) as out:
                size = self._orc.finish_into(out, items)
        return WrittenFile(self.path, n, size)


def statement_bucket_ok(bucket: int) -> None:
    if not 0 <= bucket <= bucket_codec.MAX_BUCKET_ID:
        raise AcidWriteError(f"bucket/writer id {bucket} out of range 0..{bucket_codec.MAX_BUCKET_ID}")


