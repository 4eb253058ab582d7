"""One write transaction, in one place: the sequence every writer of a table follows.

Open a txn (or join one given by id), allocate the table's write id, take the lock, take the
snapshot after the lock, allocate statement ids under a statement key, heartbeat while the work
runs, then commit with the write stats (own txn), record them with ``add_writes`` (joined txn:
its owner commits), or abort naming the writes known so far (on any exception, including
``KeyboardInterrupt``). A ``COMPACTION`` txn follows the same path without a write id or
statement ids. Shaped after Hive's ``DbTxnManager`` and pyiceberg's ``Transaction``:

    with WriteTxn(ms, info, statement_key=key) as txn:
        manifest = run_job(submit, txn.job_spec(request))
        txn.record(manifest.partitions)
    # committed here (or aborted, if the block raised)

``begin`` / ``commit`` / ``abort`` are the same steps for callers that cannot hold a ``with``
block open, such as a Spark data source writer whose ``commit()`` runs in another process than
its ``writer()`` (``handle()`` / ``resume``). Used by ``statements.py``, ``compactor.py`` and
``datasource/``; see docs/architecture.md §2. Imports neither pyspark nor Airflow.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType

from .errors import InvalidInputError, TxnError
from .heartbeat import Heartbeater, spawn_heartbeat_process, stop_heartbeat_process
from .jobs import JobSpec, PartitionStats, Request, SnapshotSpec, TableSpec
from .metastore import (
    LockComponent,
    LockType,
    Metastore,
    Operation,
    StreamBatch,
    TableInfo,
    TableSnapshot,
    TxnState,
    TxnType,
    WriteStat,
)

log = logging.getLogger(__name__)

__all__ = ["TxnHandle", "WriteTxn", "abort_quietly", "write_stats"]

_LOCKS = (LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.SHARED_READ)


def write_stats(info: TableInfo, write_id: int, partitions: Iterable[PartitionStats]) -> list[WriteStat]:
    """What a job's per-partition stats are to the metastore (conflict check, initiator)."""
    return [WriteStat(info.db, info.name, p.partition, write_id, Operation[p.operation.upper()], **p.counts())
            for p in partitions]


def abort_quietly(ms: Metastore, txn_id: int, reason: str, writes: Iterable[WriteStat] = ()) -> None:
    """Abort ``txn_id`` if it is still open, naming the ``writes`` it published so the cleaner
    finds them; a failure to abort is logged, as the error that led here matters more (the
    housekeeper ends the txn after its timeout anyway)."""
    try:
        if ms.txns.get_txn(txn_id).state is TxnState.OPEN:
            ms.txns.abort_txn(txn_id, reason[:2000], writes)
    except Exception:  # noqa: BLE001
        log.exception("could not abort transaction %s", txn_id)


@dataclass(frozen=True)
class TxnHandle:
    """What another process needs to finish a begun :class:`WriteTxn` (picklable: no
    connection, no thread)."""

    table: str
    txn_id: int
    write_id: int
    statement_ids: tuple[int, ...]
    own: bool
    purpose: str
    heartbeat_file: str | None = None     # removing it ends the txn's heartbeat process


class WriteTxn:
    """One table's write in a txn of its own or a joined one (``txn_id``): see the module
    docstring. ``lock`` is ``SHARED_WRITE``, ``EXCL_WRITE`` (INSERT OVERWRITE) or
    ``SHARED_READ`` (a compaction), on the table or on ``partition``. ``purpose`` names the work
    in an abort's reason (``"<purpose> failed: <error>"``, or ``abort_reason(error)``)."""

    def __init__(self, ms: Metastore, table: TableInfo, *, txn_id: int | None = None,
                 txn_type: TxnType = TxnType.DEFAULT, lock: LockType = LockType.SHARED_WRITE,
                 operation: Operation | None = Operation.INSERT, partition: str = "",
                 statement_key: str | None = "default", statement_count: int = 1,
                 agent_info: str = "hive-acid", lock_agent_info: str | None = None,
                 lock_wait: float | None = None, heartbeat_interval: float | None = None,
                 on_lost: Callable[[str], None] | None = None, purpose: str = "write",
                 abort_reason: Callable[[BaseException], str] | None = None):
        if not isinstance(table, TableInfo):
            raise InvalidInputError(f"WriteTxn needs the table's TableInfo, got {type(table).__name__}")
        if txn_type not in (TxnType.DEFAULT, TxnType.COMPACTION):
            raise InvalidInputError(f"a write transaction is DEFAULT or COMPACTION, not {txn_type.name}")
        if txn_type is TxnType.COMPACTION and txn_id is not None:
            raise InvalidInputError("a compaction opens its own transaction; it cannot join one")
        if txn_id is not None and (not isinstance(txn_id, int) or txn_id < 1):
            raise InvalidInputError(f"txn_id must be a positive integer, got {txn_id!r}")
        if lock not in _LOCKS:
            raise InvalidInputError(f"a write transaction locks with one of {[t.name for t in _LOCKS]}, "
                                    f"not {lock!r}")
        if not isinstance(statement_count, int) or statement_count < 1:
            raise InvalidInputError(f"statement_count must be at least 1, got {statement_count!r}")
        self.ms, self.info = ms, table
        self.own = txn_id is None
        self.txn_id: int | None = txn_id
        self.txn_type, self.lock_type, self.operation, self.partition = txn_type, lock, operation, partition
        self.statement_key = statement_key if txn_type is TxnType.DEFAULT else None
        self.statement_count = statement_count
        self.agent_info, self.lock_agent_info = agent_info, lock_agent_info or agent_info
        self.lock_wait, self.heartbeat_interval, self.on_lost = lock_wait, heartbeat_interval, on_lost
        self.purpose, self._abort_reason = purpose, abort_reason
        self.write_id = 0
        self.statement_ids: tuple[int, ...] = ()
        self.snapshot: TableSnapshot | None = None
        self.writes: list[WriteStat] = []
        self.ended = False
        self._heartbeater: Heartbeater | None = None
        self._heartbeat_file: str | None = None

    # -- the sequence ---------------------------------------------------------------------------
    def begin(self, *, heartbeat: str = "thread") -> WriteTxn:
        """Open (or join) the txn, allocate the write id, lock, snapshot, statement ids. The
        heartbeat starts as soon as the txn exists: ``"thread"`` here until the txn ends,
        ``"process"`` from a separate process that outlives this one (for a txn ended by
        another process, see :func:`heartbeat.spawn_heartbeat_process`), ``"none"``. On any
        failure an own txn is aborted."""
        if heartbeat not in ("thread", "process", "none"):
            raise InvalidInputError(f"heartbeat is 'thread', 'process' or 'none', not {heartbeat!r}")
        if self.snapshot is not None or self.ended:
            raise TxnError(f"transaction {self.txn_id} of this {self.purpose} has already begun")
        name = self.info.qualified_name
        if not self.own:
            assert self.txn_id is not None
            self.write_id = self.ms.txns.allocate_write_id(self.txn_id, name)
        elif self.txn_type is TxnType.DEFAULT:
            self.txn_id, wids = self.ms.txns.begin_write([name], agent_info=self.agent_info)
            self.write_id = wids[name]
        else:
            self.txn_id = self.ms.txns.open_txn(agent_info=self.agent_info, txn_type=self.txn_type)
        try:
            if heartbeat == "thread":
                self._heartbeater = Heartbeater(self.ms, self.txn_id, self.heartbeat_interval, self.on_lost)
                self._heartbeater.__enter__()
            elif heartbeat == "process":
                self._heartbeat_file = spawn_heartbeat_process(self.ms, self.txn_id, self.heartbeat_interval).while_file
            self.ms.locks.lock([LockComponent(self.info.db, self.info.name, self.partition, self.lock_type,
                                              self.operation)],
                               self.txn_id, wait=self.lock_wait, agent_info=self.lock_agent_info)
            self.snapshot = self.ms.txns.snapshot(name, txn_id=self.txn_id)
            if self.statement_key is not None:
                self.statement_ids = tuple(self.ms.txns.statement_ids(
                    self.txn_id, name, self.statement_key, self.statement_count,
                    snapshot=json.dumps(self.snapshot.to_dict())))
        except BaseException as exc:
            self.abort(self.reason(exc))
            raise
        return self

    def record(self, partitions: Iterable[PartitionStats]) -> list[WriteStat]:
        """Remember what the work wrote (a manifest's partitions): the commit records them, an
        abort names them so the cleaner finds the files."""
        self.writes = write_stats(self.info, self.write_id, partitions)
        return self.writes

    def check(self) -> None:
        """Raise ``HeartbeatLost`` if the metastore refused a heartbeat of this txn."""
        if self._heartbeater is not None:
            self._heartbeater.check()

    def commit(self, writes: Iterable[WriteStat] | None = None, *, stream: StreamBatch | None = None) -> None:
        """End the work: commit an own txn with ``writes`` (default: those :meth:`record`-ed) and
        the ``stream`` batch marker, or record them with ``add_writes`` in a joined txn. A lost
        heartbeat or a failed commit aborts an own txn and raises."""
        txn_id = self._begun()
        if writes is not None:
            self.writes = list(writes)
        try:
            self._stop_heartbeat()
            self.check()
            if self.own:
                self.ms.txns.commit_txn(txn_id, self.writes, stream=stream)
            elif stream is not None:
                raise InvalidInputError("a stream batch is committed by a txn of its own, not a joined one")
            else:
                self.ms.txns.add_writes(txn_id, self.writes)
        except BaseException as exc:
            self.abort(self.reason(exc))
            raise
        self.ended = True

    def abort(self, reason: str, writes: Iterable[WriteStat] | None = None) -> None:
        """Abort an own txn (if still open) naming ``writes`` (default: those recorded); a
        joined txn is its owner's to end, so only the heartbeat stops."""
        self._stop_heartbeat()
        if self.ended:
            return
        self.ended = True
        if self.own and self.txn_id is not None:
            abort_quietly(self.ms, self.txn_id, reason, self.writes if writes is None else writes)

    def reason(self, exc: BaseException) -> str:
        """The abort reason for ``exc``: ``abort_reason(exc)`` if given, else ``"<purpose> failed: <exc>"``."""
        return (self._abort_reason(exc) if self._abort_reason is not None else f"{self.purpose} failed: {exc}")[:2000]

    # -- a context manager ----------------------------------------------------------------------
    def __enter__(self) -> WriteTxn:
        return self.begin()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None:
            self.abort(self.reason(exc))
        elif not self.ended:
            self.commit()
        else:
            self._stop_heartbeat()

    # -- what a job or another process needs ----------------------------------------------------
    def job_spec(self, request: Request, table: TableSpec) -> JobSpec:
        """The spec of a job writing in this txn at its snapshot, under its statement ids."""
        return JobSpec(table=table, snapshot=SnapshotSpec.of(self._snapshot()), request=request, txn_id=self._begun(),
                       write_id=self.write_id, statement_id=self.statement_ids[0] if self.statement_ids else 0,
                       extra_statement_ids=self.statement_ids[1:], shared_txn=not self.own)

    def handle(self) -> TxnHandle:
        """This txn as a picklable value, for :meth:`resume` in another process."""
        return TxnHandle(self.info.qualified_name, self._begun(), self.write_id, self.statement_ids, self.own,
                         self.purpose, self._heartbeat_file)

    @classmethod
    def resume(cls, ms: Metastore, handle: TxnHandle, *, purpose: str | None = None) -> WriteTxn:
        """A begun txn (its :meth:`handle`) to commit or abort here, under ``purpose`` if given;
        no heartbeat of its own."""
        if not isinstance(handle, TxnHandle):
            raise InvalidInputError(f"resume needs a TxnHandle, got {type(handle).__name__}")
        txn = cls(ms, ms.catalog.get_table(handle.table), txn_id=None if handle.own else handle.txn_id,
                  purpose=purpose or handle.purpose)
        txn.txn_id, txn.write_id, txn.statement_ids = handle.txn_id, handle.write_id, handle.statement_ids
        txn._heartbeat_file = handle.heartbeat_file
        return txn

    # -- helpers ----------------------------------------------------------------------------------
    def _begun(self) -> int:
        if self.txn_id is None:
            raise TxnError(f"the transaction of this {self.purpose} has not begun")
        return self.txn_id

    def _snapshot(self) -> TableSnapshot:
        if self.snapshot is None:
            raise TxnError(f"the transaction of this {self.purpose} has no snapshot yet")
        return self.snapshot

    def _stop_heartbeat(self) -> None:
        if self._heartbeater is not None:
            self._heartbeater.stop()
        if self._heartbeat_file is not None:
            stop_heartbeat_process(self._heartbeat_file)
