"""The compaction queue and its history (Hive's ``COMPACTION_QUEUE`` / ``COMPLETED_COMPACTIONS``).

A request moves ``initiated`` -> ``working`` (a worker claimed it) -> ``ready for cleaning``
(the compactor's txn committed) -> ``succeeded`` (the cleaner removed what it made obsolete), or
ends ``failed`` / ``refused``; an initiator decision not to compact is kept as ``did not
initiate``. Finished requests move to the history table, which SHOW COMPACTIONS unions in.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection

from ..acid.stats import WriteCounts
from .catalog import Catalog
from .config import MetastoreConfig
from .db import Store
from .errors import CompactionError, InvalidInputError, NoSuchObjectError
from .models import NO_PARTITION, CompactionInfo, CompactionState, CompactionType, Operation, TxnState
from .schema import (
    compaction_queue as cq,
)
from .schema import (
    completed_compactions as cc,
)
from .schema import (
    next_compaction_queue_id,
    txn_components,
    txn_to_write_id,
    txns,
    write_stats,
)

_ACTIVE = (CompactionState.INITIATED, CompactionState.WORKING)


@dataclass(frozen=True)
class EnqueueResult:
    id: int
    state: CompactionState
    accepted: bool
    message: str


def _to_history(row: dict, state: str, end: int, error: str | None = None) -> dict:
    out = {"cc_" + k[3:]: v for k, v in row.items()}
    out["cc_state"] = state
    out["cc_end"] = end
    if error is not None:
        out["cc_error_message"] = error[:8000]
    return out


def _info(row: dict, prefix: str) -> CompactionInfo:
    g = lambda k: row[f"{prefix}_{k}"]  # noqa: E731
    props = g("tblproperties")
    return CompactionInfo(
        id=g("id"), db=g("database"), table=g("table"), partition=g("partition"),
        type=CompactionType(g("type")), state=CompactionState(g("state")), worker_id=g("worker_id"),
        enqueue_time=g("enqueue_time"), start=g("start"), end=row.get("cc_end"),
        highest_write_id=g("highest_write_id"), txn_id=g("txn_id"), next_txn_id=g("next_txn_id"),
        commit_time=g("commit_time"), error_message=g("error_message"), meta_info=g("meta_info"),
        initiator_id=g("initiator_id"), spark_app_id=g("hadoop_job_id"), manual=bool(g("manual")),
        properties=json.loads(props) if props else {})


class CompactionQueue:
    """Enqueue, claim and finish compaction requests; show them."""

    def __init__(self, store: Store, config: MetastoreConfig, catalog: Catalog):
        self.store = store
        self.config = config
        self.catalog = catalog

    def _next_id(self, conn: Connection) -> int:
        nxt = conn.execute(self.store.for_update(select(next_compaction_queue_id.c.ncq_next).where(
            next_compaction_queue_id.c.id == 1))).scalar_one()
        conn.execute(update(next_compaction_queue_id).where(next_compaction_queue_id.c.id == 1).values(
            ncq_next=nxt + 1))
        return nxt

    def enqueue(self, table: str, partition: str | None = None, type: CompactionType | str = CompactionType.MAJOR,
                *, manual: bool = False, initiator_id: str | None = None, reason: str | None = None,
                properties: dict[str, str] | None = None) -> EnqueueResult:
        """Queue a request unless one for the same table/partition is initiated or working
        (then the existing one is returned, not accepted), like ``TxnHandler.compact``."""
        info = self.catalog.get_table(table)
        ctype = CompactionType.parse(type)
        if info.is_partitioned and not partition:
            raise InvalidInputError(f"table {info.qualified_name} is partitioned: name the partition to compact")
        part = self.catalog.check_partition_name(info, partition or NO_PARTITION)
        now = self.store.clock()
        with self.store.write() as conn:
            cq_id = self._next_id(conn)   # takes the counter row lock first: enqueues queue here
            existing = conn.execute(select(cq.c.cq_id, cq.c.cq_state).where(
                cq.c.cq_database == info.db, cq.c.cq_table == info.name, cq.c.cq_partition == part,
                cq.c.cq_state.in_(_ACTIVE)).order_by(cq.c.cq_id).limit(1)).first()
            if existing is not None:
                state = CompactionState(existing[1])
                return EnqueueResult(existing[0], state, False,
                                     f"Compaction already enqueued with id {existing[0]}; State is {state.label}")
            conn.execute(insert(cq).values(
                cq_id=cq_id, cq_database=info.db, cq_table=info.name, cq_partition=part,
                cq_state=CompactionState.INITIATED,
                cq_type=ctype, cq_enqueue_time=now, cq_initiator_id=initiator_id, cq_meta_info=reason,
                cq_tblproperties=json.dumps(properties) if properties else None, cq_retry_retention=0,
                cq_manual=manual))
        return EnqueueResult(cq_id, CompactionState.INITIATED, True, f"Compaction enqueued with id {cq_id}")

    def record_did_not_initiate(self, table: str, partition: str | None, type: CompactionType | str,
                                reason: str, initiator_id: str | None = None) -> int:
        """Keep an initiator's decision not to compact in the history, with why."""
        info = self.catalog.get_table(table)
        part = self.catalog.check_partition_name(info, partition or NO_PARTITION)
        now = self.store.clock()
        with self.store.write() as conn:
            cq_id = self._next_id(conn)
            conn.execute(insert(cc).values(
                cc_id=cq_id, cc_database=info.db, cc_table=info.name, cc_partition=part,
                cc_state=CompactionState.DID_NOT_INITIATE,
                cc_type=CompactionType.parse(type), cc_enqueue_time=now, cc_start=now, cc_end=now,
                cc_initiator_id=initiator_id, cc_meta_info=reason, cc_error_message=reason,
                cc_retry_retention=0, cc_manual=False))
        return cq_id

    def claim(self, worker_id: str, *, worker_version: str | None = None, table: str | None = None,
              cq_id: int | None = None) -> CompactionInfo | None:
        """Take the oldest initiated request (optionally of one table, or one id) for this worker;
        two workers never get the same request."""
        now = self.store.clock()
        with self.store.write() as conn:
            q = select(cq.c.cq_id).where(cq.c.cq_state == CompactionState.INITIATED).order_by(cq.c.cq_id).limit(1)
            if table:
                info = self.catalog.get_table(table)
                q = q.where(cq.c.cq_database == info.db, cq.c.cq_table == info.name)
            if cq_id is not None:
                q = q.where(cq.c.cq_id == cq_id)
            row = conn.execute(self.store.for_update(q, skip_locked=True)).first()
            if row is None:
                return None
            n = conn.execute(update(cq).where(cq.c.cq_id == row[0], cq.c.cq_state == CompactionState.INITIATED).values(
                cq_state=CompactionState.WORKING, cq_worker_id=worker_id[:128], cq_worker_version=worker_version,
                cq_start=now)).rowcount
            if not n:
                return None
            return _info(dict(conn.execute(select(cq).where(cq.c.cq_id == row[0])).mappings().one()), "cq")

    def set_compactor_txn(self, cq_id: int, txn_id: int, highest_write_id: int) -> None:
        """Record the worker's own txn and the highest write id it compacts (Hive's
        ``updateCompactorState``); committing that txn stamps ``next_txn_id``. Like Hive, the
        txn also gets a ``c`` component, so if it aborts the cleaner finds its output."""
        with self.store.write() as conn:
            row = self._working_row(conn, cq_id)
            conn.execute(update(cq).where(cq.c.cq_id == cq_id).values(
                cq_txn_id=txn_id, cq_highest_write_id=highest_write_id))
            conn.execute(insert(txn_components).values(
                tc_txnid=txn_id, tc_database=row["cq_database"], tc_table=row["cq_table"],
                tc_partition=row["cq_partition"], tc_operation_type=Operation.COMPACT, tc_writeid=highest_write_id))

    def _working_row(self, conn: Connection, cq_id: int) -> dict:
        """The request's row, locked, if it is being worked on; else a clear error."""
        row = conn.execute(self.store.for_update(select(cq).where(cq.c.cq_id == cq_id))).mappings().first()
        if row is None:
            raise self._not_queued(conn, cq_id)
        if row["cq_state"] is not CompactionState.WORKING:
            raise CompactionError(f"compaction {cq_id} is {CompactionState(row['cq_state']).label}, "
                                  "expected working")
        return dict(row)

    def set_spark_app_id(self, cq_id: int, app_id: str) -> None:
        self._update(cq_id, (CompactionState.WORKING,), cq_hadoop_job_id=app_id[:128])

    def mark_compacted(self, cq_id: int, output: WriteCounts | None = None) -> None:
        """working -> ready for cleaning, before the compactor's txn commits (as Hive does).

        ``output`` (``base_files``/``base_bytes`` of a major, ``delta_*``/``delete_delta_*`` of a
        minor, ``rows_inserted``/``rows_deleted``) is recorded as a ``c`` write stat of the
        compactor's txn: it counts once that txn commits, so the initiator sees the new
        layout without listing files; an abort drops it."""
        with self.store.write() as conn:
            row = self._working_row(conn, cq_id)
            conn.execute(update(cq).where(cq.c.cq_id == cq_id).values(cq_state=CompactionState.READY_FOR_CLEANING,
                                                                      cq_error_message=None))
            if output is not None and row["cq_txn_id"] is not None:
                conn.execute(insert(write_stats).values(
                    ws_database=row["cq_database"], ws_table=row["cq_table"], ws_partition=row["cq_partition"],
                    ws_writeid=row["cq_highest_write_id"] or 0, ws_txnid=row["cq_txn_id"],
                    ws_operation_type=Operation.COMPACT,
                    committed_at=None, **{**output.counts(), "rows_updated": 0}))

    def set_cleaner_error(self, cq_id: int, error: str) -> None:
        """A cleaner run that could not finish: the request stays ready for cleaning (the next
        run retries) and says why, instead of claiming success (HIVE-24302)."""
        self._update(cq_id, (CompactionState.READY_FOR_CLEANING,), cq_error_message=error[:8000],
                     cq_cleaner_start=self.store.clock())

    def mark_failed(self, cq_id: int, error: str) -> None:
        self._finish(cq_id, CompactionState.FAILED, error, allowed=(
            CompactionState.INITIATED, CompactionState.WORKING, CompactionState.READY_FOR_CLEANING))

    def mark_refused(self, cq_id: int, reason: str) -> None:
        self._finish(cq_id, CompactionState.REFUSED, reason, allowed=_ACTIVE)

    def mark_cleaned(self, cq_id: int) -> None:
        """ready for cleaning -> succeeded; call only once the obsolete files are really gone."""
        self._finish(cq_id, CompactionState.SUCCEEDED, None, allowed=(CompactionState.READY_FOR_CLEANING,))

    def requeue(self, cq_id: int, reason: str) -> None:
        """Give a request back to the queue (its worker died); the next worker starts over."""
        self._update(cq_id, (CompactionState.WORKING,), cq_state=CompactionState.INITIATED, cq_worker_id=None,
                     cq_start=None, cq_txn_id=None,
                     cq_highest_write_id=None, cq_hadoop_job_id=None, cq_error_message=reason[:8000])

    def _update(self, cq_id: int, allowed: tuple[str, ...], **values: object) -> None:
        with self.store.write() as conn:
            state = conn.execute(self.store.for_update(select(cq.c.cq_state).where(cq.c.cq_id == cq_id))).scalar()
            if state is None:
                raise self._not_queued(conn, cq_id)
            if state not in allowed:
                raise CompactionError(f"compaction {cq_id} is {CompactionState(state).label}, expected "
                                      + " or ".join(CompactionState(a).label for a in allowed))
            conn.execute(update(cq).where(cq.c.cq_id == cq_id).values(**values))

    def _finish(self, cq_id: int, state: str, error: str | None, allowed: tuple[str, ...]) -> None:
        now = self.store.clock()
        with self.store.write() as conn:
            row = conn.execute(self.store.for_update(select(cq).where(cq.c.cq_id == cq_id))).mappings().first()
            if row is None:
                raise self._not_queued(conn, cq_id)
            if row["cq_state"] not in allowed:
                raise CompactionError(f"compaction {cq_id} is {CompactionState(row['cq_state']).label}, cannot "
                                      f"become {CompactionState(state).label}")
            conn.execute(insert(cc).values(**_to_history(dict(row), state, now, error)))
            conn.execute(delete(cq).where(cq.c.cq_id == cq_id))

    @staticmethod
    def _not_queued(conn: Connection, cq_id: int) -> Exception:
        ended = conn.execute(select(cc.c.cc_state).where(cc.c.cc_id == cq_id)).scalar()
        if ended is None:
            return NoSuchObjectError(f"unknown compaction id {cq_id}")
        return CompactionError(f"compaction {cq_id} already ended: {CompactionState(ended).label}")

    def get(self, cq_id: int) -> CompactionInfo:
        found = self.show(cq_id=cq_id)
        if not found:
            raise NoSuchObjectError(f"unknown compaction id {cq_id}")
        return found[0]

    def show(self, *, db: str | None = None, table: str | None = None, partition: str | None = None,
             states: list[CompactionState] | None = None, type: CompactionType | None = None,
             cq_id: int | None = None, limit: int | None = None) -> list[CompactionInfo]:
        """SHOW COMPACTIONS: queue and history, newest last."""
        out: list[CompactionInfo] = []
        with self.store.read() as conn:
            for t, p in ((cq, "cq"), (cc, "cc")):
                c = t.c
                q = select(t)
                if cq_id is not None:
                    q = q.where(c[f"{p}_id"] == cq_id)
                if db:
                    q = q.where(c[f"{p}_database"] == db.lower())
                if table:
                    q = q.where(c[f"{p}_table"] == table.lower())
                if partition is not None:
                    q = q.where(c[f"{p}_partition"] == partition)
                if states:
                    q = q.where(c[f"{p}_state"].in_([CompactionState.parse(s) for s in states]))
                if type is not None:
                    q = q.where(c[f"{p}_type"] == CompactionType.parse(type))
                out.extend(_info(dict(r), p) for r in conn.execute(q).mappings())
        out.sort(key=lambda i: i.id)
        return out[-limit:] if limit else out

    def latest(self, table: str, partition: str | None = None) -> CompactionInfo | None:
        info = self.catalog.get_table(table)
        found = self.show(db=info.db, table=info.name,
                          partition=None if partition is None else self.catalog.check_partition_name(info, partition))
        found = [f for f in found if f.state is not CompactionState.DID_NOT_INITIATE]
        return found[-1] if found else None

    def ready_for_cleaning(self) -> list[CompactionInfo]:
        """``ready for cleaning`` requests no open txn can still need the old files of: every txn
        open when the compactor committed has ended (``next_txn_id <= min open txn``)."""
        with self.store.read() as conn:
            low = conn.execute(select(func.min(txns.c.txn_id)).where(txns.c.txn_state == TxnState.OPEN)).scalar()
            q = select(cq).where(cq.c.cq_state == CompactionState.READY_FOR_CLEANING,
                                 cq.c.cq_next_txn_id.is_not(None)).order_by(
                cq.c.cq_highest_write_id, cq.c.cq_id)
            if low is not None:
                q = q.where(cq.c.cq_next_txn_id <= low)
            return [_info(dict(r), "cq") for r in conn.execute(q).mappings()]

    def recover_abandoned(self, claim_timeout_ms: int) -> list[tuple[int, str]]:
        """Requests whose worker is gone, by the state of the compactor's txn: ``working`` with
        an aborted txn (it stopped heartbeating and timed out, or failed) goes back to the queue;
        ``working`` without a txn, claimed longer than ``claim_timeout_ms`` ago, too;
        ``ready for cleaning`` whose txn aborted before commit becomes ``failed`` (its output
        is invisible and the cleaner removes it) instead of waiting forever. Returns
        ``(id, what was done)``."""
        now = self.store.clock()
        with self.store.read() as conn:
            rows = conn.execute(select(cq.c.cq_id, cq.c.cq_state, cq.c.cq_txn_id, cq.c.cq_start, cq.c.cq_worker_id,
                                       txns.c.txn_state, txns.c.txn_meta_info)
                                .outerjoin(txns, txns.c.txn_id == cq.c.cq_txn_id)
                                .where(cq.c.cq_state.in_((CompactionState.WORKING,
                                                          CompactionState.READY_FOR_CLEANING)))).all()
        done: list[tuple[int, str]] = []
        for cid, state, txn, start, worker, tstate, why in rows:
            try:
                if state is CompactionState.WORKING and txn is not None and tstate in (TxnState.ABORTED, None):
                    msg = (f"compactor transaction {txn} of worker {worker} was aborted "
                           f"({why or 'no longer known'}); requeued")
                    self.requeue(cid, msg)
                    done.append((cid, "requeued"))
                elif (state is CompactionState.WORKING and txn is None and start is not None
                      and start < now - claim_timeout_ms):
                    self.requeue(cid, f"worker {worker} claimed it but never started a transaction; requeued")
                    done.append((cid, "requeued"))
                elif (state is CompactionState.READY_FOR_CLEANING and txn is not None
                      and tstate in (TxnState.ABORTED, None)):
                    self.mark_failed(cid, f"compactor transaction {txn} was aborted before it committed "
                                          f"({why or 'no longer known'}); its output is discarded")
                    done.append((cid, "failed"))
            except CompactionError:   # another worker or cleaner moved it meanwhile
                continue
        return done

    def aborted_write_targets(self, table: str | None = None) -> list[tuple[str, str, str, list[int]]]:
        """Where aborted txns left files: ``(db, table, partition, txn ids)`` from the write
        components aborted txns keep (partition ``''`` of a partitioned table: a dynamic
        partition write whose partitions are unknown)."""
        q = (select(txn_components.c.tc_database, txn_components.c.tc_table, txn_components.c.tc_partition,
                    txn_components.c.tc_txnid)
             .join(txns, txns.c.txn_id == txn_components.c.tc_txnid).where(txns.c.txn_state == TxnState.ABORTED))
        info = self.catalog.get_table(table) if table else None
        if info is not None:
            q = q.where(txn_components.c.tc_database == info.db, txn_components.c.tc_table == info.name)
        # an aborted txn that got a write id but recorded no component (a dynamic-partition
        # write killed before it knew its partitions) may have left files in any partition
        q2 = (select(txn_to_write_id.c.t2w_database, txn_to_write_id.c.t2w_table, txns.c.txn_id)
              .join(txns, txns.c.txn_id == txn_to_write_id.c.t2w_txnid)
              .where(txns.c.txn_state == TxnState.ABORTED, txn_to_write_id.c.t2w_swept.is_(False)))
        if info is not None:
            q2 = q2.where(txn_to_write_id.c.t2w_database == info.db, txn_to_write_id.c.t2w_table == info.name)
        out: dict[tuple[str, str, str], set[int]] = {}
        with self.store.read() as conn:
            seen = set()
            for d, t, p, txn in conn.execute(q):
                out.setdefault((d, t, p), set()).add(txn)
                seen.add((d, t, txn))
            for d, t, txn in conn.execute(q2):
                if (d, t, txn) not in seen:
                    out.setdefault((d, t, NO_PARTITION), set()).add(txn)
        return [(d, t, p, sorted(ids)) for (d, t, p), ids in sorted(out.items())]

    def clear_aborted_components(self, db: str, table: str, partitions: list[str], txn_ids: list[int],
                                 ended_before_ms: int) -> int:
        """Forget where aborted txns wrote once their files are gone (Hive's markCleaned does
        this). Only txns that ended before ``ended_before_ms`` are forgotten: a job of a txn that
        just timed out may still be publishing files, and the next run must find them."""
        if not txn_ids or not partitions:
            return 0
        with self.store.write() as conn:
            old = [r[0] for r in conn.execute(select(txns.c.txn_id).where(
                txns.c.txn_state == TxnState.ABORTED, txns.c.txn_ended < ended_before_ms, txns.c.txn_id.in_(txn_ids)))]
            if not old:
                return 0
            n = conn.execute(delete(txn_components).where(
                txn_components.c.tc_database == db, txn_components.c.tc_table == table,
                txn_components.c.tc_partition.in_(partitions), txn_components.c.tc_txnid.in_(old))).rowcount
            # txns that never recorded where they wrote: remember that this table was swept for
            # them (their write ids stay aborted in every snapshot; nothing becomes visible)
            left = {r[0] for r in conn.execute(select(txn_components.c.tc_txnid).where(
                txn_components.c.tc_database == db, txn_components.c.tc_table == table,
                txn_components.c.tc_txnid.in_(old)))}
            conn.execute(update(txn_to_write_id).where(
                txn_to_write_id.c.t2w_database == db, txn_to_write_id.c.t2w_table == table,
                txn_to_write_id.c.t2w_txnid.in_([t for t in old if t not in left])).values(t2w_swept=True))
            return n

    def working_since(self, older_than_ms: int) -> list[CompactionInfo]:
        """Requests a worker claimed before ``older_than_ms`` and still holds (maybe dead)."""
        with self.store.read() as conn:
            return [_info(dict(r), "cq") for r in conn.execute(select(cq).where(
                cq.c.cq_state == CompactionState.WORKING, cq.c.cq_start < older_than_ms)).mappings()]

    def purge_history(self, succeeded: int = 3, failed: int = 3, did_not_initiate: int = 2,
                      refused: int = 3) -> int:
        """Keep only the newest N history entries per state and table/partition (Hive's
        ``hive.compactor.history.retention.*``)."""
        keep = {CompactionState.SUCCEEDED: succeeded, CompactionState.FAILED: failed,
                CompactionState.DID_NOT_INITIATE: did_not_initiate, CompactionState.REFUSED: refused}
        with self.store.write() as conn:
            rows = conn.execute(select(cc.c.cc_id, cc.c.cc_database, cc.c.cc_table, cc.c.cc_partition,
                                       cc.c.cc_state).order_by(cc.c.cc_id.desc())).all()
            seen: dict[tuple, int] = {}
            doomed = []
            for cid, d, t, p, st in rows:
                k = (d, t, p, st)
                seen[k] = seen.get(k, 0) + 1
                if seen[k] > keep.get(st, 3):
                    doomed.append(cid)
            for i in range(0, len(doomed), 500):
                conn.execute(delete(cc).where(cc.c.cc_id.in_(doomed[i:i + 500])))
        return len(doomed)
