"""What a job is asked to do: the table, the snapshot it reads at, and one typed request.

A request (:class:`Insert`, :class:`Update`, :class:`Delete`, :class:`Merge`, :class:`Read`,
:class:`Compact`, :class:`Clean`) carries its own arguments and the one ``validate(table)``
every caller runs — the CLI and the operators before anything starts, the statement runner and
the compactor before a transaction writes, the Spark job before it reads a file. What needs
Spark to check (an expression, a source's schema) is checked in the job.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Protocol

from ..acid.partitions import DEFAULT_PARTITION_NAME
from ..acid.table import TableSpec  # the table a job gets: the format's one model of a table
from ..acid.writeids import ValidTxnList, ValidWriteIdList
from ..errors import InvalidInputError


class Snapshot(Protocol):
    """A snapshot as the metastore takes it (``metastore.TableSnapshot``; jobs/ does not import
    the metastore)."""

    @property
    def valid_txns(self) -> ValidTxnList: ...

    @property
    def valid_write_ids(self) -> ValidWriteIdList: ...


class JobSpecError(InvalidInputError):
    """A job spec, request or MERGE clause that does not make sense."""


@dataclass(frozen=True)
class SnapshotSpec:
    """A reader's snapshot of one table: Hive's ValidTxnList and ValidWriteIdList strings."""

    valid_txns: str
    valid_write_ids: str

    @classmethod
    def of(cls, snapshot: Snapshot, write_ids: ValidWriteIdList | None = None) -> SnapshotSpec:
        """The strings of a metastore snapshot (``metastore.TableSnapshot``), with its write-id
        list replaced by ``write_ids`` when given (an older or a compactor's view)."""
        return cls(snapshot.valid_txns.to_string(),
                   (write_ids if write_ids is not None else snapshot.valid_write_ids).to_string())


SOURCE_FORMATS = ("orc", "parquet", "csv", "json")


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

    def validate(self) -> None:
        if bool(self.path) == bool(self.table):
            raise JobSpecError("a source is a path (ORC/Parquet/CSV/JSON files) or an ACID table, exactly one")
        if self.table is not None and self.snapshot is None:
            raise JobSpecError("a source table needs a snapshot")
        if self.path and self.format_name not in SOURCE_FORMATS:
            raise JobSpecError(f"unsupported source format {self.format_name!r} for {self.path}: "
                               f"use {', '.join(SOURCE_FORMATS)}")

    @property
    def format_name(self) -> str:
        """The source's format: given, or from the path's extension."""
        if self.format:
            return self.format.lower()
        for ext in SOURCE_FORMATS:
            if (self.path or "").rstrip("/").lower().endswith("." + ext):
                return ext
        raise JobSpecError(f"cannot tell the format of {self.path}: pass format (orc, parquet, csv, json)")


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

    @classmethod
    def of(cls, clause: str | dict[str, Any] | MergeClause) -> MergeClause:
        """A clause from SQL text (:func:`parse_merge_clause`), a dict, or as it is."""
        if isinstance(clause, MergeClause):
            return clause
        if isinstance(clause, str):
            return parse_merge_clause(clause)
        return cls(**clause)


# -- requests --------------------------------------------------------------------------------------
class Request:
    """One job's arguments; subclasses name the job and check their arguments against a table."""

    job: ClassVar[str] = ""
    writes: ClassVar[bool] = False     # a DML statement (INSERT/UPDATE/DELETE/MERGE)

    def validate(self, table: TableSpec) -> None:
        table.check_partition_types()
        if table.insert_only and self.writes and self.job != "insert":
            raise JobSpecError(f"{table.name} is an insert-only table: only INSERT is allowed")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]  # the subclasses are the dataclasses

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Request:
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]  # the subclasses are the dataclasses
        unknown = sorted(set(d) - known)
        if unknown:
            raise JobSpecError(f"unknown {cls.job} arguments {unknown}")
        if "source" in known:                     # INSERT and MERGE read a SourceSpec
            d = {**d, "source": SourceSpec.from_dict(d.get("source"))}
        return cls(**d)


def _not_placing_columns(table: TableSpec, assigned: set[str]) -> None:
    """An UPDATE may not move a row: partition and bucket columns keep their values."""
    for name in sorted(assigned):
        table.column(name)
        if name in table.partition_names:
            raise JobSpecError(f"cannot update partition column {name!r} of {table.name}: the row would move to "
                               "another partition (DELETE and INSERT it instead)")
        if name in table.bucket_columns:
            raise JobSpecError(f"cannot update bucket column {name!r} of {table.name}: the row would move to "
                               "another bucket (DELETE and INSERT it instead)")


@dataclass(frozen=True)
class Insert(Request):
    """INSERT INTO (or OVERWRITE) rows of ``source``; ``partition`` a static partition spec."""

    job: ClassVar[str] = "insert"
    writes: ClassVar[bool] = True
    source: SourceSpec
    overwrite: bool = False
    partition: dict[str, str] | None = None

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        self.source.validate()
        if self.partition:
            table.partition_name(self.partition)


@dataclass(frozen=True)
class Delete(Request):
    """DELETE FROM table WHERE ``where`` (a Spark SQL condition; ``true`` deletes every row)."""

    job: ClassVar[str] = "delete"
    writes: ClassVar[bool] = True
    where: str = ""

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        if not self.where.strip():
            raise JobSpecError("DELETE needs a WHERE condition (use 'true' to delete every row)")


@dataclass(frozen=True)
class Update(Request):
    """UPDATE table SET column = expression, ... [WHERE condition]."""

    job: ClassVar[str] = "update"
    writes: ClassVar[bool] = True
    set: dict[str, str] = field(default_factory=dict)
    where: str | None = None

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        if not self.set:
            raise JobSpecError("UPDATE needs SET assignments")
        _not_placing_columns(table, set(self.set))


@dataclass(frozen=True)
class Merge(Request):
    """MERGE INTO table t USING ``source`` s ON ``on`` (key columns, or a condition) WHEN ..."""

    job: ClassVar[str] = "merge"
    writes: ClassVar[bool] = True
    source: SourceSpec
    on: list[str] | str
    clauses: list[MergeClause]

    def __post_init__(self) -> None:
        object.__setattr__(self, "clauses", [MergeClause.of(c) for c in self.clauses])
        if isinstance(self.on, list):
            object.__setattr__(self, "on", [str(k).strip().lower() for k in self.on])

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        self.source.validate()
        if not self.clauses:
            raise JobSpecError("MERGE needs at least one WHEN clause, e.g. 'WHEN MATCHED THEN UPDATE SET v = s.v'")
        if isinstance(self.on, str):
            if not self.on.strip():
                raise JobSpecError("MERGE needs an ON condition or key columns")
        elif not self.on:
            raise JobSpecError("MERGE needs ON key columns")
        else:
            missing = [k for k in self.on if k not in {c.name for c in table.data_columns + table.partition_cols}]
            if missing:
                raise JobSpecError(f"ON keys {missing} are not columns of the target {table.name}")
        for c in self.clauses:
            for name in c.assignments:
                table.column(name)
        _not_placing_columns(table, {n for c in self.clauses if c.action == "update" for n in c.assignments})

    def to_dict(self) -> dict[str, Any]:
        return {"source": asdict(self.source), "on": self.on, "clauses": [asdict(c) for c in self.clauses]}


@dataclass(frozen=True)
class Read(Request):
    """Rows of the table at the snapshot as JSON lines into ``output`` (a path on the table's
    filesystem, so a driver anywhere can write it), at most ``limit``."""

    job: ClassVar[str] = "read"
    output: str | None = None
    columns: list[str] | None = None
    partition: str | None = None           # "ds=2024-01-01,hr=3"
    partition_filter: str | None = None    # a Spark SQL predicate over partition columns
    where: str | None = None
    order_by: list[str] | None = None
    limit: int | None = None
    with_row_id: bool = False

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        for name in self.columns or []:
            table.column(name)
        if self.limit is not None and self.limit < 0:
            raise JobSpecError(f"limit must be >= 0, got {self.limit}")


@dataclass(frozen=True)
class Compact(Request):
    """Compact one partition (``""`` for an unpartitioned table): ``major`` or ``minor``; the job
    runs in the compactor's txn and compacts every write id up to the spec's ``write_id``."""

    job: ClassVar[str] = "compact"
    type: str
    partition: str = ""
    compaction_id: int | None = None

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        if self.type not in ("major", "minor"):
            raise JobSpecError(f"compaction type must be 'major' or 'minor', not {self.type!r}")
        if table.insert_only:
            raise JobSpecError(f"{table.name} is insert-only: this compactor handles full-ACID tables")
        if bool(self.partition) != bool(table.partition_cols):
            raise JobSpecError(f"partition {self.partition!r} does not fit table {table.name}")


@dataclass(frozen=True)
class Clean(Request):
    """Delete what a compaction made obsolete (``mode="compaction"``, up to
    ``highest_write_id``), or what aborted writes left (``mode="aborted"``, directories of
    aborted write ids and staging of ``aborted_txns``) in ``partitions`` (None: all)."""

    job: ClassVar[str] = "clean"
    mode: str
    partitions: list[str] | None = None
    highest_write_id: int | None = None
    aborted_txns: list[int] = field(default_factory=list)
    compaction_id: int | None = None

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        if self.mode not in ("compaction", "aborted"):
            raise JobSpecError(f"clean mode must be 'compaction' or 'aborted', not {self.mode!r}")
        if self.mode == "compaction" and self.highest_write_id is None:
            raise JobSpecError("a compaction clean needs highest_write_id")


INGEST_FORMATS = ("parquet", "orc", "json", "csv")
INGEST_TRIGGERS = ("available_now", "processing")


@dataclass(frozen=True)
class Ingest(Request):
    """Structured Streaming of the files arriving in ``landing`` into the table, one txn per
    micro-batch (the ``hive_acid`` data source). ``trigger="available_now"`` processes what has
    arrived and stops; ``"processing"`` starts a micro-batch every ``interval`` seconds and stops
    after ``max_duration`` seconds, once the batch in flight is done. The driver opens the
    metastore at ``metastore`` for the batches' txns, or, when it is None, at the job's
    ``$HIVE_ACID_METASTORE`` (how the operator passes a URL that may hold a password: in the
    environment, not on the command line); ``checkpoint`` keeps the query's progress."""

    job: ClassVar[str] = "ingest"
    landing: str
    checkpoint: str
    metastore: str | None = None
    format: str = "parquet"
    trigger: str = "available_now"
    interval: float = 1.0
    max_duration: float | None = None
    max_files_per_trigger: int | None = None
    options: dict[str, str] = field(default_factory=dict)

    def validate(self, table: TableSpec) -> None:
        super().validate(table)
        for name in ("landing", "checkpoint", "metastore"):
            value = getattr(self, name)
            if (value is not None or name != "metastore") and (not isinstance(value, str) or not value.strip()):
                raise JobSpecError(f"ingest needs {name} (a path or URL), got {value!r}")
        if self.format not in INGEST_FORMATS:
            raise JobSpecError(f"ingest format must be one of {list(INGEST_FORMATS)}, not {self.format!r}")
        if self.trigger not in INGEST_TRIGGERS:
            raise JobSpecError(f"ingest trigger must be one of {list(INGEST_TRIGGERS)}, not {self.trigger!r}")
        if not self.interval > 0:
            raise JobSpecError(f"ingest interval must be positive, got {self.interval}")
        if self.max_duration is not None and not self.max_duration > 0:
            raise JobSpecError(f"ingest max_duration must be positive, got {self.max_duration}")
        if self.trigger == "processing" and self.max_duration is None:
            raise JobSpecError("a processing-time ingest needs max_duration: a task must end")
        if self.max_files_per_trigger is not None and self.max_files_per_trigger < 1:
            raise JobSpecError(f"max_files_per_trigger must be at least 1, got {self.max_files_per_trigger}")


REQUESTS: dict[str, type[Request]] = {r.job: r for r in (Insert, Delete, Update, Merge, Read, Compact, Clean,
                                                          Ingest)}


def request(job: str, args: dict[str, Any]) -> Request:
    """The request of job ``job`` from its arguments as JSON gives them."""
    if job not in REQUESTS:
        raise JobSpecError(f"unknown job {job!r}; one of {sorted(REQUESTS)}")
    return REQUESTS[job].from_dict(args)


@dataclass
class JobSpec:
    """One job: the table, the snapshot it reads at, its request, and where it writes (write id,
    statement ids; ``extra_statement_ids``: writer task i > 0 of a load writes under the i-th).
    ``shared_txn``: the statement joined a txn shared with other statements, so an earlier
    attempt of it may have left directories under the same ids. ``manifest_path`` is on the
    table's filesystem (the driver may run on another machine)."""

    table: TableSpec
    snapshot: SnapshotSpec
    request: Request
    manifest_path: str = ""
    txn_id: int = 0
    write_id: int = 0
    statement_id: int = 0
    extra_statement_ids: tuple[int, ...] = ()
    shared_txn: bool = False

    @property
    def job(self) -> str:
        return self.request.job

    @property
    def writer_statement_ids(self) -> tuple[int, ...]:
        return (self.statement_id, *self.extra_statement_ids)

    def to_json(self) -> str:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["table"], d["snapshot"] = asdict(self.table), asdict(self.snapshot)
        d["request"] = self.request.to_dict()
        d["job"] = self.job
        return json.dumps(d, default=list)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        try:
            d = json.loads(text)
        except ValueError as exc:
            raise JobSpecError(f"unreadable job spec: {exc}") from None
        try:
            return cls(table=TableSpec.from_dict(d["table"]), snapshot=SnapshotSpec(**d["snapshot"]),
                       request=request(d["job"], d["request"]), manifest_path=d.get("manifest_path", ""),
                       txn_id=d.get("txn_id", 0), write_id=d.get("write_id", 0),
                       statement_id=d.get("statement_id", 0),
                       extra_statement_ids=tuple(d.get("extra_statement_ids") or ()),
                       shared_txn=bool(d.get("shared_txn")))
        except (KeyError, TypeError) as exc:
            raise JobSpecError(f"malformed job spec: {exc}") from None


def partition_value_text(value: Any) -> str:
    """A partition column's value as its directory name spells it (NULL: Hive's default)."""
    if value is None:
        return DEFAULT_PARTITION_NAME
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- MERGE clauses and SET lists written as SQL ----------------------------------------------------
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
        set_m = re.match(r"UPDATE\s+SET\s+", action_text, re.I)
        if set_m is None:
            raise JobSpecError(f"cannot parse UPDATE in MERGE clause {text!r}: use UPDATE SET a = expr, ...")
        return MergeClause(when, "update", cond, parse_assignments(action_text[set_m.end():]))
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
    """Split on commas outside parentheses and quotes; a backslash escapes the next character
    inside a quoted string (``'it\\'s'``), as in Spark SQL."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quote, escaped = 0, None, False
    for ch in text:
        if quote:
            cur.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\" and quote != "`":
                escaped = True
            elif ch == quote:
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
