"""Compaction end to end: initiator, worker, cleaner and manual ``ALTER TABLE ... COMPACT``.

The worker follows Hive 4's (``docs/format.md``, compaction): claim a request, open its own
COMPACTION txn (``writetxn.WriteTxn``, the one path every writer takes), SHARED_READ-lock the
partition, compact every write id below the lowest open one (the compactor ValidWriteIdList),
run the Spark job with the txn heartbeating, record the output, mark the request ``ready for
cleaning`` and commit. Any failure aborts the txn (its ``_v<txn>`` output stays invisible and
the cleaner removes it) and marks the request ``failed`` with the error. The cleaner runs a
Spark job per request once no txn that was open when the compactor committed remains, and
marks it ``succeeded`` only if the job found the obsolete files gone; it also removes what
aborted writes left behind.

Like ``statements.py``, it imports neither pyspark nor Airflow: ``submit`` runs a job.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from .jobs import Clean, CleanOutput, Compact, CompactOutput, JobSpec, SnapshotSpec, Submit, run_job
from .metastore import (
    CompactionInfo,
    CompactionState,
    CompactionType,
    InvalidInputError,
    LockType,
    Metastore,
    NoSuchObjectError,
    TableInfo,
    TxnState,
    TxnType,
)
from .metastore.initiator import InitiatorDecision, default_initiator_id
from .writetxn import WriteTxn

log = logging.getLogger(__name__)

__all__ = ["CleanResult", "Compactor", "InitiatorDecision", "WorkerResult"]


@dataclass
class WorkerResult:
    """One request a worker ran: its final state and what the job did."""

    id: int
    table: str
    partition: str
    type: str
    state: str
    txn_id: int | None = None
    highest_write_id: int | None = None
    input: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    rows: int = 0
    delete_events: int = 0
    bytes: int = 0
    seconds: float = 0.0
    spark_app_id: str | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["partition"] = self.partition or None
        return d


@dataclass
class CleanResult:
    """One cleaner task: a compaction's obsolete files, or what aborted writes left."""

    kind: str                         # "compaction" | "aborted"
    table: str
    partitions: list[str] | None
    id: int | None = None             # the compaction request, for kind "compaction"
    state: str | None = None          # the request's state afterwards
    deleted: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Compactor:
    """Initiator, worker and cleaner over one metastore, running Spark jobs with ``submit``
    (LocalSubmitter in the CLI and tests, the Airflow hook's own in operators)."""

    def __init__(self, metastore: Metastore, submit: Submit, *, worker_id: str | None = None,
                 heartbeat_interval: float | None = None):
        self.ms = metastore
        self.submit = submit
        self.worker_id = worker_id or default_initiator_id()
        self.heartbeat_interval = heartbeat_interval

    # -- initiator ------------------------------------------------------------------------------
    def initiate(self, *, table: str | None = None) -> list[InitiatorDecision]:
        """One initiator cycle: queue the compactions the recorded write stats call for."""
        return self.ms.initiator.run(table=table, initiator_id=self.worker_id)

    # -- worker ---------------------------------------------------------------------------------
    def run_worker(self, *, table: str | None = None, cq_id: int | None = None) -> WorkerResult | None:
        """Claim one initiated request (the given one if ``cq_id``) and run it; None if there is
        nothing to claim. Requests of dead workers are recovered first."""
        if cq_id is not None:
            self.ms.compactions.get(cq_id)    # unknown id -> NoSuchObjectError
        self.ms.compactions.recover_abandoned(self.ms.txns.timeout_ms)
        req = self.ms.compactions.claim(self.worker_id, table=table, cq_id=cq_id)
        if req is None:
            return None
        name = f"{req.db}.{req.table}"
        res = WorkerResult(req.id, name, req.partition, req.type.name, CompactionState.WORKING.label)
        started = time.time()
        txn: WriteTxn | None = None
        try:
            try:
                info = self.ms.catalog.get_table(name)
            except NoSuchObjectError:
                return self._refuse(res, f"table {name} no longer exists")
            if info.is_insert_only or not info.is_transactional:
                return self._refuse(res, f"{name} is not a full-ACID table; only full-ACID tables are compacted")
            txn = WriteTxn(self.ms, info, txn_type=TxnType.COMPACTION, lock=LockType.SHARED_READ, operation=None,
                           partition=req.partition, agent_info=f"compactor {self.worker_id} request {req.id}",
                           lock_agent_info=f"compactor {self.worker_id}", heartbeat_interval=self.heartbeat_interval,
                           on_lost=lambda _reason: self.submit.kill(), purpose=f"compaction {req.id}",
                           abort_reason=lambda exc: f"compaction {req.id} failed: {_error(exc)}")
            with txn:
                assert txn.txn_id is not None and txn.snapshot is not None
                res.txn_id, snap = txn.txn_id, txn.snapshot
                cwl = snap.valid_write_ids.for_compactor()
                res.highest_write_id = cwl.high_watermark
                self.ms.compactions.set_compactor_txn(req.id, txn.txn_id, cwl.high_watermark)
                request = Compact(type=req.type.name.lower(), partition=req.partition, compaction_id=req.id)
                spec = JobSpec(table=info.to_spec(), snapshot=SnapshotSpec.of(snap, cwl), request=request,
                               txn_id=txn.txn_id, write_id=cwl.high_watermark)
                request.validate(spec.table)
                manifest = run_job(self.submit, spec)
                txn.check()          # a lost heartbeat fails the request before anything is marked
                if manifest.spark_app_id:
                    self.ms.compactions.set_spark_app_id(req.id, manifest.spark_app_id)
                r = manifest.output
                assert isinstance(r, CompactOutput), f"a compact job answered {type(r).__name__}"
                res.input, res.output, res.rows, res.delete_events = (list(r.input), list(r.output), r.rows,
                                                                      r.delete_events)
                res.bytes, res.spark_app_id = manifest.bytes_written, manifest.spark_app_id
                if not r.compacted:
                    txn.commit()
                    if r.obsolete_before or r.aborted_before:    # nothing to merge, but something to clean
                        self.ms.compactions.mark_compacted(req.id)
                        res.state = CompactionState.READY_FOR_CLEANING.label
                        return res
                    return self._refuse(res, f"None of the compaction thresholds met: {r.reason}")
                output = manifest.partitions[0] if manifest.partitions else None
                self.ms.compactions.mark_compacted(req.id, output)   # then commit, as Hive does
                txn.commit()
                res.state = CompactionState.READY_FOR_CLEANING.label
                return res
        except BaseException as exc:
            res.error = _error(exc)
            res.state = CompactionState.FAILED.label
            if txn is not None:
                res.txn_id = txn.txn_id
            self._fail(req.id, txn.txn_id if txn is not None else None, res.error)
            if not isinstance(exc, Exception):
                raise
            return res
        finally:
            res.seconds = round(time.time() - started, 3)

    def _refuse(self, res: WorkerResult, reason: str) -> WorkerResult:
        self.ms.compactions.mark_refused(res.id, reason)
        res.state, res.error = CompactionState.REFUSED.label, reason
        return res

    def _fail(self, cq_id: int, txn: int | None, error: str) -> None:
        try:
            if txn is not None and self.ms.txns.get_txn(txn).state is TxnState.OPEN:
                self.ms.txns.abort_txn(txn, f"compaction {cq_id} failed: {error}"[:2000])
        except Exception:
            log.exception("could not abort compactor transaction %s", txn)
        try:
            self.ms.compactions.mark_failed(cq_id, error)
        except Exception:
            log.exception("could not mark compaction %s failed", cq_id)

    def _clean_job(self, info: TableInfo, snapshot: SnapshotSpec, request: Clean) -> CleanOutput:
        """Run a cleaning job outside any txn (it deletes only what no snapshot can see)."""
        spec = JobSpec(table=info.to_spec(), snapshot=snapshot, request=request)
        request.validate(spec.table)
        out = run_job(self.submit, spec).output
        assert isinstance(out, CleanOutput), f"a clean job answered {type(out).__name__}"
        return out

    # -- cleaner --------------------------------------------------------------------------------
    def clean(self, *, table: str | None = None) -> list[CleanResult]:
        """Clean every ``ready for cleaning`` request no open txn can still need, then the
        files of aborted writes. A request becomes ``succeeded`` only when the job reports
        nothing obsolete left; otherwise it stays ready for cleaning with the reason."""
        self.ms.compactions.recover_abandoned(self.ms.txns.timeout_ms)
        only = self.ms.catalog.get_table(table) if table else None
        out: list[CleanResult] = []
        for c in self.ms.compactions.ready_for_cleaning():
            if only is not None and (c.db, c.table) != (only.db, only.name):
                continue
            out.append(self._clean_compaction(c))
        out.extend(self._clean_aborted(only.qualified_name if only else None))
        return out

    def _clean_compaction(self, c: CompactionInfo) -> CleanResult:
        name = f"{c.db}.{c.table}"
        res = CleanResult("compaction", name, [c.partition] if c.partition else None, c.id)
        try:
            info = self.ms.catalog.get_table(name)
        except NoSuchObjectError:
            self.ms.compactions.mark_failed(c.id, f"table {name} no longer exists; nothing to clean")
            res.state, res.error = CompactionState.FAILED.label, f"table {name} no longer exists"
            return res
        snap = self.ms.txns.snapshot(name)
        cleaner = snap.valid_write_ids.for_cleaner(c.highest_write_id or 0)
        request = Clean(mode="compaction", partitions=res.partitions, highest_write_id=c.highest_write_id or 0,
                        compaction_id=c.id)
        try:
            r = self._clean_job(info, SnapshotSpec.of(snap, cleaner), request)
        except Exception as exc:  # noqa: BLE001 - stays ready for cleaning; the next run retries
            res.error = f"{type(exc).__name__}: {exc}"[:4000]
            self.ms.compactions.set_cleaner_error(c.id, f"cleaner failed, will retry: {res.error}")
            res.state = CompactionState.READY_FOR_CLEANING.label
            return res
        res.deleted, res.remaining = list(r.deleted), list(r.remaining)
        if res.remaining:
            res.error = (f"{len(res.remaining)} obsolete path(s) still present after cleaning: "
                         f"{', '.join(res.remaining[:10])}" + (f"; errors: {r.errors}" if r.errors else ""))
            self.ms.compactions.set_cleaner_error(c.id, res.error + "; will retry")
            res.state = CompactionState.READY_FOR_CLEANING.label
            return res
        self.ms.compactions.mark_cleaned(c.id)
        res.state = CompactionState.SUCCEEDED.label
        return res

    def _clean_aborted(self, table: str | None) -> list[CleanResult]:
        """Per table, the partitions aborted txns wrote to (every partition for a dynamic-
        partition write that never said which): only aborted directories go (HIVE-25502)."""
        by_table: dict[tuple[str, str], dict[str, set[int]]] = {}
        for db, tbl, part, ids in self.ms.compactions.aborted_write_targets(table):
            by_table.setdefault((db, tbl), {}).setdefault(part, set()).update(ids)
        out = []
        ended_before = self.ms.store.clock() - self.ms.txns.timeout_ms
        for (db, tbl), parts in sorted(by_table.items()):
            name = f"{db}.{tbl}"
            try:
                info = self.ms.catalog.get_table(name)
            except NoSuchObjectError:
                continue
            txn_ids = sorted(set().union(*parts.values()))
            scan_all = info.is_partitioned and "" in parts
            partitions = None if (scan_all or not info.is_partitioned) else sorted(parts)
            res = CleanResult("aborted", name, partitions)
            snap = self.ms.txns.snapshot(name)
            try:
                r = self._clean_job(info, SnapshotSpec.of(snap),
                                    Clean(mode="aborted", partitions=partitions, aborted_txns=txn_ids))
            except Exception as exc:  # noqa: BLE001 - metadata stays; the next run retries
                res.error = f"{type(exc).__name__}: {exc}"[:4000]
                out.append(res)
                continue
            res.deleted, res.remaining = list(r.deleted), list(r.remaining)
            if res.remaining:
                res.error = f"{len(res.remaining)} aborted path(s) still present: {', '.join(res.remaining[:10])}"
            else:
                self.ms.compactions.clear_aborted_components(db, tbl, sorted(parts), txn_ids, ended_before)
            out.append(res)
        return out

    # -- manual ---------------------------------------------------------------------------------
    def compact(self, table: str, partition: str | None = None, type: str = "major", *,
                wait: bool = False) -> dict:
        """``ALTER TABLE t [PARTITION (...)] COMPACT 'major'|'minor' [AND WAIT]``: queue a manual
        request (bypassing the thresholds); with ``wait`` run it and the cleaner now and return
        the final state."""
        ctype = CompactionType.parse(type)
        info = self.ms.catalog.get_table(table)
        if info.is_insert_only or not info.is_transactional:
            raise InvalidInputError(f"{info.qualified_name} is not a full-ACID table: cannot compact it")
        part = None
        if partition:
            part = self.ms.catalog.partition_name(info, partition)
            if part not in self.ms.catalog.list_partitions(info.qualified_name):
                raise InvalidInputError(f"table {info.qualified_name} has no partition {part}")
        elif info.is_partitioned:
            raise InvalidInputError(f"table {info.qualified_name} is partitioned: name the partition to compact")
        r = self.ms.compactions.enqueue(info.qualified_name, part, ctype, manual=True,
                                        initiator_id=self.worker_id, reason=f"manual {ctype.name} compaction")
        out: dict[str, Any] = {"id": r.id, "state": r.state.label, "accepted": r.accepted, "message": r.message}
        if not wait:
            return out
        current = self.ms.compactions.get(r.id)
        if current.state is CompactionState.INITIATED:
            worker = self.run_worker(cq_id=r.id)
            out["worker"] = worker.to_dict() if worker else None
        delay = 2.0
        while self.ms.compactions.get(r.id).state in (CompactionState.INITIATED, CompactionState.WORKING):
            time.sleep(delay)     # someone else's worker runs it: poll as Hive's AND WAIT does
            delay = min(delay * 2, 30.0)
        if self.ms.compactions.get(r.id).state is CompactionState.READY_FOR_CLEANING:
            out["clean"] = [c.to_dict() for c in self.clean(table=info.qualified_name)]
        final = self.ms.compactions.get(r.id)
        out.update(state=final.state.label, error=final.error_message, compaction=final.to_dict())
        return out


def _error(exc: BaseException) -> str:
    """A failed request's error, as the queue and the abort reason record it."""
    return f"{type(exc).__name__}: {exc}"[:4000]
