"""Hive's lock manager: SHARED_READ / SHARED_WRITE / EXCL_WRITE / EXCLUSIVE on a database,
table or partition, granted in strict request order (a request waits for every earlier
conflicting request, acquired or waiting), released when the owning txn commits or aborts.

Compatibility is Hive 4's ``TxnHandler.checkLock`` table (``docs/format.md`` §8.4).
Locks inside a txn live as long as the txn heartbeats; txn-less locks heartbeat themselves.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from .catalog import Catalog, check_identifier
from .config import MetastoreConfig
from .db import Store
from .errors import InvalidInputError, LockTimeoutError, NoSuchObjectError, TxnAbortedError, TxnError
from .models import NO_PARTITION, LockComponent, LockInfo, LockState, LockType, Operation, TxnState
from .schema import hive_locks, next_lock_id, txns
from .txn import TxnManager

T = TypeVar("T")

R, W, X, E = LockType.SHARED_READ, LockType.SHARED_WRITE, LockType.EXCL_WRITE, LockType.EXCLUSIVE
# requested -> existing types it must wait for
_WAITS_FOR = {R: {E}, W: {X, E}, X: {W, X, E}, E: {R, W, X, E}}


def _level(c: tuple[str, str, str]) -> int:
    """0 database, 1 table, 2 partition."""
    return 0 if not c[1] else (1 if not c[2] else 2)


def conflicts(req_type: LockType, req: tuple[str, str, str], ex_type: LockType, ex: tuple[str, str, str]) -> bool:
    """Would a request for ``req`` (db, table, partition) wait for an existing lock ``ex``?"""
    if req[0] != ex[0]:
        return False
    if req[1] and ex[1]:
        if req[1] != ex[1]:
            return False
        if req[2] and ex[2] and req[2] != ex[2]:
            return False
    if ex_type not in _WAITS_FOR[req_type]:
        return False
    # Hive's exceptions: a DB-level shared read does not wait for a table EXCLUSIVE, and a
    # table/partition EXCLUSIVE does not wait for a DB-level shared read.
    if req_type is R and ex_type is E and _level(req) == 0 and _level(ex) > 0:
        return False
    if req_type is E and ex_type is R and _level(ex) == 0 and _level(req) > 0:
        return False
    return True


class LockManager:
    """Acquire, check, release and show locks."""

    def __init__(self, store: Store, config: MetastoreConfig, catalog: Catalog, txns: TxnManager):
        self.store = store
        self.config = config
        self.catalog = catalog
        self.txns = txns

    def lock(self, components: Iterable[LockComponent], txn_id: int = 0, *, wait: float | None = None,
             user: str | None = None, host: str | None = None, agent_info: str = "") -> int:
        """Request locks as one unit and wait (up to ``wait`` seconds, default the configured
        ``lock_wait_timeout``) until all are granted. Returns the lock id (``HL_LOCK_EXT_ID``)."""
        checked = [self._validate(c) for c in components]
        comps = [c for c, _ in checked]
        partitioned = {(c.db, c.table): p for c, p in checked}
        if not comps:
            raise InvalidInputError("a lock request needs at least one component")
        now = self.store.clock()

        def run(conn: Connection) -> int:
            if txn_id:
                self.txns._check_open(conn, txn_id, lock_row=True)
            ext = conn.execute(self.store.for_update(
                select(next_lock_id.c.nl_next).where(next_lock_id.c.id == 1))).scalar_one()
            conn.execute(update(next_lock_id).where(next_lock_id.c.id == 1).values(nl_next=ext + 1))
            conn.execute(insert(hive_locks), [{
                "hl_lock_ext_id": ext, "hl_lock_int_id": i + 1, "hl_txnid": txn_id, "hl_db": c.db,
                "hl_table": c.table, "hl_partition": c.partition, "hl_lock_state": LockState.WAITING,
                "hl_lock_type": c.type, "hl_last_heartbeat": 0 if txn_id else now,
                "hl_acquired_at": None, "hl_user": (user or self.txns._user)[:128],
                "hl_host": (host or self.txns._host)[:128], "hl_agent_info": agent_info[:256]}
                for i, c in enumerate(comps)])
            if txn_id:
                for c in comps:
                    # A table-level write lock on a partitioned table is a dynamic-partition write:
                    # its partitions are recorded when known (add_write_components / commit).
                    if c.operation is not None and c.table and (c.partition or not partitioned[(c.db, c.table)]):
                        wid = self.txns._write_id_for(conn, txn_id, c.db, c.table)
                        self.txns._insert_components(conn, txn_id, c.db, c.table, [c.partition],
                                                     Operation(c.operation), wid)
            return ext

        ext = self.txns._run_checked(txn_id, run) if txn_id else self._plain(run)
        limit = self.config.lock_wait_timeout if wait is None else wait
        deadline = time.monotonic() + limit
        sleep = 0.05
        while True:
            try:
                state, blocker = self._check(ext)
            except NoSuchObjectError:
                if txn_id:
                    info = self.txns.get_txn(txn_id)
                    if info.state is TxnState.ABORTED:
                        raise TxnAbortedError(f"transaction {txn_id} was aborted while waiting for lock {ext}: "
                                              f"{info.reason}", txn_id, info.reason) from None
                raise
            if state is LockState.ACQUIRED:
                return ext
            if time.monotonic() >= deadline:
                self._release(ext)
                raise LockTimeoutError(
                    f"lock {ext} on {_describe(comps)} not acquired within {limit:g}s: blocked by "
                    f"{blocker}. See 'hive-acid show locks'.")
            time.sleep(min(sleep, max(0.0, deadline - time.monotonic())))
            sleep = min(sleep * 2, 2.0)

    def _plain(self, fn: Callable[[Connection], T]) -> T:
        with self.store.write() as conn:
            return fn(conn)

    def _validate(self, c: LockComponent) -> tuple[LockComponent, bool]:
        """The component with canonical names, and whether its table is partitioned."""
        db = check_identifier(c.db, "database name")
        table = check_identifier(c.table, "table name") if c.table else ""
        lock_type = LockType(c.type)
        if c.partition and not table:
            raise InvalidInputError("a partition lock needs a table")
        partitioned = False
        part = NO_PARTITION
        if table:
            info = self.catalog.get_table(f"{db}.{table}")
            partitioned = info.is_partitioned
            part = self.catalog.check_partition_name(info, c.partition) if c.partition else NO_PARTITION
        if c.operation is not None and lock_type is R:
            raise InvalidInputError("a SHARED_READ lock does not write: give no operation")
        return LockComponent(db, table, part, lock_type, Operation(c.operation) if c.operation else None), partitioned

    def check_lock(self, ext_id: int) -> LockState:
        """Try to acquire a waiting request now; ACQUIRED or WAITING."""
        return self._check(ext_id)[0]

    def _check(self, ext_id: int) -> tuple[LockState, str]:
        with self.store.write() as conn:
            mine = conn.execute(select(
                hive_locks.c.hl_lock_int_id, hive_locks.c.hl_txnid, hive_locks.c.hl_db, hive_locks.c.hl_table,
                hive_locks.c.hl_partition, hive_locks.c.hl_lock_type, hive_locks.c.hl_lock_state)
                .where(hive_locks.c.hl_lock_ext_id == ext_id)).all()
            if not mine:
                raise NoSuchObjectError(
                    f"lock {ext_id} does not exist (released, or its transaction was aborted)")
            if all(m[6] is LockState.ACQUIRED for m in mine):
                return LockState.ACQUIRED, ""
            txn_id = mine[0][1]
            q = select(hive_locks.c.hl_lock_ext_id, hive_locks.c.hl_lock_int_id, hive_locks.c.hl_txnid,
                       hive_locks.c.hl_db, hive_locks.c.hl_table, hive_locks.c.hl_partition,
                       hive_locks.c.hl_lock_type).where(
                hive_locks.c.hl_lock_ext_id < ext_id, hive_locks.c.hl_db.in_({m[2] for m in mine}))
            if txn_id:
                q = q.where(hive_locks.c.hl_txnid != txn_id)
            earlier = conn.execute(q.order_by(hive_locks.c.hl_lock_ext_id)).all()
            for m in mine:
                req = (m[2], m[3], m[4])
                for e in earlier:
                    if conflicts(LockType(m[5]), req, LockType(e[6]), (e[3], e[4], e[5])):
                        conn.execute(update(hive_locks).where(hive_locks.c.hl_lock_ext_id == ext_id).values(
                            hl_blockedby_ext_id=e[0], hl_blockedby_int_id=e[1]))
                        what = f"{e[3]}" + (f".{e[4]}" if e[4] else "") + (f"/{e[5]}" if e[5] else "")
                        owner = f"transaction {e[2]}" if e[2] else "no transaction"
                        return LockState.WAITING, f"lock {e[0]}.{e[1]} ({LockType(e[6]).name} on {what}, {owner})"
            conn.execute(update(hive_locks).where(hive_locks.c.hl_lock_ext_id == ext_id).values(
                hl_lock_state=LockState.ACQUIRED, hl_acquired_at=self.store.clock(), hl_blockedby_ext_id=None,
                hl_blockedby_int_id=None))
            return LockState.ACQUIRED, ""

    def unlock(self, ext_id: int) -> None:
        """Release a lock taken outside a transaction (txn locks end with their txn)."""
        with self.store.read() as conn:
            row = conn.execute(select(hive_locks.c.hl_txnid).where(hive_locks.c.hl_lock_ext_id == ext_id)).first()
        if row is None:
            raise NoSuchObjectError(f"lock {ext_id} does not exist")
        if row[0]:
            raise TxnError(f"lock {ext_id} belongs to transaction {row[0]}: it is released when that "
                           "transaction commits or aborts")
        self._release(ext_id)

    def _release(self, ext_id: int) -> None:
        with self.store.write() as conn:
            conn.execute(delete(hive_locks).where(hive_locks.c.hl_lock_ext_id == ext_id))

    def heartbeat_lock(self, ext_id: int) -> None:
        """Keep a txn-less lock alive (a txn's locks are kept alive by the txn heartbeat)."""
        now = self.store.clock()
        with self.store.write() as conn:
            n = conn.execute(update(hive_locks).where(
                hive_locks.c.hl_lock_ext_id == ext_id, hive_locks.c.hl_txnid == 0,
                hive_locks.c.hl_last_heartbeat >= now - self.txns.timeout_ms).values(hl_last_heartbeat=now)).rowcount
        if not n:
            raise NoSuchObjectError(f"lock {ext_id} does not exist, belongs to a transaction, or timed out")

    def show_locks(self, db: str | None = None, table: str | None = None) -> list[LockInfo]:
        """SHOW LOCKS: acquired before waiting, then by lock type, then by id (Hive's order)."""
        q = select(hive_locks, txns.c.txn_last_heartbeat).outerjoin(
            txns, txns.c.txn_id == hive_locks.c.hl_txnid)
        if db:
            q = q.where(hive_locks.c.hl_db == db.lower())
        if table:
            q = q.where(hive_locks.c.hl_table == table.lower())
        with self.store.read() as conn:
            rows = conn.execute(q).mappings().all()
        infos = [LockInfo(
            ext_id=r["hl_lock_ext_id"], int_id=r["hl_lock_int_id"], txn_id=r["hl_txnid"], db=r["hl_db"],
            table=r["hl_table"], partition=r["hl_partition"], state=LockState(r["hl_lock_state"]),
            type=LockType(r["hl_lock_type"]),
            last_heartbeat=r["txn_last_heartbeat"] if r["hl_txnid"] else r["hl_last_heartbeat"],
            acquired_at=r["hl_acquired_at"], user=r["hl_user"], host=r["hl_host"], agent_info=r["hl_agent_info"],
            blocked_by=(r["hl_blockedby_ext_id"], r["hl_blockedby_int_id"]) if r["hl_blockedby_ext_id"] else None)
            for r in rows]
        order = {LockType.EXCLUSIVE: 0, LockType.EXCL_WRITE: 1, LockType.SHARED_WRITE: 2, LockType.SHARED_READ: 3}
        return sorted(infos, key=lambda li: (li.state is not LockState.ACQUIRED, order[li.type], li.ext_id, li.int_id))


def _describe(comps: list[LockComponent]) -> str:
    return ", ".join(f"{c.type.name} {c.db}" + (f".{c.table}" if c.table else "") +
                     (f"/{c.partition}" if c.partition else "") for c in comps)
