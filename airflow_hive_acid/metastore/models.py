"""Plain records the metastore hands out: tables, transactions, snapshots, locks, compactions."""
from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field
from typing import Any

from ..acid.compression import table_compression
from ..acid.stats import WriteCounts
from ..acid.table import TableSpec
from ..acid.types import Column, format_columns
from ..acid.writeids import ValidTxnList, ValidWriteIdList
from ..errors import InvalidInputError

NO_PARTITION = ""


# The enums below name the states and kinds Hive's metastore tables store as one-letter codes;
# each member's value is its code, and this is the only place a code is spelled: the schema's
# ``Code`` columns turn members into codes and back (``schema.py``).
class TxnState(str, enum.Enum):
    OPEN = "o"
    ABORTED = "a"
    COMMITTED = "c"

    @property
    def label(self) -> str:
        return {"o": "OPEN", "a": "ABORTED", "c": "COMMITTED"}[self.value]


class TxnType(enum.IntEnum):
    DEFAULT = 0
    READ_ONLY = 2
    COMPACTION = 3


class Operation(str, enum.Enum):
    """What a transaction did to a table or partition (Hive's ``TC_OPERATION_TYPE``)."""

    INSERT = "i"
    UPDATE = "u"
    DELETE = "d"
    COMPACT = "c"       # the compactor's output (write stats, components of a compactor txn)

    @property
    def rewrites(self) -> bool:
        """Updates and deletes conflict with each other; inserts never do."""
        return self in (Operation.UPDATE, Operation.DELETE)


class LockType(str, enum.Enum):
    SHARED_READ = "r"
    SHARED_WRITE = "w"
    EXCL_WRITE = "x"
    EXCLUSIVE = "e"


class LockState(str, enum.Enum):
    ACQUIRED = "a"
    WAITING = "w"


class CompactionType(str, enum.Enum):
    MAJOR = "a"
    MINOR = "i"

    @classmethod
    def parse(cls, text: str | CompactionType) -> CompactionType:
        if isinstance(text, CompactionType):
            return text
        try:
            return {"major": cls.MAJOR, "minor": cls.MINOR}[str(text).strip().lower()]
        except KeyError:
            raise InvalidInputError(f"unknown compaction type {text!r}: use 'major' or 'minor'") from None


class CompactionState(str, enum.Enum):
    INITIATED = "i"
    WORKING = "w"
    READY_FOR_CLEANING = "r"
    FAILED = "f"
    SUCCEEDED = "s"
    DID_NOT_INITIATE = "a"
    REFUSED = "c"

    @property
    def label(self) -> str:
        return {"i": "initiated", "w": "working", "r": "ready for cleaning", "f": "failed",
                "s": "succeeded", "a": "did not initiate", "c": "refused"}[self.value]

    @classmethod
    def parse(cls, text: str | CompactionState) -> CompactionState:
        if isinstance(text, CompactionState):
            return text
        t = str(text).strip().lower().replace("_", " ")
        for s in cls:
            if t in (s.value, s.label, s.name.lower().replace("_", " ")):
                return s
        raise InvalidInputError(f"unknown compaction state {text!r}: one of {[s.label for s in cls]}")


@dataclass(frozen=True)
class TableInfo:
    """A table as the catalog knows it."""

    db: str
    name: str
    location: str
    columns: list[Column]
    partition_columns: list[Column]
    bucket_columns: list[str]
    num_buckets: int
    properties: dict[str, str]
    created_at: int

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_columns)

    @property
    def is_insert_only(self) -> bool:
        return self.properties.get("transactional_properties", "default").lower() == "insert_only"

    @property
    def is_transactional(self) -> bool:
        return self.properties.get("transactional", "false").lower() == "true"

    @property
    def bucketing_version(self) -> int:
        return int(self.properties.get("bucketing_version", "2"))

    @property
    def compression(self) -> str:
        """The codec its ORC files are written with (``orc.compress``, as pyarrow names it)."""
        return table_compression(self.properties)

    def to_spec(self) -> TableSpec:
        """The table as the format and a job see it (``acid.table.TableSpec``, the one model of
        a table; docs/architecture.md §1)."""
        return TableSpec(name=self.qualified_name, location=self.location, columns=format_columns(self.columns),
                         partition_columns=format_columns(self.partition_columns),
                         bucket_columns=tuple(self.bucket_columns), num_buckets=self.num_buckets,
                         bucketing_version=self.bucketing_version, insert_only=self.is_insert_only,
                         compression=self.compression)

    def to_dict(self) -> dict[str, Any]:
        return {
            "db": self.db, "table": self.name, "location": self.location,
            "columns": format_columns(self.columns),
            "partition_columns": format_columns(self.partition_columns),
            "bucket_columns": self.bucket_columns, "num_buckets": self.num_buckets,
            "properties": dict(self.properties), "created_at": self.created_at,
        }


@dataclass(frozen=True)
class TxnInfo:
    txn_id: int
    state: TxnState
    started: int
    last_heartbeat: int
    user: str
    host: str
    agent_info: str
    reason: str | None
    txn_type: TxnType
    ended: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"txn_id": self.txn_id, "state": self.state.label, "started": self.started,
                "last_heartbeat": self.last_heartbeat, "user": self.user, "host": self.host,
                "agent_info": self.agent_info, "reason": self.reason, "type": self.txn_type.name,
                "ended": self.ended}


@dataclass(frozen=True)
class TableSnapshot:
    """A reader's snapshot of one table: the txn list and the table's write-id list."""

    valid_txns: ValidTxnList
    valid_write_ids: ValidWriteIdList

    def to_dict(self) -> dict[str, Any]:
        w = self.valid_write_ids
        return {"table": w.table, "valid_write_ids": w.to_string(), "valid_txns": self.valid_txns.to_string(),
                "high_watermark": w.high_watermark, "open": list(w.open_ids), "aborted": list(w.aborted_ids)}


@dataclass
class WriteStat(WriteCounts):
    """What one committed write added to one table or partition (from the job's manifest)."""

    db: str
    table: str
    partition: str = NO_PARTITION
    write_id: int = 0
    operation: Operation = Operation.INSERT

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["operation"] = self.operation.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WriteStat:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise InvalidInputError(f"unknown write stat fields {sorted(unknown)}")
        d = dict(d)
        d["operation"] = Operation(d.get("operation", Operation.INSERT))
        return cls(**d)


@dataclass(frozen=True)
class StreamBatch:
    """One micro-batch of a streaming query, committed with the txn that wrote it so that a batch
    Spark replays after a crash is recognised (``TxnManager.stream_batch``)."""

    table: str          # db.table
    query_id: str
    batch_id: int
    txn_id: int = 0
    write_id: int = 0
    rows: int = 0
    committed_at: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LockComponent:
    """One resource of a lock request: a database, a table, or a partition."""

    db: str
    table: str = ""
    partition: str = NO_PARTITION
    type: LockType = LockType.SHARED_READ
    operation: Operation | None = None   # for write locks: recorded as a txn component


@dataclass(frozen=True)
class LockInfo:
    ext_id: int
    int_id: int
    txn_id: int
    db: str
    table: str
    partition: str
    state: LockState
    type: LockType
    last_heartbeat: int
    acquired_at: int | None
    user: str
    host: str
    agent_info: str
    blocked_by: tuple[int, int] | None

    def to_dict(self) -> dict[str, Any]:
        return {"lock_id": f"{self.ext_id}.{self.int_id}", "database": self.db, "table": self.table or None,
                "partition": self.partition or None, "state": self.state.name, "type": self.type.name,
                "blocked_by": f"{self.blocked_by[0]}.{self.blocked_by[1]}" if self.blocked_by else None,
                "txn_id": self.txn_id or None, "last_heartbeat": self.last_heartbeat,
                "acquired_at": self.acquired_at, "user": self.user, "host": self.host,
                "agent_info": self.agent_info}


@dataclass(frozen=True)
class CompactionInfo:
    id: int
    db: str
    table: str
    partition: str
    type: CompactionType
    state: CompactionState
    worker_id: str | None
    enqueue_time: int
    start: int | None
    end: int | None
    highest_write_id: int | None
    txn_id: int | None
    next_txn_id: int | None
    commit_time: int | None
    error_message: str | None
    meta_info: str | None
    initiator_id: str | None
    spark_app_id: str | None
    manual: bool
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int | None:
        if self.start is None:
            return None
        return (self.end - self.start) if self.end else None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "database": self.db, "table": self.table, "partition": self.partition or None,
                "type": self.type.name, "state": self.state.label, "worker": self.worker_id,
                "enqueue_time": self.enqueue_time, "start": self.start, "end": self.end,
                "duration_ms": self.duration_ms, "highest_write_id": self.highest_write_id,
                "txn_id": self.txn_id, "next_txn_id": self.next_txn_id, "commit_time": self.commit_time,
                "error": self.error_message, "reason": self.meta_info, "initiator": self.initiator_id,
                "spark_app_id": self.spark_app_id, "manual": self.manual}
