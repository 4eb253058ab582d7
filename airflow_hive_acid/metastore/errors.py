"""Errors of the metastore. Each names what is wrong; the CLI prints them as they are. They are
kinds of the package's own family (``airflow_hive_acid.errors``, which also says which are
retryable), re-exported here."""
from __future__ import annotations

from ..errors import (
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

__all__ = ["MetastoreError", "NotInitializedError", "NoSuchObjectError", "TableNotFoundError",
           "AlreadyExistsError", "InvalidInputError", "TxnError", "TxnAbortedError", "TxnTimedOutError",
           "WriteConflictError", "TooManyOpenTxnsError", "LockTimeoutError", "CompactionError"]
