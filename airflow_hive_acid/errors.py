"""The errors of airflow-hive-acid: one root, the kinds a caller tells apart, and the one rule
that says which failures a new attempt can fix (:func:`is_retryable`).

Every layer raises a subclass of :class:`HiveAcidError` (the format's ``AcidError``, the
metastore's ``MetastoreError``, the job contract's ``JobFailed``). A caller that only wants to
report one line catches the root (the CLI does); one that acts on the cause catches a kind:

=========================  ========================================================  =========
kind                       meaning                                                   retryable
=========================  ========================================================  =========
``InvalidInputError``      bad input: identifier, partition value, snapshot string,  no
                           schema, expression, argument (also a ``ValueError``)
``NoSuchObjectError``      unknown table (``TableNotFoundError``), txn, lock,        no
                           compaction
``TxnAbortedError``        the txn was aborted: ``WriteConflictError``,              yes [1]_
                           ``TxnTimedOutError``
``TxnError``               a txn that cannot do what was asked in its state          no
                           (already committed, no write id)
``TooManyOpenTxnsError``   the open-txn cap is reached (a ``TxnError``)              yes
``HeartbeatLost``          the metastore refused a heartbeat while a job ran         yes [1]_
``JobFailed``              a Spark job ended without success                         unless
                                                                                     ``bad_input``
``NotInitializedError``    the metastore has no schema yet                           no
``AlreadyExistsError``     a database or table that already exists                   no
``CompactionError``        a compaction request in the wrong state                   no
``LockTimeoutError``       a lock not granted within the wait limit                  yes
``AcidError`` and others   e.g. ``AcidFileError`` (a missing or unreadable file)     yes
``OSError``, the rest      a network or filesystem error, Spark's, the database's    yes
=========================  ========================================================  =========

.. [1] a new attempt of a statement in its own txn opens a new txn; one that joined a txn it
   did not open (``joined_txn``) would join the same aborted txn again, so that is final.
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

    def __init__(self, message: str, txn_id: int | None = None):
        super().__init__(message)
        self.txn_id = txn_id


class JobFailed(HiveAcidError):
    """A Spark job that ended without success; ``manifest`` is set if the job wrote one."""

    def __init__(self, message: str, manifest: object | None = None):
        super().__init__(message)
        self.manifest = manifest

    @property
    def bad_input(self) -> bool:
        """The job refused its input (a retry of the same job fails the same way)."""
        return bool(getattr(self.manifest, "bad_input", False))


# -- the metastore's own kinds (re-exported by ``metastore.errors``): here so that
# ``is_retryable`` can name them without this module importing a layer ----------------------
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


# Kinds whose cause a new attempt of the same work meets again: the input, a missing object,
# a metastore that needs an operator, a request or txn in a state that will not change.
_FINAL = (InvalidInputError, NoSuchObjectError, NotInitializedError, AlreadyExistsError, CompactionError)


def is_retryable(exc: BaseException, *, joined_txn: int | None = None) -> bool:
    """Whether a new attempt of the failed work may succeed: the one rule for the operators'
    ``fails_fast`` and a job's ``bad_input`` (the table in this module's docstring).

    ``joined_txn``: the txn the failed work joined rather than opened; its abort, or a lost
    heartbeat of it, is final, because a new attempt would join the same aborted txn. Unknown
    errors are retryable: the task's ``retries`` bound them, and failing fast on a passing
    network or filesystem error would lose work no retry was allowed to save."""
    if isinstance(exc, JobFailed):
        return not exc.bad_input
    if isinstance(exc, _FINAL):
        return False
    if isinstance(exc, (TxnAbortedError, HeartbeatLost)):
        return joined_txn is None or exc.txn_id != joined_txn
    if isinstance(exc, TooManyOpenTxnsError):
        return True
    if isinstance(exc, TxnError):
        return False
    return True
