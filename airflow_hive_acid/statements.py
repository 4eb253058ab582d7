"""One statement in a transaction, end to end: write id, statement id, lock, snapshot, heartbeat,
the Spark job, and commit (own txn) or recording the writes (a txn shared by several tasks).

Used by the CLI with a local spark-submit and by the Airflow hook with SparkSubmitHook: the
``submit`` callable is the only difference. Imports neither pyspark nor Airflow.
"""
from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .acid.types import format_columns
from .acid.writeids import ValidWriteIdList
from .heartbeat import Heartbeater
from .metastore import (
    LockComponent,
    LockType,
    Metastore,
    Operation,
    TableInfo,
    TxnState,
    TxnType,
    WriteStat,
)
from .spark.protocol import JobSpec, Manifest, SnapshotSpec, SourceSpec, TableSpec, parse_merge_clause

log = logging.getLogger(__name__)

Submit = Callable[[JobSpec, str], Manifest]

_OPERATION = {"insert": Operation.INSERT, "delete": Operation.DELETE, "update": Operation.UPDATE,
              "merge": Operation.UPDATE}


def table_spec(info: TableInfo) -> TableSpec:
    return TableSpec(name=info.qualified_name, location=info.location, columns=format_columns(info.columns),
                     partition_columns=format_columns(info.partition_columns),
                     bucket_columns=tuple(info.bucket_columns), num_buckets=info.num_buckets,
                     bucketing_version=info.bucketing_version, insert_only=info.is_insert_only,
                     compression=info.compression)


def writes_from_manifest(info: TableInfo, write_id: int, manifest: Manifest) -> list[WriteStat]:
    return [WriteStat(info.db, info.name, p.partition, write_id, Operation(p.operation), **p.counts())
            for p in manifest.partitions]


def source_args(ms: Metastore, *, path: str | None = None, format: str | None = None,
                options: dict[str, str] | None = None, table: str | None = None) -> dict[str, Any]:
    """The ``source`` argument of INSERT / MERGE: files at ``path``, or another ACID table read
    at its current snapshot."""
    if bool(path) == bool(table):
        raise ValueError("give exactly one source: a path (ORC/Parquet/CSV/JSON files) or an ACID table")
    if table:
        info = ms.catalog.get_table(table)
        snap = ms.txns.snapshot(info.qualified_name)
        return {"table": table_spec(info).__dict__,
                "snapshot": {"valid_txns": snap.valid_txns.to_string(),
                             "valid_write_ids": snap.valid_write_ids.to_string()}}
    return {"path": path, "format": format, "options": dict(options or {})}


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


class StatementRunner:
    """Runs DML and read jobs against one metastore with a given way to submit Spark jobs."""

    def __init__(self, metastore: Metastore, submit: Submit, *, work_dir: str | None = None,
                 agent_info: str = "hive-acid", lock_wait: float | None = None,
                 heartbeat_interval: float | None = None, on_lost: Callable[[str], None] | None = None):
        self.ms = metastore
        self.submit = submit
        self.work_dir = work_dir
        self.agent_info = agent_info
        self.lock_wait = lock_wait
        self.heartbeat_interval = heartbeat_interval
        self.own_txn: int | None = None   # the txn this runner opened and has not ended yet
        if on_lost is None and hasattr(submit, "kill"):
            def on_lost(_reason: str) -> None:   # the txn is gone: stop the job writing for it
                submit.kill()  # type: ignore[attr-defined]
        self.on_lost = on_lost

    # -- writes -----------------------------------------------------------------------------
    def run(self, job: str, table: str, args: dict[str, Any], *, txn_id: int | None = None,
            statement_key: str = "default") -> StatementResult:
        """Run ``job`` (insert, delete, update, merge) on ``table``. Without ``txn_id`` the
        statement gets its own txn and commits it; with one it joins that txn and only records
        its writes (whoever owns the txn commits)."""
        if job not in _OPERATION:
            raise ValueError(f"unknown DML job {job!r}; one of {sorted(_OPERATION)}")
        info = self.ms.catalog.get_table(table)
        _validate_args(job, info, args)
        own = txn_id is None
        if own:
            txn_id, wids = self.ms.txns.begin_write([info.qualified_name], agent_info=self.agent_info)
            write_id = wids[info.qualified_name]
            self.own_txn = txn_id
        else:
            write_id = self.ms.txns.allocate_write_id(txn_id, info.qualified_name)
        manifest: Manifest | None = None
        try:
            ids = self.ms.txns.statement_ids(txn_id, info.qualified_name, statement_key,
                                             _statement_count(job, info, args))
            stmt = ids[0]
            self._lock(txn_id, info, job, args)
            snap = self.ms.txns.snapshot(info.qualified_name, txn_id=txn_id)
            spec = JobSpec(job=job, table=table_spec(info),
                           snapshot=SnapshotSpec(snap.valid_txns.to_string(), snap.valid_write_ids.to_string()),
                           manifest_path="", txn_id=txn_id, write_id=write_id, statement_id=stmt, args=args,
                           extra_statement_ids=tuple(ids[1:]))
            manifest = self._submit(spec, txn_id)
            writes = writes_from_manifest(info, write_id, manifest)
            if own:
                self.ms.txns.commit_txn(txn_id, writes)
            else:
                self.ms.txns.add_writes(txn_id, writes)
            return StatementResult(info.qualified_name, txn_id, write_id, stmt, own, manifest, snap.to_dict())
        except BaseException as exc:
            if own:
                self._abort_quietly(txn_id, f"{job} failed: {exc}"[:2000], info, write_id, manifest)
            raise
        finally:
            self.own_txn = None

    def _lock(self, txn_id: int, info: TableInfo, job: str, args: dict[str, Any]) -> None:
        overwrite = job == "insert" and args.get("overwrite")
        lock_type = LockType.EXCL_WRITE if overwrite else LockType.SHARED_WRITE
        partition = ""
        if args.get("partition") and info.is_partitioned:
            partition = self.ms.catalog.partition_name(info, args["partition"])
        self.ms.locks.lock([LockComponent(info.db, info.name, partition, lock_type, _OPERATION[job])], txn_id,
                           wait=self.lock_wait, agent_info=self.agent_info)

    def _submit(self, spec: JobSpec, txn_id: int) -> Manifest:
        with tempfile.TemporaryDirectory(prefix="hive-acid-job-", dir=self.work_dir) as tmp:
            spec.manifest_path = os.path.join(tmp, "manifest.json")
            spec_path = os.path.join(tmp, "spec.json")
            spec.save(spec_path)
            with Heartbeater(self.ms, txn_id, self.heartbeat_interval, self.on_lost):
                return self.submit(spec, spec_path)

    def _abort_quietly(self, txn_id: int, reason: str, info: TableInfo, write_id: int,
                       manifest: Manifest | None) -> None:
        try:
            state = self.ms.txns.get_txn(txn_id).state
            if state is TxnState.OPEN:
                writes = writes_from_manifest(info, write_id, manifest) if manifest else []
                self.ms.txns.abort_txn(txn_id, reason, writes)
        except Exception:  # noqa: BLE001 - the original error matters more; the housekeeper ends it
            log.exception("could not abort transaction %s", txn_id)

    # -- reads ------------------------------------------------------------------------------
    def read(self, table: str, args: dict[str, Any], *, txn_id: int | None = None,
             at_write_id: int | None = None) -> Manifest:
        """Run a read job at a snapshot taken inside a txn (its own read-only one unless
        ``txn_id``), so the cleaner keeps every file the read needs until it ends."""
        info = self.ms.catalog.get_table(table)
        own = txn_id is None
        if own:
            txn_id = self.ms.txns.open_txn(agent_info=self.agent_info, txn_type=TxnType.READ_ONLY)
            self.own_txn = txn_id
        try:
            self.ms.locks.lock([LockComponent(info.db, info.name, type=LockType.SHARED_READ)], txn_id,
                               wait=self.lock_wait, agent_info=self.agent_info)
            snap = self.ms.txns.snapshot(info.qualified_name, txn_id=txn_id)
            wl = snap.valid_write_ids
            if at_write_id is not None:
                wl = _as_of(wl, at_write_id)
            spec = JobSpec(job="read", table=table_spec(info),
                           snapshot=SnapshotSpec(snap.valid_txns.to_string(), wl.to_string()),
                           manifest_path="", txn_id=txn_id, args=args)
            manifest = self._submit(spec, txn_id)
            if own:
                self.ms.txns.commit_txn(txn_id)
            return manifest
        except BaseException as exc:
            if own:
                self._abort_quietly(txn_id, f"read failed: {exc}"[:2000], info, 0, None)
            raise
        finally:
            self.own_txn = None


# An INSERT into a bucketed table lets every writer task write its own delta, each under its own
# statement id (no shuffle): this many ids are kept for it, so at most this many tasks write.
LOAD_STATEMENT_IDS = 64


def _statement_count(job: str, info: TableInfo, args: dict[str, Any]) -> int:
    if job == "insert" and info.num_buckets and not args.get("overwrite"):
        return LOAD_STATEMENT_IDS
    return 1


def _as_of(wl: ValidWriteIdList, write_id: int) -> ValidWriteIdList:
    """The snapshot as of an older write id: everything above it invisible."""
    if write_id < 0 or write_id > wl.high_watermark:
        raise ValueError(f"--at-write-id {write_id} is outside 0..{wl.high_watermark} (the table's high watermark)")
    open_ids = tuple(i for i in wl.open_ids if i <= write_id)
    aborted = tuple(i for i in wl.aborted_ids if i <= write_id)
    return ValidWriteIdList(write_id, open_ids, aborted, table=wl.table)


def _validate_args(job: str, info: TableInfo, args: dict[str, Any]) -> None:
    """Client-side checks that need no Spark: the job re-checks everything."""
    if info.is_insert_only and job != "insert":
        raise ValueError(f"{info.qualified_name} is an insert-only table: only INSERT is allowed")
    if job in ("insert", "merge"):
        source = SourceSpec.from_dict(args.get("source"))
        if source is None:
            raise ValueError(f"{job} needs a source")
        if source.path and "://" not in source.path and not Path(source.path).exists():
            raise ValueError(f"source {source.path} does not exist")
    if job == "delete" and not (args.get("where") or "").strip():
        raise ValueError("DELETE needs a WHERE condition (use 'true' to delete every row)")
    if job == "update" and not args.get("set"):
        raise ValueError("UPDATE needs SET assignments")
    assigned = set(args.get("set") or {})
    for clause in args.get("clauses") or []:
        if isinstance(clause, str):
            clause = parse_merge_clause(clause).__dict__
        if clause.get("action") == "update":
            assigned |= set(clause.get("assignments") or {})
    for col in sorted(assigned):
        name = str(col).strip().lower()
        if name in {c.name for c in info.partition_columns}:
            raise ValueError(f"cannot update partition column {name!r} of {info.qualified_name}: "
                             "the row would move to another partition (DELETE and INSERT it instead)")
        if name in info.bucket_columns:
            raise ValueError(f"cannot update bucket column {name!r} of {info.qualified_name}: "
                             "the row would move to another bucket (DELETE and INSERT it instead)")
