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
from .metrics import AcidMetrics, TableMetrics
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
    "Metastore", "HousekeepingReport", "AcidMetrics", "TableMetrics",
    "MetastoreError", "AlreadyExistsError", "CompactionError",
    "InvalidInputError", "LockTimeoutError", "NoSuchObjectError", "NotInitializedError", "TableNotFoundError",
    "TooManyOpenTxnsError", "TxnAbortedError", "TxnError", "TxnTimedOutError", "WriteConflictError",
    "NO_PARTITION", "CompactionInfo", "CompactionState", "CompactionType", "LockComponent", "LockInfo",
    "LockState", "LockType", "Operation", "StreamBatch", "TableInfo", "TableSnapshot", "TxnInfo", "TxnState", "TxnType",
    "WriteStat",
]
