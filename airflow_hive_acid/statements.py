"""One statement in a transaction, end to end: the transaction's steps (``writetxn.WriteTxn``:
write id, lock, snapshot, statement ids, heartbeat; commit in an own txn, recording the writes in
a txn shared by several tasks), with the Spark job in between.

Used by the CLI with a local spark-submit and by the Airflow hook with SparkSubmitHook: the
``submit`` callable is the only difference. Imports neither pyspark nor Airflow.
"""
from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .acid import fs as afs
from .errors import InvalidInputError
from .heartbeat import Heartbeater
from .jobs import (
    Delete,
    Insert,
    JobSpec,
    Manifest,
    Merge,
    PartitionStats,
    Read,
    Request,
    SnapshotSpec,
    SourceSpec,
    Submit,
    Update,
    run_job,
)
from .metastore import (
    LockComponent,
    LockType,
    Metastore,
    Operation,
    TableInfo,
    TxnType,
)
from .writetxn import WriteTxn, abort_quietly

log = logging.getLogger(__name__)

_OPERATION: dict[type[Request], Operation] = {Insert: Operation.INSERT, Delete: Operation.DELETE,
                                              Update: Operation.UPDATE, Merge: Operation.UPDATE}

# An INSERT into a bucketed table lets every writer task write its own delta, each under its own
# statement id (no shuffle): this many ids are kept for it, so at most this many tasks write.
LOAD_STATEMENT_IDS = 64


def table_source(ms: Metastore, table: str) -> SourceSpec:
    """Another ACID table as the source of an INSERT or MERGE, read at its current snapshot."""
    info = ms.catalog.get_table(table)
    snap = ms.txns.snapshot(info.qualified_name)
    return SourceSpec(table=info.to_spec(), snapshot=SnapshotSpec.of(snap))


@dataclass
class StatementResult:
    """What a statement did; ``to_dict`` is what an operator pushes to XCom."""

    table: str
    txn_id: int
    write_id: int
    statement_id: int
    committed: bool
    manifest: Manifest
    snapshot: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        m = self.manifest
        return {"table": self.table, "txn_id": self.txn_id, "write_id": self.write_id,
                "statement_id": self.statement_id, "committed": self.committed,
                "rows_inserted": m.rows_inserted, "rows_updated": m.rows_updated, "rows_deleted": m.rows_deleted,
                "files": m.files_written, "bytes": m.bytes_written,
                "partitions": [p.partition for p in m.partitions], "spark_app_id": m.spark_app_id,
                "job_seconds": round(m.seconds, 3), "stages": m.stages, "snapshot": self.snapshot}

    @classmethod
    def of_committed(cls, ms: Metastore, txn_id: int, table: str, statement_key: str) -> StatementResult:
        """What a statement of a committed txn did, from the metastore's records: a retried task
        whose earlier try committed reports the same things that try would have."""
        partitions = [PartitionStats(partition=w.partition, directories=[], **w.counts())
                      for w in ms.txns.writes_of(txn_id) if f"{w.db}.{w.table}" == table]
        stmt = ms.txns.statement_of(txn_id, table, statement_key)
        write_id = ms.txns.write_ids_of(txn_id).get(table, 0)
        manifest = Manifest(job="replayed", write_id=write_id, statement_id=stmt[0] if stmt else 0,
                            partitions=partitions)
        snapshot = json.loads(stmt[1]) if stmt and stmt[1] else {}
        return cls(table, txn_id, write_id, manifest.statement_id, True, manifest, snapshot)


class StatementRunner:
    """Runs DML and read jobs against one metastore with a given way to submit Spark jobs."""

    def __init__(self, metastore: Metastore, submit: Submit, *, agent_info: str = "hive-acid",
                 lock_wait: float | None = None, heartbeat_interval: float | None = None,
                 on_lost: Callable[[str], None] | None = None):
        self.ms = metastore
        self.submit = submit
        self.agent_info = agent_info
        self.lock_wait = lock_wait
        self.heartbeat_interval = heartbeat_interval
        self._txn: WriteTxn | None = None       # the statement running now
        self._read_txn: int | None = None       # the read-only txn of the read running now
        self.last_read: dict[str, Any] | None = None   # txn and snapshot of the last read, for lineage
        self.on_lost = on_lost if on_lost is not None else (lambda _reason: submit.kill())

    @property
    def own_txn(self) -> int | None:
        """The txn this runner opened and has not ended yet (what ``on_kill`` aborts)."""
        txn = self._txn
        if txn is not None and txn.own and not txn.ended:
            return txn.txn_id
        return self._read_txn

    # -- writes -----------------------------------------------------------------------------
    def run(self, request: Request, table: str, *, txn_id: int | None = None,
            statement_key: str = "default") -> StatementResult:
        """Run an INSERT, DELETE, UPDATE or MERGE on ``table``. Without ``txn_id`` the statement
        gets its own txn and commits it; with one it joins that txn and only records its writes
        (whoever owns the txn commits). The txn's steps are :class:`writetxn.WriteTxn`'s."""
        if type(request) not in _OPERATION:
            raise InvalidInputError(f"{type(request).__name__} is not a statement; one of "
                                    f"{sorted(t.__name__ for t in _OPERATION)}")
        info = self.ms.catalog.get_table(table)
        spec_table = info.to_spec()
        request.validate(spec_table)
        overwrite = isinstance(request, Insert) and request.overwrite
        partition = ""
        if isinstance(request, Insert) and request.partition and info.is_partitioned:
            partition = self.ms.catalog.partition_name(info, request.partition)
        txn = WriteTxn(self.ms, info, txn_id=txn_id, lock=LockType.EXCL_WRITE if overwrite else LockType.SHARED_WRITE,
                       operation=_OPERATION[type(request)], partition=partition, statement_key=statement_key,
                       statement_count=_statement_count(request, info), agent_info=self.agent_info,
                       lock_wait=self.lock_wait, heartbeat_interval=self.heartbeat_interval, on_lost=self.on_lost,
                       purpose=request.job)
        self._txn = txn
        try:
            with txn:
                manifest = run_job(self.submit, txn.job_spec(request, spec_table))
                txn.record(manifest.partitions)
        finally:
            self._txn = None
        assert txn.txn_id is not None and txn.snapshot is not None
        return StatementResult(info.qualified_name, txn.txn_id, txn.write_id, txn.statement_ids[0], txn.own, manifest,
                               txn.snapshot.to_dict())

    def _run(self, spec: JobSpec, txn_id: int) -> Manifest:
        return run_job(self.submit, spec, Heartbeater(self.ms, txn_id, self.heartbeat_interval, self.on_lost))

    # -- reads ------------------------------------------------------------------------------
    def read(self, table: str, request: Read, *, txn_id: int | None = None,
             at_write_id: int | None = None) -> Manifest:
        """Run a read job at a snapshot taken inside a txn (its own read-only one unless
        ``txn_id``), so the cleaner keeps every file the read needs until it ends."""
        info = self.ms.catalog.get_table(table)
        request.validate(info.to_spec())
        own = txn_id is None
        if txn_id is None:
            txn_id = self.ms.txns.open_txn(agent_info=self.agent_info, txn_type=TxnType.READ_ONLY)
            self._read_txn = txn_id
        try:
            self.ms.locks.lock([LockComponent(info.db, info.name, type=LockType.SHARED_READ)], txn_id,
                               wait=self.lock_wait, agent_info=self.agent_info)
            snap = self.ms.txns.snapshot(info.qualified_name, txn_id=txn_id)
            wl = snap.valid_write_ids
            if at_write_id is not None:
                wl = wl.as_of(at_write_id)
            self.last_read = {"txn_id": txn_id, "valid_write_ids": wl.to_string()}
            spec = JobSpec(table=info.to_spec(), snapshot=SnapshotSpec.of(snap, wl), request=request, txn_id=txn_id)
            manifest = self._run(spec, txn_id)
            if own:
                self.ms.txns.commit_txn(txn_id)
            return manifest
        except BaseException as exc:
            if own:
                abort_quietly(self.ms, txn_id, f"read failed: {exc}"[:2000])
            raise
        finally:
            self._read_txn = None


    def read_rows(self, table: str, request: Read, *, txn_id: int | None = None,
                  at_write_id: int | None = None) -> list[dict[str, Any]]:
        """:meth:`read`, with the rows brought back: the job writes them as JSON lines under the
        table's staging directory (its driver may run on another machine), and they are read and
        removed here."""
        info = self.ms.catalog.get_table(table)
        path = afs.join(info.location, afs.STAGING_DIR, f"read_{uuid.uuid4().hex}.jsonl")
        fs, p = afs.filesystem_for(path)
        try:
            self.read(table, replace(request, output=path), txn_id=txn_id, at_write_id=at_write_id)
            with fs.open_input_stream(p) as f:
                return [json.loads(line) for line in f.read().decode().splitlines() if line]
        finally:
            afs.remove_staged(fs, p)


def _statement_count(request: Request, info: TableInfo) -> int:
    if isinstance(request, Insert) and info.num_buckets and not request.overwrite:
        return LOAD_STATEMENT_IDS
    return 1
