"""The five ACID columns of an insert file, encoded here and spliced into the stripes pyarrow
wrote for the row struct alone.

In a file of insert events four of the five ACID columns are constants (operation 0,
originalTransaction and currentTransaction the write id, bucket the bucket property) and
``rowId`` counts 0, 1, 2, ... through the file. Through pyarrow's ORC writer they cost about a
quarter of the file's write time (docs/format.md, "Insert files"); as ORC streams they are a few
bytes per 512 rows. So an insert file is written in two steps:

1. pyarrow writes ``struct<row:struct<...>>``: ORC column 0 is the root, 1 the row struct;
2. :func:`splice_insert_columns` copies that file stripe by stripe, adding columns 1-5 and
   renumbering the others by 5: each stripe gains a ``ROW_INDEX`` and a ``DATA`` stream per
   ACID column, its footer the streams and ``DIRECT_V2`` encodings, and the file tail the five
   types and their statistics (file and stripe). The stripes' other bytes are copied as they are.

The streams are what ORC's own writers produce for these values: RLE v2 ``DELTA`` runs of at
most 512 values with a fixed delta (0, or 1 for ``rowId``) and no packed deltas, each run cut
512 values after the previous one from the stripe's start; row index positions (compressed
chunk, offset in it, values into the run) and per-row-group statistics as they write them.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa

from .orcfile import (
    _FOOTER,
    _TYPE,
    WT_LEN,
    WT_VARINT,
    OrcFileError,
    OrcTail,
    RawField,
    _decode_packed_varints,
    compress_stream,
    copy_range,
    decode_message,
    decompress_stream,
    encode_field,
    encode_varint,
    iter_fields,
    read_file_tail,
)
from .schema import INSERT_OPERATION

ACID_COLUMN_NAMES = ("operation", "originalTransaction", "bucket", "rowId", "currentTransaction")
_ACID_KINDS = (3, 4, 3, 4, 4)                 # ORC Type.Kind: INT, LONG, INT, LONG, LONG
_SHIFT = len(ACID_COLUMN_NAMES)
_KIND_STRUCT = 12
_DATA, _ROW_INDEX = 1, 6                      # Stream.Kind
_INDEX_AREA = {6, 7, 8}                       # ROW_INDEX, BLOOM_FILTER, BLOOM_FILTER_UTF8
_DIRECT_V2 = encode_field(1, WT_VARINT, 2) + encode_field(2, WT_VARINT, 0)
# maximumLength, precision and scale: ORC's C++ writer sets them (to 0) on every Type
_NO_TYPE_PARAMETERS = b"".join(encode_field(n, WT_VARINT, 0) for n in (4, 5, 6))
_RUN = 512                                    # the longest RLE v2 run
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(frozen=True)
class InsertEventColumns:
    """The ACID columns of one file of insert events: operation 0, originalTransaction =
    currentTransaction = ``write_id``, bucket = ``bucket_property``, rowId from 0."""

    write_id: int
    bucket_property: int

    def columns(self) -> tuple[tuple[int, int], ...]:
        """(first value, step) of each ACID column, in file order."""
        w = self.write_id
        return (INSERT_OPERATION, 0), (w, 0), (self.bucket_property, 0), (0, 1), (w, 0)

    def values(self, row_id: int) -> tuple[int, ...]:
        """The columns' values in the row whose rowId is ``row_id``."""
        return tuple(first + row_id * step for first, step in self.columns())

    def arrays(self, first_row_id: int, n: int) -> list[pa.Array]:
        """The columns' values for rows ``first_row_id`` .. ``first_row_id + n - 1``."""
        return [pa.array(np.arange(first_row_id, first_row_id + n, dtype=np.int64) if step else
                         np.full(n, first, dtype=np.int32 if kind == 3 else np.int64))
                for (first, step), kind in zip(self.columns(), _ACID_KINDS)]


def _zigzag(v: int) -> int:
    return v << 1 if v >= 0 else (-v << 1) - 1


def _sint_field(number: int, v: int) -> bytes:
    return encode_field(number, WT_VARINT, _zigzag(v))


def rle_v2(first: int, step: int, n: int) -> tuple[bytes, list[int]]:
    """Signed RLE v2 of ``first, first + step, ...`` (n values) as ORC's C++ writer encodes it,
    and where each run starts: ``DELTA`` runs of 512 with a fixed delta, then the rest
    (:func:`_last_run`)."""
    full = n // _RUN
    delta = encode_varint(_zigzag(step))

    def run(base: int) -> bytes:
        return b"\xc1\xff" + encode_varint(_zigzag(base)) + delta

    if step == 0:
        one = run(first)
        parts = [one * full]
        starts = list(range(0, full * len(one), len(one)))
    else:
        parts = [run(first + i * _RUN * step) for i in range(full)]
        starts = np.concatenate(([0], np.cumsum([len(r) for r in parts]))).tolist()[:full]
    end = sum(map(len, parts))
    if n % _RUN:
        parts.append(_last_run([first + (full * _RUN + i) * step for i in range(n % _RUN)]))
        starts.append(end)
    return b"".join(parts), starts


_ALIGNED_WIDTHS = (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
_WIDTH_CODES = {**{w: w - 1 for w in range(1, 25)}, 26: 24, 28: 25, 30: 26, 32: 27, 40: 28, 48: 29, 56: 30, 64: 31}


def _last_run(values: list[int]) -> bytes:
    """A stripe's last (< 512) values of a constant or a fixed-delta sequence, as ORC's C++
    writer ends it: ``SHORT_REPEAT`` for 3-10 equal values, ``DIRECT`` (byte-aligned bit
    widths) for 3 values or fewer, else one ``DELTA`` run."""
    n = len(values)
    zz = [_zigzag(v) for v in values]
    if 3 <= n <= 10 and len(set(zz)) == 1:
        size = max(1, (zz[0].bit_length() + 7) // 8)
        return bytes((((size - 1) << 3) | (n - 3),)) + zz[0].to_bytes(size, "big")
    if n <= 3:
        width = next(w for w in _ALIGNED_WIDTHS if w >= max(1, max(zz).bit_length()))
        packed = 0
        for v in zz:
            packed = (packed << width) | v
        nbits = n * width
        pad = -nbits % 8
        return (bytes((0x40 | (_WIDTH_CODES[width] << 1) | ((n - 1) >> 8), (n - 1) & 0xFF))
                + (packed << pad).to_bytes((nbits + pad) // 8, "big"))
    return (bytes((0xC0 | ((n - 1) >> 8), (n - 1) & 0xFF)) + encode_varint(_zigzag(values[0]))
            + encode_varint(_zigzag(values[1] - values[0])))


def _int_stats(first: int, step: int, n: int) -> bytes:
    """ColumnStatistics of ``n`` values ``first, first + step, ...`` (a sum outside int64 is
    left out, as ORC's writers do)."""
    if n == 0:
        body = _sint_field(3, 0)
    else:
        last = first + (n - 1) * step
        total = (first + last) * n // 2
        body = _sint_field(1, min(first, last)) + _sint_field(2, max(first, last))
        if _INT64_MIN <= total <= _INT64_MAX:
            body += _sint_field(3, total)
    return encode_field(1, WT_VARINT, n) + encode_field(2, WT_LEN, body) + encode_field(10, WT_VARINT, 0)


def _chunk_starts(stored: bytes, compressed: bool) -> list[int]:
    """Where each compression chunk of a stored stream starts."""
    if not compressed:
        return [0]
    starts, pos = [], 0
    while pos < len(stored):
        starts.append(pos)
        pos += 3 + ((stored[pos] | (stored[pos + 1] << 8) | (stored[pos + 2] << 16)) >> 1)
    return starts


@dataclass
class _Stripe:
    """A stripe's new layout: its bytes as source ranges (offset, length) and new bytes, in
    order, and its serialized StripeFooter."""

    pieces: list[tuple[int, int] | bytes]
    index_length: int
    data_length: int
    footer: bytes


def _acid_streams(cols: tuple[tuple[int, int], ...], first_row: int, rows: int, stride: int, code: int,
                  block: int) -> list[tuple[int, int, bytes]]:
    """(column, stream kind, stored bytes) of the ACID columns' ROW_INDEX and DATA streams for
    one stripe of ``rows`` rows whose first rowId is ``first_row``."""
    out_index, out_data = [], []
    groups = range(0, rows, stride) if stride else range(0)
    for column, (first, step) in enumerate(cols, start=1):
        if step:
            first += first_row * step
        raw, starts = rle_v2(first, step, rows)
        stored = compress_stream(raw, code, block)
        chunks = _chunk_starts(stored, code != 0)
        entries = []
        constant_stats = encode_field(2, WT_LEN, _int_stats(first, 0, stride))
        for g in groups:
            byte = starts[g // _RUN]
            pos = [chunks[byte // block], byte % block] if code else [byte]
            pos.append(g % _RUN)
            packed = b"".join(encode_varint(p) for p in pos)
            group_rows = min(stride, rows - g)
            stats = (constant_stats if not step and group_rows == stride else
                     encode_field(2, WT_LEN, _int_stats(first + g * step, step, group_rows)))
            entries.append(encode_field(1, WT_LEN, encode_field(1, WT_LEN, packed) + stats))
        if stride:
            out_index.append((column, _ROW_INDEX, compress_stream(b"".join(entries), code, block)))
        out_data.append((column, _DATA, stored))
    return out_index + out_data


def _stream_field(kind: int, column: int, length: int) -> bytes:
    body = encode_field(1, WT_VARINT, kind) + encode_field(2, WT_VARINT, column) + encode_field(3, WT_VARINT, length)
    return encode_field(1, WT_LEN, body)


def _renumbered(raw_type: bytes) -> bytes:
    """A Footer ``Type`` whose subtypes move up by the five inserted columns."""
    out = []
    for f in iter_fields(raw_type):
        if f.number == 2 and f.wire_type == WT_LEN:
            ids = [i + _SHIFT for i in _decode_packed_varints(f.value)]
            out.append(encode_field(2, WT_LEN, b"".join(encode_varint(i) for i in ids)))
        elif f.number == 2 and f.wire_type == WT_VARINT:
            out.append(encode_field(2, WT_VARINT, f.value + _SHIFT))
        else:
            out.append(f.raw)
    return b"".join(out)


def _with_acid_stats(stats: list[bytes], cols: tuple[tuple[int, int], ...], rows: int) -> list[bytes]:
    if not stats:
        raise OrcFileError("ORC file without column statistics: cannot add the ACID columns")
    return [stats[0], *(_int_stats(first, step, rows) for first, step in cols), *stats[1:]]


def splice_insert_columns(src: BinaryIO, events: InsertEventColumns, out: BinaryIO) -> OrcTail:
    """Copy the ORC file ``src`` (written by pyarrow as ``struct<row:struct<...>>``) to the
    start of ``out`` with the ACID columns of ``events`` added, up to its Footer; returns the
    new file's tail for :func:`.orcfile.rewritten_tail` to finish (user metadata, string types).

    ``out`` is written at its current position, which must be 0. Where both are local files
    the stripe bytes are copied by the kernel (``copy_file_range``).
    """
    size = src.seek(0, os.SEEK_END)
    tail = read_file_tail(src, size)
    code = tail.postscript.get("compression", 0)
    block = tail.compression_block_size
    footer = tail.footer
    stride = footer.get("row_index_stride", 0)
    types = [f for f in tail.footer_fields if f.number == 4]
    root = decode_message(types[0].value, _TYPE) if types else {}
    if root.get("kind") != _KIND_STRUCT or root.get("field_names") != ["row"] or root.get("subtypes") != [1]:
        raise OrcFileError(f"expected an ORC file of struct<row:struct<...>>, got root type {root}")
    cols = events.columns()
    copy = _copier(src, out)

    out.write(b"ORC")
    pos = 3
    stripes_out: list[bytes] = []
    first_row = 0
    for info, info_field in zip(footer["stripes"], [f for f in tail.footer_fields if f.number == 3]):
        stripe = _splice_stripe(src, info, cols, first_row, stride, code, block)
        footer_stored = compress_stream(stripe.footer, code, block)
        for piece in stripe.pieces:
            if isinstance(piece, bytes):
                out.write(piece)
            else:
                copy(*piece)
        out.write(footer_stored)
        rows = info.get("number_of_rows", 0)
        fields = [encode_field(1, WT_VARINT, pos), encode_field(2, WT_VARINT, stripe.index_length),
                  encode_field(3, WT_VARINT, stripe.data_length), encode_field(4, WT_VARINT, len(footer_stored)),
                  encode_field(5, WT_VARINT, rows)]
        fields += [f.raw for f in iter_fields(info_field.value) if f.number > 5]
        stripes_out.append(encode_field(3, WT_LEN, b"".join(fields)))
        pos += stripe.index_length + stripe.data_length + len(footer_stored)
        first_row += rows
    added = pos - sum(info.get(k, 0) for info in footer["stripes"]
                      for k in ("index_length", "data_length", "footer_length")) - 3
    content_length = footer.get("content_length", 0) + added     # as counted by the writer (C++: no header)

    # stripe statistics (Metadata), each with the ACID columns' statistics added
    meta_len = tail.postscript.get("metadata_length", 0)
    if meta_len:
        src.seek(tail.footer_start - meta_len)
        meta = decompress_stream(src.read(meta_len), code, block)
        per_stripe = []
        first_row = 0
        for s, info in zip([f for f in iter_fields(meta) if f.number == 1], footer["stripes"]):
            rows = info.get("number_of_rows", 0)
            stats = [f.value for f in iter_fields(s.value) if f.number == 1]
            shifted = tuple((first + first_row * step, step) for first, step in cols)
            body = b"".join(encode_field(1, WT_LEN, c) for c in _with_acid_stats(stats, shifted, rows))
            body += b"".join(f.raw for f in iter_fields(s.value) if f.number != 1)
            per_stripe.append(encode_field(1, WT_LEN, body))
            first_row += rows
        meta_stored = compress_stream(b"".join(per_stripe), code, block)
        out.write(meta_stored)
        pos += len(meta_stored)
        meta_len = len(meta_stored)

    # the Footer: new stripes, types and file statistics; every other field as it was
    rows_total = tail.number_of_rows
    file_stats = _with_acid_stats([f.value for f in tail.footer_fields if f.number == 7], cols, rows_total)
    new_root = [encode_field(1, WT_VARINT, _KIND_STRUCT),
                encode_field(2, WT_LEN, b"".join(encode_varint(i) for i in range(1, _SHIFT + 2))),
                *(encode_field(3, WT_LEN, n.encode()) for n in (*ACID_COLUMN_NAMES, "row")),
                *(f.raw for f in iter_fields(types[0].value) if f.number not in (1, 2, 3))]
    acid_types = [encode_field(4, WT_LEN, encode_field(1, WT_VARINT, k) + _NO_TYPE_PARAMETERS) for k in _ACID_KINDS]
    new_types = [encode_field(4, WT_LEN, b"".join(new_root)), *acid_types,
                 *(encode_field(4, WT_LEN, _renumbered(t.value)) for t in types[1:])]
    replacement = {3: stripes_out, 4: new_types, 7: [encode_field(7, WT_LEN, s) for s in file_stats]}
    footer_out = []
    for f in tail.footer_fields:
        if f.number in replacement:
            footer_out += replacement.pop(f.number)
        elif f.number not in (3, 4, 7):
            footer_out.append(encode_field(2, WT_VARINT, content_length) if f.number == 2 else f.raw)
    footer_bytes = b"".join(footer_out)
    ps_fields = [RawField(5, WT_VARINT, meta_len, encode_field(5, WT_VARINT, meta_len)) if f.number == 5 else f
                 for f in tail.postscript_fields]
    return OrcTail(file_length=-1, postscript={**tail.postscript, "metadata_length": meta_len},
                   postscript_fields=ps_fields, postscript_length=tail.postscript_length,
                   footer=decode_message(footer_bytes, _FOOTER), footer_fields=list(iter_fields(footer_bytes)),
                   footer_bytes=footer_bytes, footer_start=pos)


def _splice_stripe(src: BinaryIO, info: dict[str, Any], cols: tuple[tuple[int, int], ...], first_row: int,
                   stride: int, code: int, block: int) -> _Stripe:
    """One stripe's new layout: for each area (index, then data), the root's streams, the ACID
    columns' streams, then the other columns' streams renumbered."""
    offset, il, dl, fl = (info.get(k, 0) for k in ("offset", "index_length", "data_length", "footer_length"))
    src.seek(offset + il + dl)
    stripe_footer = decompress_stream(src.read(fl), code, block)
    streams, encodings, rest = [], [], []
    for f in iter_fields(stripe_footer):
        if f.number == 1:
            streams.append(decode_message(f.value, {1: ("kind", "uint", False), 2: ("column", "uint", False),
                                                    3: ("length", "uint", False)}))
        elif f.number == 2:
            encodings.append(f.raw)
        else:
            rest.append(f.raw)
    new = _acid_streams(cols, first_row, info.get("number_of_rows", 0), stride, code, block)
    pos = offset
    placed: dict[bool, tuple[list, list]] = {True: ([], []), False: ([], [])}     # area -> (root's, others')
    for s in streams:
        kind, column, length = s.get("kind", 0), s.get("column", 0), s.get("length", 0)
        renumbered = column + _SHIFT if column else 0
        placed[kind in _INDEX_AREA][column != 0].append((_stream_field(kind, renumbered, length), (pos, length)))
        pos += length
    index_old = sum(r[1] for part in placed[True] for _, r in part)
    if index_old != il or pos != offset + il + dl:
        raise OrcFileError(f"stripe at {offset}: its streams do not fill its index and data areas as declared")
    out_streams: list[bytes] = []
    pieces: list[tuple[int, int] | bytes] = []
    lengths = {True: 0, False: 0}
    for area in (True, False):
        root_streams, other_streams = placed[area]
        added = [(_stream_field(kind, column, len(data)), data) for column, kind, data in new
                 if (kind in _INDEX_AREA) == area]
        for field_bytes, piece in (*root_streams, *added, *other_streams):
            out_streams.append(field_bytes)
            _append_piece(pieces, piece)
            lengths[area] += piece[1] if isinstance(piece, tuple) else len(piece)
    if not encodings:
        raise OrcFileError(f"stripe at {offset}: its footer has no column encodings")
    encodings[1:1] = [encode_field(2, WT_LEN, _DIRECT_V2)] * _SHIFT
    return _Stripe(pieces, lengths[True], lengths[False], b"".join((*out_streams, *encodings, *rest)))


def _append_piece(pieces: list[tuple[int, int] | bytes], piece: tuple[int, int] | bytes) -> None:
    """Adjacent source ranges become one copy."""
    if isinstance(piece, tuple) and pieces and isinstance(pieces[-1], tuple) and sum(pieces[-1]) == piece[0]:
        pieces[-1] = (pieces[-1][0], pieces[-1][1] + piece[1])
    else:
        pieces.append(piece)


def _copier(src: BinaryIO, out: BinaryIO) -> Callable[[int, int], None]:
    """copy(offset, length): bytes of ``src`` appended to ``out``, by the kernel if it can."""
    try:
        src_fd, out_fd = src.fileno(), out.fileno()
    except (AttributeError, OSError, ValueError):
        src_fd = out_fd = -1

    def by_read(offset: int, length: int) -> None:
        copy_range(src, out, offset, length)

    if src_fd < 0 or not hasattr(os, "copy_file_range"):
        return by_read

    def by_kernel(offset: int, length: int) -> None:
        out.flush()
        while length:
            try:
                n = os.copy_file_range(src_fd, out_fd, length, offset)
            except OSError:
                n = 0
            if n <= 0:                    # not supported between these files: copy through memory
                out.seek(0, os.SEEK_END)
                by_read(offset, length)
                return
            offset += n
            length -= n
        out.seek(0, os.SEEK_END)

    return by_kernel
