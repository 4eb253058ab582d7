"""airflow_hive_acid.acid.orcsplice: insert files whose ACID columns are encoded here and spliced
into the stripes pyarrow wrote for the row struct. The reference is the file pyarrow writes
when it is given all six columns: the same bytes, where the codec's level does not differ."""
from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.orc as po
import pyorc
import pytest

from airflow_hive_acid.acid import bucket_codec, orcsplice
from airflow_hive_acid.acid import orcfile as of
from airflow_hive_acid.acid.orcsplice import InsertEventColumns, rle_v2
from airflow_hive_acid.acid.schema import acid_hive_type, row_struct
from airflow_hive_acid.acid.types import parse_columns
from airflow_hive_acid.acid.writer import InsertFile, insert_events

COLS = parse_columns("id bigint, name string, amount double")
SMALL_STRIPES = dict(stripe_size=32 * 1024, batch_size=1000, compression_block_size=65536)


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "name": pa.array([f"name-{i % 977}" for i in ids], pa.string()), "amount": ids * 0.5})


def row_only(t: pa.Table) -> pa.Table:
    return pa.table([pa.StructArray.from_arrays([c.combine_chunks() for c in t.columns],
                                                fields=list(row_struct(COLS)))], names=["row"])


def both_files(n: int, write_id: int = 5, bucket: int = 1, statement: int = 2, batches: int = 3,
               **options) -> tuple[bytes, bytes]:
    """(pyarrow given all six columns, spliced) for the same rows, written in ``batches`` parts."""
    events = InsertEventColumns(write_id, bucket_codec.encode_v1(bucket, statement))
    full = of.OrcStreamWriter(acid_hive_type(COLS), **options)
    spliced = of.OrcStreamWriter(acid_hive_type(COLS), insert_events=events, **options)
    step = max(1, -(-n // batches))
    for start in range(0, max(n, 1), step):
        part = rows(min(step, n - start), start)
        full.write(insert_events(part, COLS, write_id, bucket, statement, first_row_id=start))
        spliced.write(row_only(part))
    items = {"hive.acid.version": "2"}
    return full.finish(items), spliced.finish(items)


@pytest.mark.parametrize("compression", ["zstd", "snappy", "uncompressed"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 10, 11, 512, 513, 514, 515, 10_001, 60_000])
def test_the_spliced_file_is_byte_for_byte_the_one_pyarrow_writes_with_all_columns(n, compression):
    """Runs of 512, the C++ writer's encodings of a stripe's last values (DIRECT, SHORT_REPEAT,
    DELTA), row index positions and statistics, stripes, types and file statistics."""
    full, spliced = both_files(n, compression=compression, **SMALL_STRIPES)
    assert spliced == full
    if n == 60_000:
        assert len(of.read_tail(spliced).stripe_row_counts) > 1


@pytest.mark.parametrize("compression", ["zlib", "lz4"])
def test_codecs_whose_level_differs_hold_the_same_columns_and_statistics(compression):
    """zlib and lz4 compress the small ACID streams a little differently from ORC's C++ writer;
    what they hold is the same."""
    full, spliced = both_files(60_000, write_id=1 << 40, compression=compression, **SMALL_STRIPES)
    a, b = of.read_tail(full), of.read_tail(spliced)
    assert b.stripe_row_counts == a.stripe_row_counts and len(b.stripe_row_counts) > 1
    assert [f.raw for f in b.footer_fields if f.number in (4, 7)] == [f.raw for f in a.footer_fields if f.number in (4, 7)]
    assert po.ORCFile(pa.BufferReader(spliced)).read().equals(po.ORCFile(pa.BufferReader(full)).read())
    assert list(pyorc.Reader(io.BytesIO(spliced))) == list(pyorc.Reader(io.BytesIO(full)))


@pytest.mark.parametrize("compression", ["zlib", "zstd", "uncompressed"])
def test_seeking_to_any_row_finds_its_row_id(compression):
    """ORC C++ (pyorc) seeks through the row index positions of every column: into each row
    group of each stripe, at run boundaries and inside runs."""
    n = 60_000
    _, spliced = both_files(n, write_id=9, compression=compression, **SMALL_STRIPES)
    reader = pyorc.Reader(io.BytesIO(spliced))
    prop = bucket_codec.encode_v1(1, 2)
    for row in (0, 1, 511, 512, 9_999, 10_000, 10_001, 23_999, 24_000, 33_333, 45_998, n - 1):
        reader.seek(row)
        assert next(reader)[:5] == (0, 9, prop, row, 9), row


def _decode_delta_run(raw: bytes, pos: int) -> tuple[int, int]:
    """(first value, delta) of the fixed-delta RLE v2 DELTA run at ``pos``."""
    assert raw[pos] >> 6 == 3 and (raw[pos] >> 1) & 0x1F == 0
    vals, p = [], pos + 2
    for _ in range(2):
        v, shift = 0, 0
        while True:
            b = raw[p]
            p += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        vals.append((v >> 1) ^ -(v & 1))
    return vals[0], vals[1]


def test_row_index_positions_point_into_the_right_compression_chunk():
    """A stream longer than one compression chunk (a stripe of more than 16k runs at 64 KiB,
    too big for a quick file): each row group's position, followed chunk by chunk, lands on
    the run holding its first value."""
    block, stride, n = 64, 1000, 512 * 200
    cols = ((0, 0), (7, 0), (536936448, 0), (100, 1), (7, 0))
    streams = orcsplice._acid_streams(cols, 0, n, stride, 5, block)
    index = {c: data for c, kind, data in streams if kind == 6}
    data = {c: data for c, kind, data in streams if kind == 1}
    for column, (first, step) in enumerate(cols, start=1):
        stored = data[column]
        chunk_starts = orcsplice._chunk_starts(stored, True)
        assert len(chunk_starts) > 3, "the stream spans several chunks"
        entries = [f for f in of.iter_fields(of.decompress_stream(index[column], 5, block))]
        assert len(entries) == -(-n // stride)
        for g, entry in enumerate(entries):
            positions = of._decode_packed_varints(next(f.value for f in of.iter_fields(entry.value) if f.number == 1))
            chunk, offset, skip = positions
            assert chunk in chunk_starts
            rest = of.decompress_stream(stored[chunk:], 5, block)
            base, delta = _decode_delta_run(rest, offset)
            assert (base + skip * delta, delta) == (first + g * stride * step, step), (column, g)


def test_a_pre_1970_fraction_switches_to_the_exact_writer_with_the_acid_columns(tmp_path):
    """From the first batch pyarrow cannot write exactly on, pyorc writes the file (all six
    columns, what pyarrow wrote read back): the same bytes as the writer given all columns."""
    cols = parse_columns("id bigint, ts timestamp")
    ts = [np.full(1000, 86_400_000_000 * 3 + 123), np.full(1000, -86_400_000_000 * 3 + 123)]
    batches = [pa.table({"id": np.arange(i * 1000, (i + 1) * 1000), "ts": pa.array(t, pa.timestamp("us"))})
               for i, t in enumerate(ts)]
    events = InsertEventColumns(4, bucket_codec.encode_v1(0, 0))
    full = of.OrcStreamWriter(acid_hive_type(cols), compression="zstd")
    spliced = of.OrcStreamWriter(acid_hive_type(cols), compression="zstd", insert_events=events,
                                 spill_path=str(tmp_path / "bucket_00000"))
    for i, b in enumerate(batches):
        full.write(insert_events(b, cols, 4, 0, 0, first_row_id=i * 1000))
        spliced.write(pa.table([pa.StructArray.from_arrays([b.column(0).combine_chunks(), b.column(1).combine_chunks()],
                                                           fields=list(row_struct(cols)))], names=["row"]))
    spliced.finish_in_place({"k": "v"})
    assert (tmp_path / "bucket_00000").read_bytes() == full.finish({"k": "v"})
    assert [r[3] for r in pyorc.Reader(open(tmp_path / "bucket_00000", "rb"))] == list(range(2000))


def test_insert_file_in_place_streamed_and_in_memory_are_the_same_bytes(tmp_path):
    """A file that grows beside its local destination and is spliced there (copy_file_range),
    one spliced into a stream (a remote filesystem's output), and one spliced in memory."""
    data = [rows(20_000, s) for s in range(0, 60_000, 20_000)]
    local = InsertFile(COLS, 3, 2, 1, pafs.LocalFileSystem(), str(tmp_path / "delta" / "bucket_00002"))
    for part in data:
        local.write(part)
    written = local.close()
    assert [p.name for p in (tmp_path / "delta").iterdir()] == ["bucket_00002"], "no temporary file left"
    on_disk = (tmp_path / "delta" / "bucket_00002").read_bytes()
    assert written.bytes == len(on_disk) and written.rows == 60_000

    mem = pafs.PyFileSystem(pafs.FSSpecHandler(__import__("fsspec").filesystem("memory")))
    remote = InsertFile(COLS, 3, 2, 1, mem, "/t/delta/bucket_00002")
    for part in data:
        remote.write(part)
    remote.close()
    with mem.open_input_stream("/t/delta/bucket_00002") as f:
        assert f.read() == on_disk

    tail = of.read_tail(on_disk)
    assert tail.user_metadata["hive.acid.stats"] == b"60000,0,0"
    prop = bucket_codec.encode_v1(2, 1)
    ends = np.cumsum(tail.stripe_row_counts) - 1
    assert tail.user_metadata["hive.acid.key.index"] == "".join(f"3,{prop},{e};" for e in ends).encode()
    table = po.ORCFile(pa.BufferReader(on_disk)).read()
    assert table.column("rowId").to_pylist() == list(range(60_000))
    assert table.column("row").combine_chunks().field("id").to_pylist() == list(range(60_000))


def test_a_file_that_is_not_the_row_struct_is_refused():
    sink = pa.BufferOutputStream()
    po.write_table(pa.table({"id": [1, 2]}), sink)
    with pytest.raises(of.OrcFileError, match=r"struct<row:struct<\.\.\.>>"):
        orcsplice.splice_insert_columns(io.BytesIO(sink.getvalue().to_pybytes()), InsertEventColumns(1, 0),
                                        io.BytesIO())


@pytest.mark.parametrize("first,step,n", [(0, 0, 1), (5, 0, 3), (5, 0, 10), (1 << 40, 0, 2), (0, 1, 3),
                                          (512, 1, 2), (-3, 0, 7), (7, 1, 1030)])
def test_rle_v2_runs_decode_to_their_values(first, step, n):
    """Every run form :func:`rle_v2` writes, read back by ORC C++ as a column of a file."""
    raw, starts = rle_v2(first, step, n)
    assert starts[0] == 0 and len(starts) == -(-n // 512)
    # a one-column file around the stream: pyarrow writes the same column, and must hold these bytes
    sink = pa.BufferOutputStream()
    po.write_table(pa.table({"v": np.arange(n, dtype=np.int64) * step + first}), sink, compression="uncompressed")
    assert raw in sink.getvalue().to_pybytes()


def test_files_the_kernel_will_not_copy_between_are_copied_through_memory(tmp_path, monkeypatch):
    """``copy_file_range`` can refuse (EXDEV, ENOSYS, an old kernel): the splice copies the
    stripes itself, to the same bytes."""
    import errno
    import os

    def write(path):
        f = InsertFile(COLS, 3, 0, 0, pafs.LocalFileSystem(), str(path))
        f.write(rows(30_000))
        f.close()
        return path.read_bytes()

    by_kernel = write(tmp_path / "a" / "bucket_00000")

    def refuse(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    assert write(tmp_path / "b" / "bucket_00000") == by_kernel
