"""Errors of the metastore. Each names what is wrong; the CLI prints them as they are."""
from __future__ import annotations


class MetastoreError(Exception):
    """Base of every metastore error."""


class NotInitializedError(MetastoreError):
    """The metastore database has no schema yet (run ``hive-acid init``)."""


class NoSuchObjectError(MetastoreError):
    """Unknown database, table, partition, transaction, lock or compaction."""


class AlreadyExistsError(MetastoreError):
    """A database or table that already exists."""


class InvalidInputError(MetastoreError, ValueError):
    """A bad identifier, partition spec, property or argument."""


class TxnError(MetastoreError):
    """A transaction that cannot do what was asked in its state."""


class TxnAbortedError(TxnError):
    """The transaction was aborted (the reason is in the message and in ``reason``)."""

    def __init__(self, message: str, txn_id: int, reason: str | None):
        super().__init__(message)
        self.txn_id = txn_id
        self.reason = reason


class TxnTimedOutError(TxnAbortedError):
    """The transaction stopped heartbeating for longer than ``txn_timeout`` and was aborted."""


class WriteConflictError(TxnAbortedError):
    """Another transaction committed an update/delete of the same partition first."""


class TooManyOpenTxnsError(TxnError):
    """The cap on open transactions (``max_open_txns``) is reached."""


class LockTimeoutError(MetastoreError):
    """A lock could not be acquired within the wait limit."""


class CompactionError(MetastoreError):
    """A compaction request that cannot be enqueued or moved to the asked state."""
