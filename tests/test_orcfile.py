"""airflow_hive_acid.acid.orcfile: footer user metadata on pyarrow-written ORC files."""
from __future__ import annotations

import datetime as dt
import decimal
import io
import os
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as po
import pyorc
import pytest
from conftest import CORPUS

from airflow_hive_acid.acid import orcfile as of


def stripe_rows(data: bytes) -> list[int]:
    """Rows per stripe as pyorc reads them (independent of the footer parser under test)."""
    reader = pyorc.Reader(io.BytesIO(bytes(data)))
    return [len(reader.read_stripe(i)) for i in range(reader.num_of_stripes)]


def user_metadata(data: bytes) -> dict[str, bytes]:
    """Footer user metadata as pyarrow reads it."""
    return {k.decode(): bytes(v) for k, v in po.ORCFile(pa.BufferReader(bytes(data))).metadata.items()}

NATION_25K = CORPUS / "trinodb_trino/plugin/trino-hive/src/test/resources/nationFile25kRowsSortedOnNationKey/bucket_00000"
COMPRESSIONS = ["uncompressed", "zlib", "zstd", "snappy", "lz4"]
ACID_ITEMS = {"hive.acid.key.index": "1,536870912,0;", "hive.acid.stats": "1,0,0", "hive.acid.version": "2"}


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

def _orc_file(data: bytes) -> po.ORCFile:
    return po.ORCFile(pa.BufferReader(data))


def _pyorc_reader(data: bytes):
    pyorc = pytest.importorskip("pyorc")
    return pyorc.Reader(io.BytesIO(data))


def typed_table(n: int, seed: int = 0) -> pa.Table:
    """Many ORC types, with nulls."""
    rng = random.Random(seed)
    npr = np.random.default_rng(seed)

    def nulls(values):
        return [None if rng.random() < 0.1 else v for v in values]

    ints = npr.integers(-2**62, 2**62, n)
    return pa.table({
        "b": pa.array(nulls([bool(x) for x in npr.integers(0, 2, n)]), pa.bool_()),
        "i8": pa.array(nulls(npr.integers(-128, 128, n).tolist()), pa.int8()),
        "i16": pa.array(nulls(npr.integers(-2**15, 2**15, n).tolist()), pa.int16()),
        "i32": pa.array(nulls(npr.integers(-2**31, 2**31, n).tolist()), pa.int32()),
        "i64": pa.array(nulls(ints.tolist()), pa.int64()),
        "f32": pa.array(nulls(npr.random(n).astype(np.float32).tolist()), pa.float32()),
        "f64": pa.array(nulls(npr.normal(size=n).tolist()), pa.float64()),
        "s": pa.array(nulls([f"str-{i}-" + "x" * (i % 17) for i in range(n)]), pa.string()),
        "bin": pa.array(nulls([bytes([i % 256]) * (i % 5) for i in range(n)]), pa.binary()),
        "d": pa.array(nulls([dt.date(2000, 1, 1) + dt.timedelta(days=i % 9000) for i in range(n)]), pa.date32()),
        "ts": pa.array(nulls([1_600_000_000_000_000_000 + i * 1_000_001 for i in range(n)]), pa.timestamp("ns")),
        "dec": pa.array(nulls([decimal.Decimal(i) / 100 for i in range(n)]), pa.decimal128(12, 2)),
        "lst": pa.array(nulls([list(range(i % 4)) for i in range(n)]), pa.list_(pa.int64())),
        "st": pa.array(nulls([{"x": i, "y": str(i)} for i in range(n)]),
                       pa.struct([("x", pa.int32()), ("y", pa.string())])),
        "m": pa.array(nulls([[("k", i)] for i in range(n)]), pa.map_(pa.string(), pa.int64())),
    })


def acid_table(n: int, write_id: int = 7, bucket: int = 536870912, deletes: bool = False) -> pa.Table:
    """The ACID event layout: 5 ROW__ID/operation columns + nested ``row`` struct."""
    ids = np.arange(n, dtype=np.int64)
    row_type = pa.struct([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
    if deletes:
        row = pa.nulls(n, row_type)
    else:
        row = pa.StructArray.from_arrays(
            [pa.array(ids), pa.array([f"name-{i}" for i in range(n)]), pa.array(ids * 0.5)],
            fields=list(row_type),
        )
    return pa.table({
        "operation": pa.array(np.full(n, 2 if deletes else 0, np.int32)),
        "originalTransaction": pa.array(np.full(n, write_id, np.int64)),
        "bucket": pa.array(np.full(n, bucket, np.int32)),
        "rowId": pa.array(ids),
        "currentTransaction": pa.array(np.full(n, write_id + (1 if deletes else 0), np.int64)),
        "row": row,
    })


def acid_items_fn(table: pa.Table, deletes: bool = False):
    def items(counts):
        key_index = of.hive_key_index(table["originalTransaction"], table["bucket"], table["rowId"], counts)
        n = table.num_rows
        return of.hive_acid_metadata(key_index, 0 if deletes else n, 0, n if deletes else 0)
    return items


def corpus_orc_files() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    out = []
    for p in sorted(CORPUS.rglob("*")):
        if p.is_file():
            with open(p, "rb") as f:
                if f.read(3) == b"ORC":
                    out.append(p)
    return out


# ------------------------------------------------------------------------------------------
# protobuf wire format
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 2**31, 2**63 - 1, 2**64 - 1])
def test_varint_roundtrip(value):
    raw = of.encode_field(3, of.WT_VARINT, value)
    (f,) = list(of.iter_fields(raw))
    assert (f.number, f.wire_type, f.value, f.raw) == (3, of.WT_VARINT, value, raw)


def test_negative_varint_is_twos_complement():
    (f,) = list(of.iter_fields(of.encode_field(1, of.WT_VARINT, -1)))
    assert f.value == 2**64 - 1


def test_fields_of_all_wire_types_roundtrip():
    raw = (of.encode_field(1, of.WT_VARINT, 5) + of.encode_field(2, of.WT_LEN, b"abc")
           + of.encode_field(3, of.WT_I64, 2**60) + of.encode_field(4, of.WT_I32, 7)
           + of.encode_field(8000, of.WT_LEN, b"ORC"))
    fields = list(of.iter_fields(raw))
    assert [(f.number, f.value) for f in fields] == [(1, 5), (2, b"abc"), (3, 2**60), (4, 7), (8000, b"ORC")]
    assert b"".join(f.raw for f in fields) == raw


def test_packed_and_unpacked_repeated():
    packed = of.encode_field(4, of.WT_LEN, of.encode_varint(0) + of.encode_varint(12))
    unpacked = of.encode_field(4, of.WT_VARINT, 0) + of.encode_field(4, of.WT_VARINT, 12)
    for raw in (packed, unpacked):
        assert of.decode_message(raw, of._POSTSCRIPT)["version"] == [0, 12]


@pytest.mark.parametrize("raw", [b"\x08", b"\x12\x05ab", b"\x19\x00", b"\x0b", b"\x00\x01"])
def test_truncated_or_bad_protobuf(raw):
    with pytest.raises(of.OrcFileError):
        list(of.iter_fields(raw))


# ------------------------------------------------------------------------------------------
# compressed streams
# ------------------------------------------------------------------------------------------

def _payloads():
    rng = random.Random(1)
    text = b"".join(b"row %d value %s;" % (i, b"ab" * (i % 7)) for i in range(20000))
    return {
        "empty": b"",
        "small": b"hello",
        "text": text,
        "random": bytes(rng.getrandbits(8) for _ in range(50000)),
        "runs": b"a" * 70000 + b"bc" * 30000,
    }


@pytest.mark.parametrize("kind", ["NONE", "ZLIB", "ZSTD", "SNAPPY", "LZ4"])
@pytest.mark.parametrize("name", list(_payloads()))
def test_stream_roundtrip(kind, name):
    data = _payloads()[name]
    block = 32 * 1024
    comp = of.compress_stream(data, kind, block)
    assert of.decompress_stream(comp, kind, block) == data
    if kind != "NONE" and data:
        # walk the chunk headers: every chunk holds <= block bytes
        pos, chunks = 0, 0
        while pos < len(comp):
            header = int.from_bytes(comp[pos:pos + 3], "little")
            assert header >> 1 <= block
            pos += 3 + (header >> 1)
            chunks += 1
        assert pos == len(comp)
        assert chunks == -(-len(data) // block)
        if name == "random":
            assert len(comp) == len(data) + 3 * chunks     # incompressible -> original chunks


@pytest.mark.parametrize("kind", ["ZLIB", "ZSTD", "SNAPPY", "LZ4"])
def test_compressed_chunks_are_smaller(kind):
    data = _payloads()["text"]
    assert len(of.compress_stream(data, kind, 64 * 1024)) < len(data) // 2


def test_unsupported_compression():
    stream = (10 << 1).to_bytes(3, "little") + b"0123456789"
    with pytest.raises(of.UnsupportedCompressionError, match="LZO"):
        of.decompress_stream(stream, "LZO", 1024)
    with pytest.raises(of.UnsupportedCompressionError):
        of.decompress_stream(stream, "NOPE", 1024)
    with pytest.raises(of.UnsupportedCompressionError, match="BROTLI"):    # no table writes it
        of.compress_stream(b"abc" * 100, "BROTLI", 1024)


def test_corrupt_chunk_is_an_error():
    for kind in ("ZSTD", "SNAPPY", "LZ4"):
        with pytest.raises(of.OrcFileError):
            of.decompress_stream((5 << 1).to_bytes(3, "little") + b"\xff" * 5, kind, 1024)
    with pytest.raises(of.OrcFileError):
        of.decompress_stream((5 << 1).to_bytes(3, "little") + b"\xff" * 5, "ZLIB", 1024)
    with pytest.raises(of.OrcFileError):
        of.decompress_stream((50 << 1).to_bytes(3, "little") + b"short", "ZLIB", 1024)


# ------------------------------------------------------------------------------------------
# add_user_metadata on freshly written files
# ------------------------------------------------------------------------------------------

def _write(table: pa.Table, compression: str, **kw) -> bytes:
    sink = pa.BufferOutputStream()
    po.write_table(table, sink, compression=compression, **kw)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("n,small_stripes", [(0, False), (1, False), (1000, False), (30000, True)])
def test_patch_roundtrip_typed(compression, n, small_stripes):
    table = typed_table(n, seed=n)
    kw = dict(stripe_size=16 * 1024, batch_size=512, compression_block_size=65536) if small_stripes else {}
    plain = _write(table, compression, **kw)
    assert user_metadata(plain) == {}
    patched = of.add_user_metadata(plain, ACID_ITEMS)

    tail, tail0 = of.read_tail(patched), of.read_tail(plain)
    # stripes + stripe statistics copied untouched, footer otherwise unchanged
    assert patched[:tail.footer_start] == plain[:tail0.footer_start]
    assert tail.postscript == {**tail0.postscript, "footer_length": tail.postscript["footer_length"]}
    assert {k: v for k, v in tail.footer.items() if k != "metadata"} == \
           {k: v for k, v in tail0.footer.items() if k != "metadata"}
    assert [f.raw for f in tail.footer_fields if f.number != 5] == [f.raw for f in tail0.footer_fields]
    assert [f.raw for f in tail.postscript_fields if f.number != 1] == \
           [f.raw for f in tail0.postscript_fields if f.number != 1]
    assert tail.compression == {"uncompressed": "NONE"}.get(compression, compression.upper())

    # pyarrow
    f = _orc_file(patched)
    assert f.metadata is not None
    assert {k.decode(): v.decode() for k, v in f.metadata.to_dict().items()} == ACID_ITEMS
    assert f.read().equals(table)
    counts = stripe_rows(patched)
    assert len(counts) == f.nstripes and sum(counts) == n == f.nrows
    assert counts == [f.read_stripe(i).num_rows for i in range(f.nstripes)]
    if small_stripes:
        assert f.nstripes > 1
    assert user_metadata(patched) == {k: v.encode() for k, v in ACID_ITEMS.items()}

    # pyorc (ORC C++ via its own build)
    r = _pyorc_reader(patched)
    assert {k: bytes(v) for k, v in r.user_metadata.items()} == {k: v.encode() for k, v in ACID_ITEMS.items()}
    assert len(r) == n and r.num_of_stripes == len(counts)
    assert sum(1 for _ in r) == n


@pytest.mark.parametrize("compression", ["zlib", "zstd"])
def test_write_orc_with_metadata_acid_multi_stripe(compression):
    table = acid_table(60000, write_id=3)
    seen = []

    def items(counts):
        seen.append(list(counts))
        return acid_items_fn(table)(counts)

    data = of.write_orc_with_metadata(table, items, compression=compression, stripe_size=32 * 1024,
                                      batch_size=1000, compression_block_size=65536)
    f = _orc_file(data)
    assert f.nstripes > 1 and seen == [stripe_rows(data)]
    assert f.read().equals(table)
    md = user_metadata(data)
    expect, last = [], -1
    for i in range(f.nstripes):
        last += f.read_stripe(i).num_rows
        expect.append(f"3,536870912,{last};")
    assert md == {"hive.acid.key.index": "".join(expect).encode(), "hive.acid.stats": b"60000,0,0",
                  "hive.acid.version": b"2"}
    r = _pyorc_reader(data)
    assert r.user_metadata["hive.acid.key.index"] == "".join(expect).encode()
    rows = list(r)
    assert len(rows) == 60000 and rows[-1][3] == 59999 and rows[0][5] == (0, "name-0", 0.0)


@pytest.mark.parametrize("pre_1970", [False, True], ids=["pyarrow", "switched-to-pyorc"])
def test_spilled_writer_streams_the_same_file_as_the_in_memory_one(pre_1970, tmp_path):
    """A file grown on local disk and streamed out, or grown at its destination and finished
    there, holds exactly the bytes of one grown in memory, footer metadata and the switch to
    exact timestamps included."""
    from airflow_hive_acid.acid.types import parse_type
    n = 60000
    batches = [pa.table({"id": pa.array(np.arange(i, i + n // 3, dtype=np.int64)),
                         "name": pa.array([f"v{x}" for x in range(i, i + n // 3)]).cast(pa.string()),
                         "ts": pa.array(np.full(n // 3, 86_400_000_000 * (-3 if pre_1970 and i else 3) + 123),
                                        pa.timestamp("us"))})
               for i in range(0, n, n // 3)]
    orc_type = parse_type("struct<id:bigint,name:varchar(20),ts:timestamp>")
    items = {"hive.acid.version": "2", "big": "x" * 200_000}     # a footer larger than the tail's first read
    got = []
    for spill in (False, True):
        w = of.OrcStreamWriter(orc_type, stripe_size=32 * 1024, batch_size=1000, compression_block_size=65536,
                               spill=spill)
        for b in batches:
            w.write(b)
        out = io.BytesIO()
        assert w.finish_into(out, items) == len(out.getvalue())
        got.append(out.getvalue())
    assert got[0] == got[1]
    in_place = tmp_path / "d" / "bucket_00000"
    w = of.OrcStreamWriter(orc_type, stripe_size=32 * 1024, batch_size=1000, compression_block_size=65536,
                           spill_path=str(in_place))
    for b in batches:
        w.write(b)
        assert in_place.exists()
    assert w.finish_in_place(items) == in_place.stat().st_size
    assert in_place.read_bytes() == got[0]
    with pytest.raises(of.OrcFileError, match="spill_path"):
        of.OrcStreamWriter(orc_type, spill=True).finish_in_place(items)
    tail = of.read_file_tail(io.BytesIO(got[1]), len(got[1]), guess=1024)
    assert tail.user_metadata["big"] == b"x" * 200_000 and sum(tail.stripe_row_counts) == n > tail.stripe_row_counts[0]
    rows = list(_pyorc_reader(got[1]))
    assert len(rows) == n and rows[-1][0] == n - 1
    with pytest.raises(of.OrcFileError, match="do not hold"):
        of.read_tail(got[1][-100:], file_length=len(got[1]))


def test_write_orc_with_metadata_defaults_and_variants():
    table = acid_table(10, deletes=True)
    data = of.write_orc_with_metadata(table, acid_items_fn(table, deletes=True))
    t = of.read_tail(data)
    assert t.compression == "ZLIB" and t.compression_block_size == of.DEFAULT_COMPRESSION_BLOCK_SIZE
    assert t.footer["row_index_stride"] == of.DEFAULT_ROW_INDEX_STRIDE
    assert t.postscript["version"] == [0, 12]
    assert t.user_metadata == {"hive.acid.key.index": b"7,536870912,9;", "hive.acid.stats": b"0,0,10",
                               "hive.acid.version": b"2"}
    assert _orc_file(data).read().equals(table)
    # a mapping instead of a callable; None -> no metadata; a RecordBatch input
    assert user_metadata(of.write_orc_with_metadata(table, {"a": b"b"})) == {"a": b"b"}
    assert user_metadata(of.write_orc_with_metadata(table, None)) == {}
    batch = table.to_batches()[0]
    assert _orc_file(of.write_orc_with_metadata(batch, {"a": "b"})).read().equals(table)
    with pytest.raises(of.OrcFileError, match="multiple of 65536"):
        of.write_orc_with_metadata(table, None, compression_block_size=32 * 1024)


def test_replace_keep_and_order_of_items():
    base = of.add_user_metadata(_write(typed_table(100), "zlib"), {"b": "1", "a": b"2", "z": "3"})
    assert list(user_metadata(base)) == ["a", "b", "z"]               # new items sorted
    again = of.add_user_metadata(base, {"b": "new", "c": "4", "\u00e9t\u00e9": "\u00fc".encode()})
    md = user_metadata(again)
    assert list(md) == ["a", "b", "z", "c", "\u00e9t\u00e9"]                 # replaced in place
    assert md == {"a": b"2", "b": b"new", "z": b"3", "c": b"4", "\u00e9t\u00e9": "\u00fc".encode()}
    assert of.add_user_metadata(again, {}) == again
    assert _pyorc_reader(again).user_metadata["b"] == b"new"
    assert _orc_file(again).read().equals(typed_table(100))


@pytest.mark.parametrize("compression", ["zlib", "zstd", "lz4", "uncompressed"])
def test_large_metadata_value_spans_several_chunks(compression):
    table = typed_table(50)
    plain = _write(table, compression, compression_block_size=65536)
    big = os.urandom(150000) + b"z" * 100000       # footer needs >= 4 chunks of 64 KiB
    patched = of.add_user_metadata(plain, {"big": big, "hive.acid.version": "2"})
    assert user_metadata(patched)["big"] == big
    if compression != "uncompressed":
        tail = of.read_tail(patched)
        stored = patched[tail.footer_start:len(patched) - 1 - tail.postscript_length]
        pos, chunks = 0, 0
        while pos < len(stored):
            pos += 3 + (int.from_bytes(stored[pos:pos + 3], "little") >> 1)
            chunks += 1
        assert chunks >= 4
    assert _orc_file(patched).metadata.to_dict()[b"big"] == big
    assert bytes(_pyorc_reader(patched).user_metadata["big"]) == big
    assert _orc_file(patched).read().equals(table)


def test_bad_arguments():
    plain = _write(typed_table(3), "zlib")
    with pytest.raises(of.OrcFileError):
        of.add_user_metadata(plain, {"k": 5})
    with pytest.raises(of.OrcFileError):
        of.add_user_metadata(plain, {"": "x"})
    for junk in [b"", b"ORC", b"PAR1" + b"\0" * 20, plain[:-10], plain[:-1] + b"\xff"]:
        with pytest.raises(of.OrcFileError):
            of.read_tail(junk)


def test_accepts_buffers_and_memoryviews():
    sink = pa.BufferOutputStream()
    po.write_table(typed_table(20), sink, compression="zlib")
    buf = sink.getvalue()
    for data in (buf, memoryview(buf), bytearray(buf.to_pybytes())):
        assert stripe_rows(data) == [20]
        assert user_metadata(of.add_user_metadata(data, {"x": "y"})) == {"x": b"y"}


# ------------------------------------------------------------------------------------------
# hive_key_index
# ------------------------------------------------------------------------------------------

def test_hive_key_index_inputs():
    o = np.array([1, 1, 2, 2, 2], np.int64)
    b = np.array([536870912] * 5, np.int32)
    r = np.array([0, 1, 0, 1, 2], np.int64)
    expect = "1,536870912,1;2,536870912,2;"
    assert of.hive_key_index(o, b, r, [2, 3]) == expect
    assert of.hive_key_index(pa.array(o), pa.array(b), pa.array(r), [2, 3]) == expect
    chunked = [pa.chunked_array([x[:3], x[3:]]) for x in (o, b, r)]
    assert of.hive_key_index(*chunked, np.array([2, 3])) == expect
    assert of.hive_key_index(o.tolist(), b.tolist(), r.tolist(), [5]) == "2,536870912,2;"
    assert of.hive_key_index([], [], [], []) == ""
    with pytest.raises(of.OrcFileError):
        of.hive_key_index(o, b, r, [2, 2])           # row count mismatch
    with pytest.raises(of.OrcFileError):
        of.hive_key_index(o, b, r, [5, 0])           # empty stripe
    with pytest.raises(of.OrcFileError):
        of.hive_key_index(pa.array([1, None]), pa.array([1, 1]), pa.array([0, 1]), [2])


def test_hive_acid_stats():
    assert of.hive_acid_stats(25000) == "25000,0,0"
    assert of.hive_acid_stats(0, 0, 1000) == "0,0,1000"


# ------------------------------------------------------------------------------------------
# real Hive-written files
# ------------------------------------------------------------------------------------------

CORPUS_FILES = corpus_orc_files()


@pytest.mark.skipif(not CORPUS_FILES, reason="acid corpus not available")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_file(path):
    data = path.read_bytes()
    f = _orc_file(data)
    expect_md = {k.decode(): v for k, v in f.metadata.to_dict().items()} if f.metadata else {}
    md = user_metadata(data)
    assert md == expect_md
    counts = stripe_rows(data)
    assert len(counts) == f.nstripes and sum(counts) == f.nrows
    assert counts == [f.read_stripe(i).num_rows for i in range(f.nstripes)]
    tail = of.read_tail(data)
    assert tail.compression == "ZLIB" and tail.postscript["version"] == [0, 12]
    assert tail.footer.get("writer", 0) == 0 and tail.postscript["writer_version"] == 6  # ORC_JAVA, ORC_135
    assert tail.number_of_rows == f.nrows

    # ACID files: key index has one entry per stripe = ROW__ID of its last row
    if "hive.acid.key.index" in md:
        table = f.read()
        assert md["hive.acid.key.index"].decode() == of.hive_key_index(
            table["originalTransaction"], table["bucket"], table["rowId"], counts)
        assert md["hive.acid.version"] == b"2"

    # re-patching with its own metadata: same footer, readable, same data
    repatched = of.add_user_metadata(data, md)
    assert of.read_tail(repatched).footer_bytes == tail.footer_bytes
    assert repatched[:tail.footer_start] == data[:tail.footer_start]
    g = _orc_file(repatched)
    assert g.read().equals(f.read()) and g.nstripes == f.nstripes
    assert (g.metadata.to_dict() if g.metadata else {}) == (f.metadata.to_dict() if f.metadata else {})
    r = _pyorc_reader(repatched)
    assert {k: bytes(v) for k, v in r.user_metadata.items()} == md
    assert len(list(r)) == f.nrows

    # and adding an item keeps it readable
    plus = of.add_user_metadata(data, {"x.extra": "1"})
    assert user_metadata(plus) == {**md, "x.extra": b"1"}
    assert _orc_file(plus).read().equals(f.read())


@pytest.mark.skipif(not NATION_25K.exists(), reason="acid corpus not available")
def test_corpus_nation_25k():
    data = NATION_25K.read_bytes()
    assert stripe_rows(data) == [5000] * 5
    md = user_metadata(data)
    assert md["hive.acid.key.index"] == (b"2,536870912,4999;2,536870912,9999;2,536870912,14999;"
                                         b"2,536870912,19999;2,536870912,24999;")
    assert md["hive.acid.stats"] == b"25000,0,0"
    assert md["hive.acid.version"] == b"2"
    tail = of.read_tail(data)
    assert tail.compression_block_size == 250          # footer spans several ZLIB chunks
    assert tail.footer["row_index_stride"] == 1000
    # the exact same footer bytes come back when re-compressed (same zlib output)
    assert of.add_user_metadata(data, md) == data


# ------------------------------------------------------------------------------------------
# Java ORC (orc-core inside pyspark's jars)
# ------------------------------------------------------------------------------------------

# The Java reads use the suite's one SparkSession (conftest ``spark``): a session of this module
# would be that same session (getOrCreate), and stopping it would stop it for every later test.


def _java_read(spark, path: str, acid: bool = False) -> dict:
    """Open ``path`` with org.apache.orc (orc-core from pyspark's jars) and read every row."""
    from py4j.java_gateway import get_field

    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    reader = jvm.org.apache.orc.OrcFile.createReader(
        jvm.org.apache.hadoop.fs.Path(path), jvm.org.apache.orc.OrcFile.readerOptions(conf))

    def long_sum(vec, size):
        if get_field(vec, "isRepeating"):
            return get_field(vec, "vector")[0] * size
        return jvm.java.util.Arrays.stream(get_field(vec, "vector"), 0, size).sum()

    try:
        utf8 = jvm.java.nio.charset.StandardCharsets.UTF_8
        md = {}
        for key in reader.getMetadataKeys():
            md[key] = utf8.decode(reader.getMetadataValue(key).duplicate()).toString()
        rows = reader.rows()
        batch = reader.getSchema().createRowBatch()
        counted, sum_row_id, sum_id, last_name = 0, 0, 0, None
        while rows.nextBatch(batch):
            size = get_field(batch, "size")
            counted += size
            if acid:     # operation, originalTransaction, bucket, rowId, currentTransaction, row
                cols = get_field(batch, "cols")
                sum_row_id += long_sum(cols[3], size)
                row_fields = get_field(cols[5], "fields")
                sum_id += long_sum(row_fields[0], size)
                last_name = row_fields[1].toString(size - 1)
        rows.close()
        return {
            "metadata": md,
            "rows": reader.getNumberOfRows(),
            "counted": counted,
            "stripes": [s.getNumberOfRows() for s in reader.getStripes()],
            "compression": reader.getCompressionKind().toString(),
            "schema": reader.getSchema().toString(),
            "sum_row_id": sum_row_id, "sum_id": sum_id, "last_name": last_name,
        }
    finally:
        reader.close()


def _hive_acid_view(spark, path: str) -> tuple[list[str], str]:
    """Hive's own reader (hive-exec in pyspark's jars): OrcRecordUpdater.parseKeyIndex (package
    private, called by reflection) and orc-core's OrcAcidUtils.parseAcidStats."""
    jvm, gw = spark._jvm, spark.sparkContext._gateway
    hive_orc = jvm.org.apache.hadoop.hive.ql.io.orc.OrcFile
    reader = hive_orc.createReader(jvm.org.apache.hadoop.fs.Path(path),
                                   hive_orc.readerOptions(spark._jsc.hadoopConfiguration()))
    updater = jvm.java.lang.Class.forName("org.apache.hadoop.hive.ql.io.orc.OrcRecordUpdater")
    arg_types = gw.new_array(jvm.java.lang.Class, 1)
    arg_types[0] = jvm.java.lang.Class.forName("org.apache.hadoop.hive.ql.io.orc.Reader")
    method = updater.getDeclaredMethod("parseKeyIndex", arg_types)
    method.setAccessible(True)
    args = gw.new_array(jvm.java.lang.Object, 1)
    args[0] = reader
    keys = [k.toString() for k in method.invoke(None, args)]
    stats = jvm.org.apache.orc.impl.OrcAcidUtils.parseAcidStats(reader).toString()
    return keys, stats.strip()


@pytest.mark.spark
def test_java_orc_reader_accepts_patched_files(spark, tmp_path):
    cases = []
    acid = acid_table(40000, write_id=5)
    for compression in COMPRESSIONS:
        data = of.write_orc_with_metadata(acid, acid_items_fn(acid), compression=compression,
                                          stripe_size=16 * 1024, batch_size=500,
                                          compression_block_size=65536)
        cases.append((f"acid_{compression}", data, acid))
    typed = typed_table(3000)
    cases.append(("typed_zlib", of.add_user_metadata(_write(typed, "zlib"), ACID_ITEMS), typed))
    big = os.urandom(100000).hex()        # 200 KB value: the footer spans several 64 KiB chunks
    cases.append(("bigvalue_zlib", of.add_user_metadata(_write(typed, "zlib", compression_block_size=65536),
                                                        {**ACID_ITEMS, "big": big}), typed))
    if NATION_25K.exists():
        nation = NATION_25K.read_bytes()
        cases.append(("corpus_nation_repatched",
                      of.add_user_metadata(nation, {"extra": "1", "hive.acid.stats": "25000,0,0"}),
                      _orc_file(nation).read()))

    n = acid.num_rows
    for name, data, table in cases:
        path = tmp_path / f"{name}.orc"
        path.write_bytes(data)
        got = _java_read(spark, str(path), acid=name.startswith("acid"))
        expect_md = {k: v.decode() for k, v in user_metadata(data).items()}
        assert got["metadata"] == expect_md, name
        assert got["rows"] == got["counted"] == table.num_rows, name
        assert got["stripes"] == stripe_rows(data), name
        if name.startswith("acid"):
            assert len(got["stripes"]) > 1, name
            assert got["schema"] == ("struct<operation:int,originalTransaction:bigint,bucket:int,rowId:bigint,"
                                     "currentTransaction:bigint,row:struct<id:bigint,name:string,score:double>>")
            assert expect_md["hive.acid.key.index"].count(";") == len(got["stripes"])
            assert (got["sum_row_id"], got["sum_id"], got["last_name"]) == \
                   (n * (n - 1) // 2, n * (n - 1) // 2, f"name-{n - 1}"), name
        if "hive.acid.key.index" in expect_md:
            keys, stats = _hive_acid_view(spark, str(path))
            expect_keys = [
                "{{originalTxn: {}, bucket: {}, row: {}}}".format(*e.split(","))
                for e in expect_md["hive.acid.key.index"].split(";")[:-1]
            ]
            assert keys == expect_keys and len(keys) == len(got["stripes"]), name
            ins, upd, dels = expect_md["hive.acid.stats"].split(",")
            assert stats == f"inserts: {ins} updates: {upd} deletes: {dels}", name

    # Spark's ORC data source: reads the patched non-ACID-schema files back identically. (Files
    # with the ACID event schema are recognised by orc-core's SchemaEvolution as ACID and cannot
    # be read by spark.read.orc at all, Hive-written ones included; hence the reader checks above.)
    df = spark.read.orc(str(tmp_path / "typed_zlib.orc"))
    agg = df.selectExpr("count(*)", "sum(i32)", "count(s)", "sum(CASE WHEN lst IS NOT NULL THEN size(lst) END)",
                        "sum(st.x)", "max(dec)").collect()[0]
    expect = (typed.num_rows, pc.sum(typed["i32"]).as_py(), typed.num_rows - typed["s"].null_count,
              pc.sum(pc.list_value_length(typed["lst"])).as_py(),
              pc.sum(pc.struct_field(typed["st"], [0])).as_py(), pc.max(typed["dec"]).as_py())
    assert tuple(agg) == expect
