"""Errors of the metastore. Each names what is wrong; the CLI prints them as they are. The kinds
callers tell apart are the package's own (``airflow_hive_acid.errors``), re-exported here."""
from __future__ import annotations

from ..errors import (
    HiveAcidError,
    InvalidInputError,
    NoSuchObjectError,
    TableNotFoundError,
    TxnAbortedError,
    TxnError,
    TxnTimedOutError,
    WriteConflictError,
)

__all__ = ["MetastoreError", "NotInitializedError", "NoSuchObjectError", "TableNotFoundError", "AlreadyExistsError",
           "InvalidInputError", "TxnError", "TxnAbortedError", "TxnTimedOutError", "WriteConflictError",
           "TooManyOpenTxnsError", "LockTimeoutError", "CompactionError"]


class MetastoreError(HiveAcidError):
    """Base of the errors only the metastore raises."""


class NotInitializedError(MetastoreError):
    """The metastore database has no schema yet (run ``hive-acid init``)."""


class AlreadyExistsError(MetastoreError):
    """A database or table that already exists."""


class TooManyOpenTxnsError(TxnError):
    """The cap on open transactions (``max_open_txns``) is reached."""


class LockTimeoutError(MetastoreError):
    """A lock could not be acquired within the wait limit."""


class CompactionError(MetastoreError):
    """A compaction request that cannot be enqueued or moved to the asked state."""
