"""The reference Java ORC reader as a test oracle.

``java/OrcCheck.java`` is compiled against the jars pyspark ships (orc-core 2.3, hive-exec 2.3)
and decodes every row, the file and stripe statistics, and Hive's parse of the ACID key index of
each file given. :func:`problems` compares that with what pyarrow decodes from the same bytes
(pyorc, the C++ library without pyarrow's nanosecond limit, where pyarrow cannot read a file) and
with the ACID rules a Hive reader relies on: sorted ROW__IDs, the bucket of the file name, the key
index and ``hive.acid.stats``.
"""
from __future__ import annotations

import json
import struct
import subprocess
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as po
import pyorc

from airflow_hive_acid.acid import bucket_codec, orcfile
from airflow_hive_acid.acid.names import parse_bucket_file
from airflow_hive_acid.acid.schema import ACID_COLUMNS
from airflow_hive_acid.acid.types import HiveType, parse_type

SOURCE = Path(__file__).resolve().parent / "java" / "OrcCheck.java"


def jars_dir() -> Path:
    from pyspark.find_spark_home import _find_spark_home
    return Path(_find_spark_home()) / "jars"


class JavaOrc:
    """OrcCheck compiled once into ``workdir``; :meth:`read` runs it over many files in one JVM."""

    def __init__(self, workdir: Path):
        self.classes = workdir
        self.classpath = f"{jars_dir()}/*:{workdir}"
        subprocess.run(["javac", "-d", str(workdir), "-cp", f"{jars_dir()}/*", str(SOURCE)], check=True,
                       capture_output=True)

    def read(self, paths: list[str | Path]) -> list[dict]:
        if not paths:
            return []
        proc = subprocess.run(["java", "-Duser.timezone=UTC", "-cp", self.classpath, "OrcCheck"],
                              input="\n".join(str(p) for p in paths) + "\n", capture_output=True, text=True,
                              check=True, timeout=1800)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


# -- canonical values: what OrcCheck prints, from Arrow / pyorc ---------------------------------
def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _arrow_canonical(arr: pa.Array, t: HiveType) -> list:
    """``arr``'s values as OrcCheck prints them (structs and lists as lists, maps as [k, v]
    pairs, timestamps as [floor seconds, nanos], dates as days, floats as double bits)."""
    valid = arr.is_valid().to_pylist()
    if t.name == "timestamp":
        seconds, nanos, _ = orcfile.seconds_and_nanos(arr)
        out: list = [[s, n] for s, n in zip(seconds.tolist(), nanos.tolist())]
    elif t.name == "date":
        out = arr.cast(pa.int32()).to_pylist()
    elif t.name in ("float", "double"):
        out = [None if v is None else _bits(v) for v in arr.cast(pa.float64()).to_pylist()]
    elif t.name == "boolean":
        out = [None if v is None else int(v) for v in arr.to_pylist()]
    elif t.name == "binary":
        out = [None if v is None else v.hex() for v in arr.to_pylist()]
    elif t.name == "struct":
        kids = [_arrow_canonical(arr.field(i), c) for i, c in enumerate(t.children)]
        out = [list(vals) for vals in zip(*kids)] if kids else [[] for _ in range(len(arr))]
    elif t.name in ("array", "map"):
        offsets = arr.offsets.to_pylist()
        if t.name == "array":
            flat = _arrow_canonical(arr.flatten(), t.children[0])
            base = offsets[0]
            out = [flat[a - base:b - base] for a, b in zip(offsets, offsets[1:])]
        else:
            keys = _arrow_canonical(arr.keys, t.children[0])
            items = ["__null__" if v is None else v for v in _arrow_canonical(arr.items, t.children[1])]
            base = offsets[0]
            out = [[[k, v] for k, v in zip(keys[a - base:b - base], items[a - base:b - base])]
                   for a, b in zip(offsets, offsets[1:])]
    else:
        out = arr.to_pylist()
    return [v if ok else None for v, ok in zip(out, valid)]


def _pyorc_canonical(v, t: HiveType):  # type: ignore[no-untyped-def]
    if v is None:
        return None
    if t.name == "timestamp":
        return list(v)
    if t.name in ("float", "double"):
        return _bits(v)
    if t.name == "boolean":
        return int(v)
    if t.name == "binary":
        return bytes(v).hex()
    if t.name == "struct":
        return [_pyorc_canonical(x, c) for x, c in zip(v, t.children)]
    if t.name == "array":
        return [_pyorc_canonical(x, t.children[0]) for x in v]
    if t.name == "map":
        return [[_pyorc_canonical(k, t.children[0]), "__null__" if x is None else _pyorc_canonical(x, t.children[1])]
                for k, x in v.items()]
    return v


def native_rows(path: str, schema: HiveType) -> tuple[list, str]:
    """Every row as OrcCheck prints it, decoded by pyarrow, or by pyorc where pyarrow refuses
    the file's timestamps; and which of the two decoded it."""
    try:
        table = po.ORCFile(path).read()
    except pa.ArrowInvalid as exc:
        if "out of range for nanosecond" not in str(exc):
            raise
        with open(path, "rb") as fh:
            reader = pyorc.Reader(fh, converters=orcfile.EXACT_CONVERTERS)
            return [_pyorc_canonical(r, schema) for r in reader], "pyorc"
    cols = [_arrow_canonical(c.combine_chunks(), t) for c, t in zip(table.columns, schema.children)]
    return [list(r) for r in zip(*cols)], "pyarrow"


def _equal(java, native, t: HiveType) -> bool:  # type: ignore[no-untyped-def]
    if java is None or native is None or java == "__null__" or native == "__null__":
        return java == native
    if t.name == "decimal":
        return Decimal(java) == native
    if t.name == "char":                     # Java's CharTreeReader right-trims
        return java == native.rstrip(" ")
    if t.name == "struct":
        return len(java) == len(native) and all(_equal(a, b, c) for a, b, c in zip(java, native, t.children))
    if t.name == "array":
        return len(java) == len(native) and all(_equal(a, b, t.children[0]) for a, b in zip(java, native))
    if t.name == "map":
        return len(java) == len(native) and all(
            _equal(a[0], b[0], t.children[0]) and _equal(a[1], b[1], t.children[1]) for a, b in zip(java, native))
    return java == native


# -- statistics -------------------------------------------------------------------------------
def _leaf_values(rows: list, schema: HiveType) -> dict[int, list]:
    """Non-null values per ORC column id (pre-order ids, as the files number them)."""
    types = list(schema.walk())
    out: dict[int, list] = {i: [] for i in range(len(types))}

    def visit(v, t: HiveType, cid: int) -> int:  # type: ignore[no-untyped-def]
        """Record ``v`` under ``cid``; return the id after ``t``'s subtree."""
        if v is not None and v != "__null__":
            out[cid].append(v)
        nxt = cid + 1
        for i, child in enumerate(t.children):
            if v is None or v == "__null__":
                sub = []
            elif t.name == "struct":
                sub = [v[i]]
            elif t.name == "array":
                sub = v
            else:
                sub = [kv[i] for kv in v]
            end = nxt + sum(1 for _ in child.walk())
            for x in sub:
                visit(x, child, nxt)
            nxt = end
        return nxt

    for r in rows:
        visit(r, schema, 0)
    return out


def _order_key(v, t: HiveType):  # type: ignore[no-untyped-def]
    if t.name == "decimal":
        return Decimal(v) if isinstance(v, str) else v
    if t.name in ("float", "double"):
        return struct.unpack("<d", struct.pack("<q", v))[0]
    if t.name == "timestamp":
        return tuple(v)
    return v


def _stats_problems(stats: list[dict], rows: list, schema: HiveType, where: str) -> list[str]:
    out = []
    types = list(schema.walk())
    leaves = _leaf_values(rows, schema)
    for cid, s in enumerate(stats):
        t, values = types[cid], leaves[cid]
        if s["count"] != len(values):
            out.append(f"{where} column {cid} ({t}): statistics count {s['count']}, values {len(values)}")
            continue
        if not values or "min" not in s:
            continue
        keys = [_order_key(v, t) for v in values]
        if t.name in ("float", "double") and any(k != k for k in keys):
            continue                                            # NaN: no order to check
        lo, hi = _order_key(s["min"], t), _order_key(s["max"], t)
        if (lo, hi) != (min(keys), max(keys)):
            out.append(f"{where} column {cid} ({t}): statistics min/max {s['min']}/{s['max']}, "
                       f"values {min(keys)}/{max(keys)}")
    return out


# -- the whole check --------------------------------------------------------------------------
def problems(result: dict) -> list[str]:
    """What is wrong with one file as the Java reader saw it (empty: nothing)."""
    path = result["path"]
    if "error" in result:
        return [f"{path}: Java ORC reader failed: {result['error']}"]
    out = []
    schema = parse_type(result["schema"])
    if not result["proleptic"]:
        out.append(f"{path}: the footer does not declare the proleptic Gregorian calendar")
    native, decoder = native_rows(path, schema)
    java = result["values"]
    if len(java) != len(native) or len(java) != result["rows"]:
        return out + [f"{path}: Java read {len(java)} rows, {decoder} {len(native)}, footer {result['rows']}"]
    for i, (j, n) in enumerate(zip(java, native)):
        if not _equal(j, n, schema):
            out.append(f"{path}: row {i} differs: Java {j!r}, {decoder} {n!r}")
            break
    out += _stats_problems(result["file_stats"], native, schema, f"{path} file")
    start = 0
    for k, (count, stats) in enumerate(zip(result["stripes"], result["stripe_stats"])):
        out += _stats_problems(stats, native[start:start + count], schema, f"{path} stripe {k}")
        start += count
    if tuple(schema.field_names) == tuple(n.lower() for n in ACID_COLUMNS):
        out += _acid_problems(result, java)
    return out


def _acid_problems(result: dict, rows: list) -> list[str]:
    path, out = result["path"], []
    keys = [(r[1], r[2], r[3]) for r in rows]
    if any(a >= b for a, b in zip(keys, keys[1:])):
        i = next(i for i, (a, b) in enumerate(zip(keys, keys[1:])) if a >= b)
        out.append(f"{path}: ROW__IDs not ascending at row {i + 1}: {keys[i]} then {keys[i + 1]}")
    name = Path(path).name
    if name.startswith("bucket_"):
        bucket = parse_bucket_file(name)
        wrong = [k for k in keys if bucket_codec.decode_bucket(k[1]) != bucket]
        if wrong:
            out.append(f"{path}: {len(wrong)} rows carry another bucket than {bucket}, e.g. {wrong[0]}")
    ends, total = [], 0
    for count in result["stripes"]:
        total += count
        ends.append(list(keys[total - 1]))
    if result.get("hive_key_index") != ends:
        out.append(f"{path}: Hive parses the key index as {result.get('hive_key_index')}, last ROW__IDs are {ends}")
    ops = [r[0] for r in rows]
    stats = f"{ops.count(0)},{ops.count(1)},{ops.count(2)}"
    if result["metadata"].get("hive.acid.stats") != stats:
        out.append(f"{path}: hive.acid.stats {result['metadata'].get('hive.acid.stats')}, events {stats}")
    if result["metadata"].get("hive.acid.version") != "2":
        out.append(f"{path}: hive.acid.version {result['metadata'].get('hive.acid.version')!r}")
    return out


TABLE_DIRS = ("base_", "delta_", "delete_delta_")


def written_orc_files(root: Path) -> list[Path]:
    """The table data files under ``root`` this project's writer made: in a base or delta
    directory, with the footer it writes (ORC C++, calendar declared; ``test_java_orc`` checks
    that every file it writes has that footer). Java-written corpus copies and files tests
    write by other means, deliberately broken ones included, are left out."""
    found = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.name.startswith((".", "_")) or not p.parent.name.startswith(TABLE_DIRS):
            continue
        try:
            with open(p, "rb") as fh:
                if fh.read(3) != b"ORC":
                    continue
            tail = orcfile.read_tail(p.read_bytes())
        except (OSError, orcfile.OrcFileError):
            continue
        if tail.footer.get("writer") == 1 and tail.footer.get("calendar") == orcfile.CALENDAR_PROLEPTIC_GREGORIAN:
            found.append(p)
    return found
