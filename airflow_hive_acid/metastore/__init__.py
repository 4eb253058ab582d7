"""The metastore: catalog, transactions, write ids, snapshots, locks and the compaction queue.

SQLAlchemy Core over an SQLite file (default) or PostgreSQL. Knows nothing of Spark or Airflow.
"""
from .errors import (
    AlreadyExistsError,
    CompactionError,
    InvalidInputError,
    LockTimeoutError,
    MetastoreError,
    NoSuchObjectError,
    NotInitializedError,
    TableNotFoundError,
    TooManyOpenTxnsError,
    TxnAbortedError,
    TxnError,
    TxnTimedOutError,
    WriteConflictError,
)
from .models import (
    NO_PARTITION,
    CompactionInfo,
    CompactionState,
    CompactionType,
    LockComponent,
    LockInfo,
    LockState,
    LockType,
    Operation,
    StreamBatch,
    TableInfo,
    TableSnapshot,
    TxnInfo,
    TxnState,
    TxnType,
    WriteStat,
)
from .store import HousekeepingReport, Metastore

__all__ = [
    "Metastore", "HousekeepingReport", "MetastoreError", "AlreadyExistsError", "CompactionError",
    "InvalidInputError", "LockTimeoutError", "NoSuchObjectError", "NotInitializedError", "TableNotFoundError",
    "TooManyOpenTxnsError", "TxnAbortedError", "TxnError", "TxnTimedOutError", "WriteConflictError",
    "NO_PARTITION", "CompactionInfo", "CompactionState", "CompactionType", "LockComponent", "LockInfo",
    "LockState", "LockType", "Operation", "StreamBatch", "TableInfo", "TableSnapshot", "TxnInfo", "TxnState", "TxnType",
    "WriteStat",
]
