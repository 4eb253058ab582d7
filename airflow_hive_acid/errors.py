"""The errors of airflow-hive-acid: one root, and the kinds a caller tells apart.

Every layer raises a subclass of :class:`HiveAcidError` (the format's ``AcidError``, the
metastore's ``MetastoreError``, the job contract's ``JobFailed``). A caller that only wants to
report one line catches the root (the CLI does); one that acts on the cause catches a kind:

=====================  =================================================================
``InvalidInputError``  bad input: identifier, partition value, snapshot string, schema,
                       expression, argument — retrying the same call cannot help
``NoSuchObjectError``  unknown table (``TableNotFoundError``), txn, lock, compaction
``TxnAbortedError``    the txn was aborted: ``WriteConflictError``, ``TxnTimedOutError``
``HeartbeatLost``      the metastore refused a heartbeat while a job ran
``JobFailed``          a Spark job ended without success (its own error, or its exit status)
=====================  =================================================================
"""
from __future__ import annotations


class HiveAcidError(Exception):
    """Root of every error this package raises on purpose."""


class InvalidInputError(HiveAcidError, ValueError):
    """Input that names no valid thing or breaks a rule; the message says which and why."""


class NoSuchObjectError(HiveAcidError):
    """Unknown database, table, partition, transaction, lock or compaction."""


class TableNotFoundError(NoSuchObjectError):
    """Unknown database or table."""


class TxnError(HiveAcidError):
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


class HeartbeatLost(HiveAcidError):
    """The metastore refused a heartbeat: the txn was aborted (timed out, or by someone else)."""


class JobFailed(HiveAcidError):
    """A Spark job that ended without success; ``manifest`` is set if the job wrote one."""

    def __init__(self, message: str, manifest: object | None = None):
        super().__init__(message)
        self.manifest = manifest

    @property
    def bad_input(self) -> bool:
        """The job refused its input (a retry of the same job fails the same way)."""
        return bool(getattr(self.manifest, "bad_input", False))
