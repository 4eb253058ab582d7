"""The job protocol: a JSON job spec in, a JSON manifest out. No pyspark, no database.

The client (CLI or Airflow hook) writes a ``JobSpec`` to a file and runs
``spark-submit airflow_hive_acid/spark/jobs/<job>.py --spec FILE``; the job reads the table's
files at the given snapshot, writes its statement's files, and writes a ``Manifest`` to
``spec.manifest_path``: rows and files per partition, the Spark application id, or the error.
A job never opens the metastore.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..acid.errors import AcidError

JOBS = ("insert", "delete", "update", "merge", "read", "compact", "clean")


class JobSpecError(AcidError):
    """A job spec or MERGE clause that does not make sense."""


@dataclass(frozen=True)
class TableSpec:
    """What a job needs to know about a table (from the catalog)."""

    name: str
    location: str
    columns: str                      # "id bigint, name string"
    partition_columns: str = ""       # "ds string"
    bucket_columns: tuple[str, ...] = ()
    num_buckets: int = 0
    bucketing_version: int = 2
    insert_only: bool = False
    compression: str = "zstd"         # pyarrow's codec name, from the table's orc.compress

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TableSpec:
        d = dict(d)
        d["bucket_columns"] = tuple(d.get("bucket_columns") or ())
        return cls(**d)


@dataclass(frozen=True)
class SnapshotSpec:
    """A reader's snapshot of one table: Hive's ValidTxnList and ValidWriteIdList strings."""

    valid_txns: str
    valid_write_ids: str


@dataclass(frozen=True)
class SourceSpec:
    """Rows coming in: a file/dir (ORC, Parquet, CSV, JSON) or another ACID table at a snapshot."""

    path: str | None = None
    format: str | None = None            # orc | parquet | csv | json; guessed from the path if None
    options: dict[str, str] = field(default_factory=dict)
    table: TableSpec | None = None
    snapshot: SnapshotSpec | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SourceSpec | None:
        if d is None:
            return None
        d = dict(d)
        if d.get("table"):
            d["table"] = TableSpec.from_dict(d["table"])
        if d.get("snapshot"):
            d["snapshot"] = SnapshotSpec(**d["snapshot"])
        return cls(**d)


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause of a MERGE, in SQL order.

    ``when``: ``matched`` | ``not_matched`` | ``not_matched_by_source``;
    ``action``: ``update`` | ``delete`` | ``insert``; ``condition`` a Spark SQL boolean
    expression over the target alias and the source alias; ``assignments`` column -> Spark SQL
    expression (UPDATE SET, or INSERT values; an INSERT without them takes every target column
    from the source column of the same name).
    """

    when: str
    action: str
    condition: str | None = None
    assignments: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        allowed = {"matched": ("update", "delete"), "not_matched": ("insert",),
                   "not_matched_by_source": ("update", "delete")}
        if self.when not in allowed:
            raise JobSpecError(f"unknown MERGE clause kind {self.when!r}; use one of {sorted(allowed)}")
        if self.action not in allowed[self.when]:
            raise JobSpecError(f"WHEN {self.when.upper().replace('_', ' ')} cannot {self.action.upper()}; "
                               f"allowed: {', '.join(a.upper() for a in allowed[self.when])}")
        if self.action == "update" and not self.assignments:
            raise JobSpecError("UPDATE clause without SET assignments")
        if self.action == "delete" and self.assignments:
            raise JobSpecError("DELETE clause cannot have assignments")


@dataclass
class JobSpec:
    job: str
    table: TableSpec
    snapshot: SnapshotSpec
    manifest_path: str
    txn_id: int = 0
    write_id: int = 0
    statement_id: int = 0
    args: dict[str, Any] = field(default_factory=dict)
    # more statement ids of the same statement: writer task i > 0 of a load writes under the i-th
    extra_statement_ids: tuple[int, ...] = ()

    @property
    def writer_statement_ids(self) -> tuple[int, ...]:
        return (self.statement_id, *self.extra_statement_ids)

    def __post_init__(self) -> None:
        if self.job not in JOBS:
            raise JobSpecError(f"unknown job {self.job!r}; one of {JOBS}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, default=_default)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> JobSpec:
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise JobSpecError(f"unreadable job spec {path}: {exc}") from None
        try:
            return cls(job=d["job"], table=TableSpec.from_dict(d["table"]), snapshot=SnapshotSpec(**d["snapshot"]),
                       manifest_path=d["manifest_path"], txn_id=d.get("txn_id", 0), write_id=d.get("write_id", 0),
                       statement_id=d.get("statement_id", 0), args=d.get("args") or {},
                       extra_statement_ids=tuple(d.get("extra_statement_ids") or ()))
        except (KeyError, TypeError) as exc:
            raise JobSpecError(f"malformed job spec {path}: {exc}") from None


def _default(o: Any) -> Any:
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


@dataclass
class PartitionStats:
    """What one statement wrote into one partition."""

    partition: str = ""
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    delta_files: int = 0
    delta_bytes: int = 0
    delete_delta_files: int = 0
    delete_delta_bytes: int = 0
    base_files: int = 0
    base_bytes: int = 0
    directories: list[str] = field(default_factory=list)

    # the counts the metastore records per write (its WriteStat has the same fields)
    COUNTS = ("rows_inserted", "rows_updated", "rows_deleted", "delta_files", "delta_bytes",
              "delete_delta_files", "delete_delta_bytes", "base_files", "base_bytes")

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.COUNTS}

    @property
    def operation(self) -> str:
        """Hive's operation type for write-write conflicts: u, d or i."""
        if self.rows_updated:
            return "u"
        if self.rows_deleted:
            return "d"
        return "i"


@dataclass
class Manifest:
    job: str
    ok: bool = True
    error: str | None = None
    error_type: str | None = None
    write_id: int = 0
    statement_id: int = 0
    spark_app_id: str | None = None
    seconds: float = 0.0
    partitions: list[PartitionStats] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)     # job-specific output (read rows, compaction)
    stages: list[dict[str, Any]] = field(default_factory=list)   # {"stage", "seconds"}: where the time went

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time one stage of the job (planning, the Spark job that writes, publishing)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.stages.append({"stage": name, "seconds": round(time.perf_counter() - started, 3)})

    @property
    def rows_inserted(self) -> int:
        return sum(p.rows_inserted for p in self.partitions)

    @property
    def rows_updated(self) -> int:
        return sum(p.rows_updated for p in self.partitions)

    @property
    def rows_deleted(self) -> int:
        return sum(p.rows_deleted for p in self.partitions)

    @property
    def bytes_written(self) -> int:
        return sum(p.delta_bytes + p.delete_delta_bytes + p.base_bytes for p in self.partitions)

    @property
    def files_written(self) -> int:
        return sum(p.delta_files + p.delete_delta_files + p.base_files for p in self.partitions)

    def summary(self) -> dict[str, Any]:
        return {"job": self.job, "write_id": self.write_id, "statement_id": self.statement_id,
                "rows_inserted": self.rows_inserted, "rows_updated": self.rows_updated,
                "rows_deleted": self.rows_deleted, "files": self.files_written, "bytes": self.bytes_written,
                "partitions": [p.partition for p in self.partitions], "spark_app_id": self.spark_app_id,
                "seconds": round(self.seconds, 3)}

    def save(self, path: str | Path) -> None:
        """Written to a temporary name and renamed: a reader never sees half a manifest."""
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, default=_default))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        d = json.loads(Path(path).read_text())
        d["partitions"] = [PartitionStats(**p) for p in d.get("partitions", [])]
        return cls(**d)


# -- MERGE clauses written as SQL ------------------------------------------------------------
_CLAUSE_RE = re.compile(
    r"^\s*WHEN\s+(?P<kind>MATCHED|NOT\s+MATCHED(?:\s+BY\s+(?P<by>SOURCE|TARGET))?)"
    r"(?:\s+AND\s+(?P<cond>.+?))?\s+THEN\s+(?P<action>UPDATE\s+SET\s+.+|DELETE|INSERT(?:\s*\*|\s*\(.+|\s+VALUES\s*\(.+)?)\s*$",
    re.IGNORECASE | re.DOTALL)


def parse_merge_clause(text: str) -> MergeClause:
    """``WHEN MATCHED [AND cond] THEN UPDATE SET a = expr, b = expr | DELETE``,
    ``WHEN NOT MATCHED [BY TARGET] [AND cond] THEN INSERT [*] | INSERT (a, b) VALUES (x, y)``,
    ``WHEN NOT MATCHED BY SOURCE [AND cond] THEN UPDATE SET ... | DELETE``."""
    m = _CLAUSE_RE.match(text)
    if not m:
        raise JobSpecError(f"cannot parse MERGE clause {text!r}: expected WHEN [NOT] MATCHED [BY SOURCE] "
                           "[AND condition] THEN UPDATE SET ... | DELETE | INSERT ...")
    kind = re.sub(r"\s+", " ", m.group("kind").upper())
    when = "matched" if kind == "MATCHED" else (
        "not_matched_by_source" if (m.group("by") or "").upper() == "SOURCE" else "not_matched")
    action_text = m.group("action").strip()
    head = action_text.split(None, 1)[0].upper()
    cond = m.group("cond").strip() if m.group("cond") else None
    if head == "DELETE":
        return MergeClause(when, "delete", cond)
    if head == "UPDATE":
        sets = action_text[re.match(r"UPDATE\s+SET\s+", action_text, re.I).end():]
        return MergeClause(when, "update", cond, parse_assignments(sets))
    rest = action_text[len("INSERT"):].strip()
    if rest in ("", "*"):
        return MergeClause(when, "insert", cond)
    vm = re.match(r"^(?:\((?P<cols>[^)]*)\)\s*)?VALUES\s*\((?P<vals>.*)\)\s*$", rest, re.I | re.S)
    if not vm:
        raise JobSpecError(f"cannot parse INSERT in MERGE clause {text!r}: "
                           "use INSERT *, or INSERT (cols) VALUES (exprs)")
    values = split_top_level(vm.group("vals"))
    if not vm.group("cols"):
        raise JobSpecError(f"INSERT VALUES in {text!r} needs the column list: INSERT (a, b) VALUES (x, y)")
    cols = [c.strip().lower() for c in vm.group("cols").split(",")]
    if len(cols) != len(values):
        raise JobSpecError(f"INSERT in {text!r} names {len(cols)} columns but gives {len(values)} values")
    return MergeClause(when, "insert", cond, dict(zip(cols, values)))


def parse_assignments(text: str) -> dict[str, str]:
    """``a = expr, t.b = expr`` -> ``{"a": "expr", "b": "expr"}`` (SET lists of UPDATE and MERGE)."""
    out: dict[str, str] = {}
    for part in split_top_level(text):
        if "=" not in part:
            raise JobSpecError(f"assignment {part!r} is not 'column = expression'")
        col, expr = part.split("=", 1)
        col = col.strip().lower()
        if "." in col:      # t.col = ...: the target alias is implied
            col = col.split(".", 1)[1]
        if not re.match(r"^[a-z_][a-z0-9_]*$", col):
            raise JobSpecError(f"bad column name {col!r} in assignment {part!r}")
        if col in out:
            raise JobSpecError(f"column {col!r} assigned twice")
        out[col] = expr.strip()
    return out


def split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"`":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts
