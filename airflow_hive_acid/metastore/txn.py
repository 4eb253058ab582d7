"""The transaction manager: open / allocate write id / heartbeat / commit / abort, snapshots, and
the housekeeping that aborts transactions which stopped heartbeating.

Semantics follow Hive's ``TxnHandler`` (see ``docs/format.md`` §7-§8). Txn ids and the
per-table write ids come from ``counters``; write ids never repeat or go backwards. Snapshots
are read so that every id up to their high watermark is settled. An update/delete commit checks
``write_set`` for an overlapping committed update/delete of the same partition (first committer
wins). On PostgreSQL the three hottest calls have single-statement forms (``pgfast``).
"""
from __future__ import annotations

import getpass
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping

from ..acid.bucket_codec import MAX_STATEMENT_ID
from ..acid.stats import WriteCounts
from ..acid.writeids import LONG_MAX, ValidTxnList, ValidWriteIdList
from .catalog import Catalog, split_name
from .config import MetastoreConfig
from .counters import Counters
from .db import Store
from .errors import (
    InvalidInputError,
    NoSuchObjectError,
    TableNotFoundError,
    TooManyOpenTxnsError,
    TxnAbortedError,
    TxnError,
    TxnTimedOutError,
    WriteConflictError,
)
from .models import Operation, StreamBatch, TableInfo, TableSnapshot, TxnInfo, TxnState, TxnType, WriteStat
from .schema import (
    compaction_queue,
    completed_txn_components,
    hive_locks,
    stream_batches,
    tbls,
    txn_components,
    txn_statements,
    txn_to_write_id,
    txns,
    write_set,
    write_stats,
)

T = TypeVar("T")

REASON_TIMED_OUT = "timed out"
REASON_WRITE_CONFLICT = "write conflict"
REASON_USER = "aborted by user"
RESERVED_KEY_SEP = "\x1f"      # txn_statements keys of the extra ids a statement reserved

_SEL_TXN = select(txns.c.txn_state, txns.c.txn_last_heartbeat, txns.c.txn_meta_info, txns.c.txn_type).where(
    txns.c.txn_id == bindparam("b_txn"))
_SEL_TXN_WITH_WRITE_IDS = (
    select(txns.c.txn_state, txns.c.txn_last_heartbeat, txns.c.txn_meta_info, txns.c.txn_type,
           txn_to_write_id.c.t2w_database, txn_to_write_id.c.t2w_table, txn_to_write_id.c.t2w_writeid)
    .outerjoin(txn_to_write_id, txn_to_write_id.c.t2w_txnid == txns.c.txn_id)
    .where(txns.c.txn_id == bindparam("b_txn")))
_MARK_COMMITTED = (update(txns)
                   .where(txns.c.txn_id == bindparam("b_txn"), txns.c.txn_state == TxnState.OPEN,
                          txns.c.txn_last_heartbeat >= bindparam("oldest"))
                   .values(txn_state=TxnState.COMMITTED, txn_ended=bindparam("now"))
                   .returning(txns.c.txn_type))
_TAKE_COMPONENTS = (delete(txn_components).where(txn_components.c.tc_txnid == bindparam("b_txn"))
                    .returning(txn_components.c.tc_database, txn_components.c.tc_table,
                               txn_components.c.tc_partition, txn_components.c.tc_operation_type,
                               txn_components.c.tc_writeid))
_RELEASE_LOCKS = delete(hive_locks).where(hive_locks.c.hl_txnid == bindparam("b_txn"))
_SEL_CONFLICT = (select(write_set.c.ws_txnid, write_set.c.ws_commit_id, write_set.c.ws_operation_type)
                 .where(write_set.c.ws_database == bindparam("b_db"), write_set.c.ws_table == bindparam("b_tbl"),
                        write_set.c.ws_partition == bindparam("b_part"),
                        write_set.c.ws_commit_id >= bindparam("b_txn"), write_set.c.ws_txnid != bindparam("b_txn"),
                        write_set.c.ws_operation_type.in_((Operation.UPDATE, Operation.DELETE)))
                 .order_by(write_set.c.ws_commit_id).limit(1))
_HEARTBEAT = (update(txns)
              .where(txns.c.txn_id == bindparam("b_txn"), txns.c.txn_state == TxnState.OPEN,
                     txns.c.txn_last_heartbeat >= bindparam("oldest"))
              .values(txn_last_heartbeat=bindparam("now"),
                      txn_heartbeat_count=txns.c.txn_heartbeat_count + 1))


@dataclass(frozen=True)
class CommitResult:
    txn_id: int
    already_committed: bool = False


def _client_identity() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except Exception:  # pragma: no cover - no passwd entry in some containers
        user = "unknown"
    return user[:128], socket.gethostname()[:128]


class TxnManager:
    """Transactions, write ids and snapshots over one metastore database."""

    def __init__(self, store: Store, config: MetastoreConfig, catalog: Catalog):
        self.store = store
        self.config = config
        self.catalog = catalog
        self.counters = Counters(store.is_sqlite)
        self._last_sweep = 0
        self._open_count = 0
        self._open_count_at = 0
        self._user, self._host = _client_identity()

    @property
    def timeout_ms(self) -> int:
        return int(self.config.txn_timeout * 1000)

    # -- open ---------------------------------------------------------------------------------
    def open_txn(self, *, user: str | None = None, host: str | None = None, agent_info: str = "",
                 txn_type: TxnType = TxnType.DEFAULT) -> int:
        """Open one transaction and return its id."""
        return self.open_txns(1, user=user, host=host, agent_info=agent_info, txn_type=txn_type)[0]

    def begin_write(self, tables: Iterable[str], *, user: str | None = None, host: str | None = None,
                    agent_info: str = "") -> tuple[int, dict[str, int]]:
        """Open a txn and allocate its write ids for ``tables`` — what a writer does first, in one
        call (one round trip on PostgreSQL for a single table, like Hive's streaming client's
        ``newTransaction``). Returns ``(txn_id, {table: write_id})``."""
        names = list(dict.fromkeys(tables))
        if not names:
            raise InvalidInputError("begin_write needs at least one table")
        keys = {n: split_name(n) for n in names}
        if len(names) == 1 and self.store.fast is not None:
            self._maybe_sweep()
            self._check_open_cap(1)
            opened = self.store.fast.open_with_write_id(
                self.store.clock(), (user or self._user)[:128], (host or self._host)[:128], agent_info[:256],
                int(TxnType.DEFAULT), *keys[names[0]])
            if opened is None:
                raise TableNotFoundError(f"unknown table {'.'.join(keys[names[0]])}")
            self._open_count += 1
            return opened[0], {names[0]: opened[1]}
        txn = self.open_txn(user=user, host=host, agent_info=agent_info)
        try:
            return txn, self.allocate_write_ids(txn, names)
        except Exception:
            self.abort_txn(txn, "write id allocation failed")
            raise

    def open_txns(self, count: int, *, user: str | None = None, host: str | None = None,
                  agent_info: str = "", txn_type: TxnType = TxnType.DEFAULT) -> list[int]:
        """Open ``count`` transactions at once (Hive's batch ``openTxns``)."""
        if not isinstance(count, int) or not 1 <= count <= 10_000:
            raise InvalidInputError(f"can open 1..10000 transactions at once, not {count!r}")
        self._maybe_sweep()
        self._check_open_cap(count)
        now = self.store.clock()
        if count == 1 and self.store.fast is not None:
            txn = self.store.fast.open_one(now, (user or self._user)[:128], (host or self._host)[:128],
                                           agent_info[:256], int(txn_type))
            self._open_count += 1
            return [txn]
        rows = [{"txn_state": TxnState.OPEN, "txn_started": now, "txn_last_heartbeat": now, "txn_heartbeat_count": 0,
                 "txn_user": (user or self._user)[:128], "txn_host": (host or self._host)[:128],
                 "txn_agent_info": agent_info[:256], "txn_type": int(txn_type)} for _ in range(count)]
        with self.store.write() as conn:
            ids = self.counters.take_txn_ids(conn, count)
            conn.execute(insert(txns), [{**r, "txn_id": i} for r, i in zip(rows, ids)])
        self._open_count += count
        return ids

    def _check_open_cap(self, count: int) -> None:
        """Refuse to open past ``max_open_txns``. Like Hive (``metastore.count.open.txns.interval``)
        the count is refreshed at most once a second, so the cap is approximate under load."""
        now = self.store.clock()
        if now - self._open_count_at >= 1000:
            with self.store.read() as conn:
                self._open_count = conn.execute(
                    select(func.count()).select_from(txns).where(txns.c.txn_state == TxnState.OPEN)).scalar_one()
            self._open_count_at = now
        if self._open_count + count > self.config.max_open_txns:
            self._open_count_at = 0  # look again next time, the others may have ended
            raise TooManyOpenTxnsError(
                f"{self._open_count} transactions are open; opening {count} more would exceed max_open_txns="
                f"{self.config.max_open_txns}. Commit or abort some (hive-acid show transactions).")

    def _maybe_sweep(self) -> None:
        """Abort timed-out txns at most once per housekeeper interval per client, as Hive's
        AcidHouseKeeperService would, so an embedded setup needs no separate daemon."""
        now = self.store.clock()
        if now - self._last_sweep >= self.config.housekeeper_interval * 1000:
            self._last_sweep = now
            self.abort_timed_out()

    # -- lookups ------------------------------------------------------------------------------
    def get_txn(self, txn_id: int) -> TxnInfo:
        with self.store.read() as conn:
            row = conn.execute(select(txns).where(txns.c.txn_id == txn_id)).mappings().first()
        if row is None:
            raise NoSuchObjectError(f"unknown transaction {txn_id}")
        return _txn_info(row)

    def show_transactions(self, include_committed: bool = False) -> list[TxnInfo]:
        """SHOW TRANSACTIONS: open and aborted transactions (and committed ones if asked)."""
        q = select(txns).order_by(txns.c.txn_id)
        if not include_committed:
            q = q.where(txns.c.txn_state.in_((TxnState.OPEN, TxnState.ABORTED)))
        with self.store.read() as conn:
            return [_txn_info(r) for r in conn.execute(q).mappings()]

    def find_txns(self, agent_info: str) -> list[TxnInfo]:
        """Txns opened with exactly this agent info, oldest first: how a retried Airflow task finds
        what its earlier attempt did (committed: do not write again; open: abort it)."""
        if not agent_info:
            raise InvalidInputError("agent info to look up must not be empty")
        q = select(txns).where(txns.c.txn_agent_info == agent_info).order_by(txns.c.txn_id)
        with self.store.read() as conn:
            return [_txn_info(r) for r in conn.execute(q).mappings()]

    def writes_of(self, txn_id: int) -> list[WriteStat]:
        """The write stats a txn recorded (at commit, or by statements of a shared txn)."""
        _check_txn_id(txn_id)
        q = select(write_stats).where(write_stats.c.ws_txnid == txn_id,
                                      write_stats.c.ws_operation_type != Operation.COMPACT).order_by(
            write_stats.c.ws_database, write_stats.c.ws_table, write_stats.c.ws_partition)
        with self.store.read() as conn:
            rows = conn.execute(q).mappings().all()
        return [WriteStat(r["ws_database"], r["ws_table"], r["ws_partition"], r["ws_writeid"],
                          Operation(r["ws_operation_type"]), **{k: r[k] for k in WriteCounts.COUNTS})
                for r in rows]

    def next_txn_id(self) -> int:
        """The id the next txn to open will get at the earliest."""
        with self.store.read() as conn:
            return self._next_txn_value(conn)

    def _next_txn_value(self, conn: Connection) -> int:
        return self.counters.next_txn_id(conn)

    # -- state checks shared by allocate / lock / heartbeat / commit ---------------------------
    def _check_open(self, conn: Connection, txn_id: int, *, lock_row: bool = False) -> tuple:
        """The txn's row if it is open and alive; otherwise raise (``_Expired`` if it timed out)."""
        q = self.store.for_update(_SEL_TXN) if lock_row else _SEL_TXN
        return self._check_row(txn_id, conn.execute(q, {"b_txn": txn_id}).first())

    def _check_row(self, txn_id: int, row: tuple | None) -> tuple:
        if row is None:
            raise NoSuchObjectError(f"unknown transaction {txn_id}")
        state, last_hb, reason, _type = row
        if state is TxnState.ABORTED:
            raise _aborted_error(txn_id, reason)
        if state is TxnState.COMMITTED:
            raise TxnError(f"transaction {txn_id} is already committed")
        if self.store.clock() - last_hb > self.timeout_ms:
            raise _Expired(txn_id)
        return row

    def _run_checked(self, txn_id: int, fn: Callable[[Connection], T]) -> T:
        """Run ``fn(conn)`` in a write txn; if the txn turned out expired, abort it and raise."""
        _check_txn_id(txn_id)
        try:
            with self.store.write() as conn:
                return fn(conn)
        except _Expired:
            self._abort(txn_id, REASON_TIMED_OUT, only_if_expired=True)
            raise TxnTimedOutError(
                f"transaction {txn_id} timed out: no heartbeat for more than {self.config.txn_timeout:g}s; "
                "it was aborted", txn_id, REASON_TIMED_OUT) from None

    # -- write ids ----------------------------------------------------------------------------
    def allocate_write_id(self, txn_id: int, table: str) -> int:
        """The txn's write id for ``table`` (allocated once per txn and table, then reused)."""
        return self.allocate_write_ids(txn_id, [table])[table]

    def allocate_write_ids(self, txn_id: int, tables: Iterable[str]) -> dict[str, int]:
        names = list(dict.fromkeys(tables))
        if not names:
            raise InvalidInputError("no table to allocate a write id for")
        keys = {n: split_name(n) for n in names}
        if len(names) == 1 and self.store.fast is not None:
            _check_txn_id(txn_id)
            wid = self.store.fast.allocate(txn_id, *keys[names[0]], self.store.clock() - self.timeout_ms)
            if wid is not None:
                return {names[0]: wid}

        def run(conn: Connection) -> dict[str, int]:
            rows = conn.execute(_SEL_TXN_WITH_WRITE_IDS, {"b_txn": txn_id}).all()
            self._check_row(txn_id, tuple(rows[0][:4]) if rows else None)
            have = {(r[4], r[5]): r[6] for r in rows if r[4] is not None}
            out: dict[str, int] = {}
            for name in sorted(names, key=lambda n: keys[n]):
                db, tbl = keys[name]
                if (db, tbl) in have:
                    out[name] = have[(db, tbl)]
                    continue
                wid = self.counters.take_write_id(conn, db, tbl)
                if wid is None:   # every table gets its counter when it is created
                    raise TableNotFoundError(f"unknown table {db}.{tbl}")
                conn.execute(insert(txn_to_write_id).values(
                    t2w_txnid=txn_id, t2w_database=db, t2w_table=tbl, t2w_writeid=wid))
                out[name] = wid
            return out

        return self._run_checked(txn_id, run)

    def write_ids_of(self, txn_id: int) -> dict[str, int]:
        """Write ids a txn was given, by ``db.table``."""
        with self.store.read() as conn:
            return {f"{r[0]}.{r[1]}": r[2] for r in conn.execute(select(
                txn_to_write_id.c.t2w_database, txn_to_write_id.c.t2w_table, txn_to_write_id.c.t2w_writeid)
                .where(txn_to_write_id.c.t2w_txnid == txn_id))}

    # -- heartbeat ----------------------------------------------------------------------------
    def heartbeat(self, txn_id: int) -> None:
        """Keep an open txn (and its locks) alive; raises if it was aborted or timed out."""
        now = self.store.clock()
        with self.store.write() as conn:
            if conn.execute(_HEARTBEAT, {"b_txn": txn_id, "oldest": now - self.timeout_ms, "now": now}).rowcount:
                return

        def run(conn: Connection) -> None:
            self._check_open(conn, txn_id)
            # Open and alive after all (a clock step between the two statements): record it.
            conn.execute(_HEARTBEAT, {"b_txn": txn_id, "oldest": 0, "now": self.store.clock()})

        self._run_checked(txn_id, run)

    # -- write components (Hive's addDynamicPartitions) -----------------------------------------
    def add_write_components(self, txn_id: int, table: str, partitions: Iterable[str],
                             operation: Operation) -> None:
        """Record which partitions the txn writes, before commit, so that if it aborts the cleaner
        knows where its files are, and so its update/delete footprint is known for conflicts."""
        info = self.catalog.get_table(table)
        operation = Operation(operation)
        parts = sorted({self.catalog.check_partition_name(info, p) for p in partitions})

        def run(conn: Connection) -> None:
            self._check_open(conn, txn_id, lock_row=True)
            wid = self._write_id_for(conn, txn_id, info.db, info.name)
            self._insert_components(conn, txn_id, info.db, info.name, parts, operation, wid)

        self._run_checked(txn_id, run)

    def _write_id_for(self, conn: Connection, txn_id: int, db: str, table: str) -> int:
        wid = conn.execute(select(txn_to_write_id.c.t2w_writeid).where(
            txn_to_write_id.c.t2w_database == db, txn_to_write_id.c.t2w_table == table,
            txn_to_write_id.c.t2w_txnid == txn_id)).scalar()
        if wid is None:
            raise TxnError(f"transaction {txn_id} has no write id for {db}.{table}: allocate one first")
        return wid

    @staticmethod
    def _insert_components(conn: Connection, txn_id: int, db: str, table: str, parts: list[str],
                           operation: Operation, write_id: int | None) -> None:
        have = {(r[0], r[1]) for r in conn.execute(select(
            txn_components.c.tc_partition, txn_components.c.tc_operation_type).where(
            txn_components.c.tc_txnid == txn_id, txn_components.c.tc_database == db,
            txn_components.c.tc_table == table))}
        rows = [{"tc_txnid": txn_id, "tc_database": db, "tc_table": table, "tc_partition": p,
                 "tc_operation_type": operation, "tc_writeid": write_id}
                for p in parts if (p, operation) not in have]
        if rows:
            conn.execute(insert(txn_components), rows)

    # -- commit -------------------------------------------------------------------------------
    # -- statements and their writes --------------------------------------------------------
    def statement_id(self, txn_id: int, table: str, key: str = "default") -> int:
        """The statement id for ``key`` (e.g. an Airflow task id) in this txn and table: 0, 1, ...
        in order of first request, the same id again for the same key (a retried task)."""
        return self.statement_ids(txn_id, table, key)[0]

    def statement_ids(self, txn_id: int, table: str, key: str = "default", count: int = 1,
                      snapshot: str | None = None) -> list[int]:
        """The statement id for ``key`` (as :meth:`statement_id`) and ``count - 1`` more, for a
        statement whose writer tasks each write their own delta (Hive allows several statements
        per write id); the same ids again for the same key. The extra ids are taken from the top
        of the range down (rows keyed ``<key>\x1f<i>``), so statements keep counting 0, 1, ...
        ``snapshot`` (the statement's read snapshot, as text) is kept with the key's id."""
        db, tbl = split_name(table)
        if not key or len(key) > 240 or RESERVED_KEY_SEP in key:
            raise InvalidInputError("a statement key must be 1..240 characters, without \\x1f")
        if not 1 <= count <= MAX_STATEMENT_ID + 1:
            raise InvalidInputError(f"statement id count {count} is outside 1..{MAX_STATEMENT_ID + 1}")

        def run(conn: Connection) -> list[int]:
            self._check_open(conn, txn_id, lock_row=True)   # serialises statements of this txn
            self._write_id_for(conn, txn_id, db, tbl)
            rows = conn.execute(select(txn_statements.c.ts_key, txn_statements.c.ts_stmt_id).where(
                txn_statements.c.ts_txnid == txn_id, txn_statements.c.ts_database == db,
                txn_statements.c.ts_table == tbl)).all()
            primary = {k: sid for k, sid in rows if RESERVED_KEY_SEP not in k}
            extra = {k: sid for k, sid in rows if RESERVED_KEY_SEP in k}
            if key in primary:
                if snapshot is not None:
                    conn.execute(update(txn_statements).where(
                        txn_statements.c.ts_txnid == txn_id, txn_statements.c.ts_database == db,
                        txn_statements.c.ts_table == tbl, txn_statements.c.ts_key == key).values(ts_snapshot=snapshot))
                mine = sorted((int(k.rsplit(RESERVED_KEY_SEP, 1)[1]), sid) for k, sid in extra.items()
                              if k.rsplit(RESERVED_KEY_SEP, 1)[0] == key)
                return [primary[key]] + [sid for _, sid in mine]
            first, top = len(primary), MAX_STATEMENT_ID - len(extra)
            if first > top - (count - 1):
                raise InvalidInputError(f"txn {txn_id} has no {count} statement ids left for {table} "
                                        f"({len(rows)} of {MAX_STATEMENT_ID + 1} are taken)")
            ids = [first] + [top - i for i in range(count - 1)]
            conn.execute(insert(txn_statements), [
                {"ts_txnid": txn_id, "ts_database": db, "ts_table": tbl,
                 "ts_key": key if i == 0 else f"{key}{RESERVED_KEY_SEP}{i}", "ts_stmt_id": sid,
                 "ts_snapshot": snapshot if i == 0 else None}
                for i, sid in enumerate(ids)])
            return ids

        return self._run_checked(txn_id, run)

    def statement_of(self, txn_id: int, table: str, key: str) -> tuple[int, str | None] | None:
        """The statement id ``key`` got in this txn and table, and the snapshot it recorded; None
        if it never asked (in any txn state: a retried task looks up what its try committed)."""
        db, tbl = split_name(table)
        with self.store.read() as conn:
            row = conn.execute(select(txn_statements.c.ts_stmt_id, txn_statements.c.ts_snapshot).where(
                txn_statements.c.ts_txnid == txn_id, txn_statements.c.ts_database == db,
                txn_statements.c.ts_table == tbl, txn_statements.c.ts_key == key)).first()
        return (row[0], row[1]) if row is not None else None

    def add_writes(self, txn_id: int, writes: Iterable[WriteStat]) -> None:
        """Record what a statement wrote (partitions, operation, stats) before the txn commits:
        the commit then knows every statement's writes, and if the txn aborts the cleaner knows
        where its files are."""
        writes = list(writes)
        self._check_writes(writes)

        def run(conn: Connection) -> None:
            self._check_open(conn, txn_id, lock_row=True)
            self._record_writes(conn, txn_id, writes, None)

        self._run_checked(txn_id, run)

    def _check_writes(self, writes: list[WriteStat]) -> None:
        tables: dict[str, TableInfo] = {}
        for w in writes:
            key = f"{w.db}.{w.table}"
            if key not in tables:
                tables[key] = self.catalog.get_table(key)
            self.catalog.check_partition_name(tables[key], w.partition)

    def _record_writes(self, conn: Connection, txn_id: int, writes: list[WriteStat], now: int | None) -> None:
        if not writes:
            return
        own = {(r[0], r[1]): r[2] for r in conn.execute(select(
            txn_to_write_id.c.t2w_database, txn_to_write_id.c.t2w_table, txn_to_write_id.c.t2w_writeid)
            .where(txn_to_write_id.c.t2w_txnid == txn_id))}
        for w in writes:
            if own.get((w.db, w.table)) != w.write_id:
                raise InvalidInputError(
                    f"write stat for {w.db}.{w.table} names write id {w.write_id}, but transaction "
                    f"{txn_id} holds write id {own.get((w.db, w.table))} for that table")
        for w in writes:
            self._insert_components(conn, txn_id, w.db, w.table, [w.partition], w.operation, w.write_id)
        conn.execute(insert(write_stats), [_stat_row(w, txn_id, now) for w in writes])

    # -- commit -------------------------------------------------------------------------------
    def commit_txn(self, txn_id: int, writes: Iterable[WriteStat] = (), *,
                   stream: StreamBatch | None = None) -> CommitResult:
        """Commit: record ``writes`` (and what statements recorded with ``add_writes``), check
        write-write conflicts, register new partitions, release locks. Committing an already
        committed txn is a no-op (a retried task finds it done).

        ``stream``: the micro-batch this txn applies, recorded in the same database transaction;
        a batch of that query already committed into that table makes the commit fail and
        leaves the txn open for the caller to abort (exactly once across query restarts)."""
        _check_txn_id(txn_id)
        writes = list(writes)
        if stream is not None:
            s_db, s_tbl = split_name(stream.table)
            if not stream.query_id or len(stream.query_id) > 64 or stream.batch_id < 0:
                raise InvalidInputError(f"bad stream batch: query id {stream.query_id!r}, batch {stream.batch_id}")
        if not writes and stream is None and self.store.fast is not None:
            now = self.store.clock()
            if self.store.fast.commit_plain(txn_id, now, now - self.timeout_ms):
                return CommitResult(txn_id)
        self._check_writes(writes)
        conflict: list[WriteConflictError] = []

        def run(conn: Connection) -> CommitResult:
            now = self.store.clock()
            if stream is not None:
                done = self._stream_batch(conn, s_db, s_tbl, stream.query_id, stream.batch_id)
                if done is not None:
                    raise TxnError(f"batch {stream.batch_id} of streaming query {stream.query_id} is already "
                                   f"committed into {stream.table} (transaction {done.txn_id})")
            # Claim the row first: an open, alive txn becomes committed in this DB transaction
            # (and the row stays locked); anything else is diagnosed on the slow path.
            txn_type = conn.execute(_MARK_COMMITTED, {"b_txn": txn_id, "oldest": now - self.timeout_ms,
                                                      "now": now}).scalar()
            if txn_type is None:
                row = conn.execute(_SEL_TXN, {"b_txn": txn_id}).first()
                if row is not None and row[0] is TxnState.COMMITTED:
                    return CommitResult(txn_id, already_committed=True)
                self._check_row(txn_id, row)
                raise _Expired(txn_id)   # open but its heartbeat just expired
            self._record_writes(conn, txn_id, writes, None)
            comps: dict[tuple[str, str, str], tuple[Operation, int | None]] = {}
            for db, tbl, part, op, wid in conn.execute(_TAKE_COMPONENTS, {"b_txn": txn_id}).all():
                prev = comps.get((db, tbl, part))
                if prev is None or (op.rewrites and prev[0] is Operation.INSERT):
                    comps[(db, tbl, part)] = (op, wid)
            rewrites = sorted(k for k, v in comps.items() if v[0].rewrites)
            if rewrites:
                hit = self._find_conflict(conn, txn_id, {k: comps[k][0] for k in rewrites})
                if hit is not None:
                    (db, tbl, part), other, op = hit
                    where = f"{db}.{tbl}" + (f"/{part}" if part else "")
                    reason = (f"{REASON_WRITE_CONFLICT} on {where} with transaction {other}, "
                              f"which committed an {op.name.lower()} first")
                    # keep the components: the cleaner finds the aborted files by them
                    conn.execute(insert(txn_components), [_component_row(txn_id, k, v) for k, v in comps.items()])
                    self._abort_rows(conn, [txn_id], reason, now, from_state=TxnState.COMMITTED)
                    conflict.append(WriteConflictError(f"transaction {txn_id} aborted: {reason}", txn_id, reason))
                    return CommitResult(txn_id)
            by_table: dict[tuple[str, str], list[str]] = {}
            for db, tbl, part in comps:
                if part:
                    by_table.setdefault((db, tbl), []).append(part)
            for (db, tbl), parts in sorted(by_table.items()):
                self.catalog.add_partitions(conn, db, tbl, parts, txn_id)
            if comps:
                conn.execute(insert(completed_txn_components), [
                    {"ctc_txnid": txn_id, "ctc_database": k[0], "ctc_table": k[1], "ctc_partition": k[2],
                     "ctc_timestamp": now, "ctc_writeid": v[1] or 0, "ctc_update_delete": "Y" if v[0].rewrites else "N"}
                    for k, v in comps.items()])
                conn.execute(update(write_stats).where(write_stats.c.ws_txnid == txn_id,
                                                       write_stats.c.committed_at.is_(None)).values(committed_at=now))
            conn.execute(_RELEASE_LOCKS, {"b_txn": txn_id})
            if stream is not None:
                wid = conn.execute(select(txn_to_write_id.c.t2w_writeid).where(
                    txn_to_write_id.c.t2w_txnid == txn_id, txn_to_write_id.c.t2w_database == s_db,
                    txn_to_write_id.c.t2w_table == s_tbl)).scalar()
                rows = sum(w.rows_inserted + w.rows_updated for w in writes if (w.db, w.table) == (s_db, s_tbl))
                conn.execute(insert(stream_batches).values(
                    sb_database=s_db, sb_table=s_tbl, sb_query_id=stream.query_id, sb_batch_id=stream.batch_id,
                    sb_txnid=txn_id, sb_writeid=wid or 0, sb_rows=rows, sb_committed_at=now))
            if txn_type == int(TxnType.COMPACTION):
                conn.execute(update(compaction_queue).where(compaction_queue.c.cq_txn_id == txn_id).values(
                    cq_next_txn_id=self._next_txn_value(conn), cq_commit_time=now))
            return CommitResult(txn_id)

        result = self._run_checked(txn_id, run)
        if conflict:
            raise conflict[0]
        return result

    def _find_conflict(self, conn: Connection, txn_id: int, rewrites: dict[tuple[str, str, str], Operation]
                       ) -> tuple[tuple[str, str, str], int, Operation] | None:
        """First committer wins: a committed update/delete of the same partition by a txn that
        committed after this one opened. Records this txn's footprint if there is none."""
        # The commit id is read after this txn's row was marked committed: a txn that opens later
        # gets a higher id and, as its snapshot waits for this commit (see _valid_txns), sees our
        # writes; one that opened earlier has an id <= commit id and conflicts. The tables' rows
        # are locked so that two committers of one table check one after the other.
        counter = self._next_txn_value(conn)
        for db, tbl in sorted({(r[0], r[1]) for r in rewrites}):
            conn.execute(self.store.for_update(select(tbls.c.name).where(tbls.c.db == db, tbls.c.name == tbl)))
        for key in sorted(rewrites):
            hit = conn.execute(_SEL_CONFLICT, {"b_db": key[0], "b_tbl": key[1], "b_part": key[2],
                                               "b_txn": txn_id}).first()
            if hit is not None:
                return key, hit[0], hit[2]
        conn.execute(insert(write_set), [
            {"ws_database": db, "ws_table": tbl, "ws_partition": part, "ws_txnid": txn_id,
             "ws_commit_id": counter - 1, "ws_operation_type": op} for (db, tbl, part), op in rewrites.items()])
        return None

    # -- streaming ----------------------------------------------------------------------------
    def stream_batch(self, table: str, query_id: str, batch_id: int) -> StreamBatch | None:
        """The committed micro-batch ``batch_id`` of ``query_id`` into ``table``, if any."""
        db, tbl = split_name(table)
        with self.store.read() as conn:
            return self._stream_batch(conn, db, tbl, query_id, batch_id)

    def stream_batches(self, table: str, query_id: str | None = None) -> list[StreamBatch]:
        """Micro-batches committed into ``table`` (of one query if given), oldest first."""
        db, tbl = split_name(table)
        q = select(stream_batches).where(stream_batches.c.sb_database == db, stream_batches.c.sb_table == tbl)
        if query_id is not None:
            q = q.where(stream_batches.c.sb_query_id == query_id)
        with self.store.read() as conn:
            return [_stream_batch(r) for r in conn.execute(
                q.order_by(stream_batches.c.sb_committed_at, stream_batches.c.sb_batch_id)).mappings()]

    @staticmethod
    def _stream_batch(conn: Connection, db: str, tbl: str, query_id: str, batch_id: int) -> StreamBatch | None:
        row = conn.execute(select(stream_batches).where(
            stream_batches.c.sb_database == db, stream_batches.c.sb_table == tbl,
            stream_batches.c.sb_query_id == query_id, stream_batches.c.sb_batch_id == batch_id)).mappings().first()
        return None if row is None else _stream_batch(row)

    def purge_stream_batches(self, older_than_ms: int) -> int:
        """Forget micro-batches committed before ``older_than_ms`` except each query's latest:
        Spark replays at most the batch after its last committed one."""
        newer = stream_batches.alias("newer")
        later = select(newer.c.sb_batch_id).where(
            newer.c.sb_database == stream_batches.c.sb_database, newer.c.sb_table == stream_batches.c.sb_table,
            newer.c.sb_query_id == stream_batches.c.sb_query_id,
            newer.c.sb_batch_id > stream_batches.c.sb_batch_id).exists()
        with self.store.write() as conn:
            return conn.execute(delete(stream_batches).where(
                stream_batches.c.sb_committed_at < older_than_ms, later)).rowcount

    # -- abort --------------------------------------------------------------------------------
    def abort_txn(self, txn_id: int, reason: str = REASON_USER, writes: Iterable[WriteStat] = ()) -> bool:
        """Abort an open txn; its write ids stay invalid for every reader until cleaned.

        ``writes`` (from a job's manifest) tell the cleaner where the txn left files. Returns
        False if the txn was already aborted; raises if it is unknown or committed."""
        writes = list(writes)
        now = self.store.clock()
        with self.store.write() as conn:
            row = conn.execute(self.store.for_update(_SEL_TXN), {"b_txn": txn_id}).first()
            if row is None:
                raise NoSuchObjectError(f"unknown transaction {txn_id}")
            if row[0] is TxnState.COMMITTED:
                raise TxnError(f"transaction {txn_id} is already committed and cannot be aborted")
            if row[0] is TxnState.ABORTED:
                return False
            for w in writes:    # only where the files are; stats of an aborted txn mean nothing
                self._insert_components(conn, txn_id, w.db, w.table, [w.partition], w.operation, w.write_id)
            self._abort_rows(conn, [txn_id], reason, now)
        return True

    def abort_txns(self, txn_ids: Iterable[int], reason: str = REASON_USER) -> list[int]:
        """ABORT TRANSACTIONS: abort every listed open txn; unknown ids are an error."""
        ids = sorted(set(txn_ids))
        if not ids:
            raise InvalidInputError("no transaction ids given")
        now = self.store.clock()
        with self.store.write() as conn:
            found = {r[0]: r[1] for r in conn.execute(
                select(txns.c.txn_id, txns.c.txn_state).where(txns.c.txn_id.in_(ids)))}
            missing = [i for i in ids if i not in found]
            if missing:
                raise NoSuchObjectError(f"unknown transaction(s) {missing}")
            to_abort = [i for i in ids if found[i] is TxnState.OPEN]
            self._abort_rows(conn, to_abort, reason, now)
        return to_abort

    def _abort(self, txn_id: int, reason: str, *, only_if_expired: bool = False) -> None:
        now = self.store.clock()
        with self.store.write() as conn:
            q = update(txns).where(txns.c.txn_id == txn_id, txns.c.txn_state == TxnState.OPEN)
            if only_if_expired:
                q = q.where(txns.c.txn_last_heartbeat < now - self.timeout_ms)
            if conn.execute(q.values(txn_state=TxnState.ABORTED, txn_meta_info=reason, txn_ended=now)).rowcount:
                conn.execute(delete(hive_locks).where(hive_locks.c.hl_txnid == txn_id))

    @staticmethod
    def _abort_rows(conn: Connection, ids: list[int], reason: str, now: int,
                    from_state: TxnState = TxnState.OPEN) -> None:
        """Abort: locks go, recorded stats go (nothing was committed), components stay."""
        if not ids:
            return
        conn.execute(update(txns).where(txns.c.txn_id.in_(ids), txns.c.txn_state == from_state).values(
            txn_state=TxnState.ABORTED, txn_meta_info=reason[:4000], txn_ended=now))
        conn.execute(delete(hive_locks).where(hive_locks.c.hl_txnid.in_(ids)))
        conn.execute(delete(write_stats).where(write_stats.c.ws_txnid.in_(ids), write_stats.c.committed_at.is_(None)))

    def abort_timed_out(self) -> list[int]:
        """Abort every open txn whose last heartbeat is older than ``txn_timeout`` (reason
        ``timed out``) and drop txn-less locks that stopped heartbeating."""
        now = self.store.clock()
        oldest = now - self.timeout_ms
        with self.store.write() as conn:
            ids = [r[0] for r in conn.execute(select(txns.c.txn_id).where(
                txns.c.txn_state == TxnState.OPEN, txns.c.txn_last_heartbeat < oldest))]
            self._abort_rows(conn, ids, REASON_TIMED_OUT, now)
            conn.execute(delete(hive_locks).where(hive_locks.c.hl_txnid == 0,
                                                  hive_locks.c.hl_last_heartbeat < oldest))
        return ids

    # -- snapshots ----------------------------------------------------------------------------
    def _valid_txns(self, conn: Connection, txn_id: int | None) -> ValidTxnList:
        # On PostgreSQL, wait out in-flight opens, commits and allocations first (see counters):
        # then every id up to the high watermark is settled.
        self.counters.lock_for_snapshot(conn)
        hwm = self._next_txn_value(conn) - 1
        if txn_id is not None:
            hwm = min(hwm, txn_id)
        rows = conn.execute(select(txns.c.txn_id, txns.c.txn_state).where(
            txns.c.txn_state.in_((TxnState.OPEN, TxnState.ABORTED)), txns.c.txn_id <= hwm)).all()
        open_ids = [r[0] for r in rows if r[0] != txn_id and r[1] is TxnState.OPEN]
        aborted = [r[0] for r in rows if r[0] != txn_id and r[1] is TxnState.ABORTED]
        return ValidTxnList(hwm, tuple(open_ids), tuple(aborted),
                            min_open_txn=min(open_ids) if open_ids else LONG_MAX)

    def snapshot(self, table: str, txn_id: int | None = None) -> TableSnapshot:
        """A reader's snapshot of ``table`` now, or as transaction ``txn_id`` sees it (own writes
        visible, everything that committed after it opened invisible)."""
        return self.snapshots([table], txn_id)[table]

    def snapshots(self, tables: Iterable[str], txn_id: int | None = None) -> dict[str, TableSnapshot]:
        names = list(dict.fromkeys(tables))
        keys = {n: split_name(n) for n in names}
        for n in names:
            self.catalog.get_table(n)
        with self.store.read(consistent=True) as conn:
            vtl = self._valid_txns(conn, txn_id)
            if txn_id is not None:
                row = conn.execute(_SEL_TXN, {"b_txn": txn_id}).first()
                if row is None:
                    raise NoSuchObjectError(f"unknown transaction {txn_id}")
                if row[0] is not TxnState.OPEN:
                    raise _aborted_error(txn_id, row[2]) if row[0] is TxnState.ABORTED else TxnError(
                        f"transaction {txn_id} is already committed")
            out = {}
            for n in names:
                db, tbl = keys[n]
                out[n] = TableSnapshot(vtl, self._valid_write_ids(conn, db, tbl, vtl, txn_id))
            return out

    def _valid_write_ids(self, conn: Connection, db: str, tbl: str, vtl: ValidTxnList,
                         txn_id: int | None) -> ValidWriteIdList:
        hwm = self.counters.write_id_high_watermark(conn, db, tbl)
        q = (select(txn_to_write_id.c.t2w_writeid, txns.c.txn_id, txns.c.txn_state)
             .join(txns, txns.c.txn_id == txn_to_write_id.c.t2w_txnid)
             .where(txn_to_write_id.c.t2w_database == db, txn_to_write_id.c.t2w_table == tbl,
                    or_(txns.c.txn_state.in_((TxnState.OPEN, TxnState.ABORTED)), txns.c.txn_id > vtl.high_watermark)))
        if txn_id is not None:
            q = q.where(txns.c.txn_id != txn_id)
        open_ids: list[int] = []
        aborted: list[int] = []
        for wid, tid, state in conn.execute(q):
            if wid > hwm:
                continue
            (aborted if state is TxnState.ABORTED and tid <= vtl.high_watermark else open_ids).append(wid)
        return ValidWriteIdList(hwm, tuple(open_ids), tuple(aborted), table=f"{db}.{tbl}",
                                min_open_write_id=min(open_ids) if open_ids else LONG_MAX)

    def adopt_history(self, table: str, max_write_id: int, aborted_write_ids: Iterable[int] = ()) -> None:
        """A table directory written elsewhere (Hive) comes with write ids up to
        ``max_write_id``: they become committed history, except ``aborted_write_ids``, which
        are recorded as written by an aborted txn so readers skip them and the cleaner may
        remove them."""
        info = self.catalog.get_table(table)
        aborted = sorted(set(aborted_write_ids))
        if max_write_id < 0 or any(a < 1 or a > max_write_id for a in aborted):
            raise InvalidInputError(f"aborted write ids {aborted} must lie within 1..{max_write_id}")
        with self.store.write() as conn:
            if self.counters.write_id_high_watermark(conn, info.db, info.name) > 0:
                raise InvalidInputError(f"{info.qualified_name} already has write ids; history can only "
                                        "be adopted by a new table")
            self.counters.advance_write_id(conn, info.db, info.name, max_write_id)
        for w in aborted:    # one txn per write id: a txn holds one write id per table
            holder = self.open_txn(agent_info=f"history of {info.qualified_name}")
            with self.store.write() as conn:
                conn.execute(insert(txn_to_write_id).values(
                    t2w_txnid=holder, t2w_database=info.db, t2w_table=info.name, t2w_writeid=w))
            self.abort_txn(holder, "aborted before the table was registered")

    # -- housekeeping -------------------------------------------------------------------------
    def purge_committed_metadata(self) -> int:
        """Drop ``txn_to_write_id`` rows of committed txns older than every open txn (no snapshot
        can list them as exceptions any more) and ``write_set`` rows no open txn overlaps."""
        with self.store.write() as conn:
            low = conn.execute(select(func.min(txns.c.txn_id)).where(txns.c.txn_state == TxnState.OPEN)).scalar()
            if low is None:
                low = self._next_txn_value(conn)
            committed = select(txns.c.txn_id).where(txns.c.txn_state == TxnState.COMMITTED, txns.c.txn_id < low)
            n = conn.execute(delete(txn_to_write_id).where(
                txn_to_write_id.c.t2w_txnid.in_(committed))).rowcount
            conn.execute(delete(write_set).where(write_set.c.ws_commit_id < low))
            conn.execute(delete(txn_statements).where(txn_statements.c.ts_txnid.in_(
                select(txns.c.txn_id).where(txns.c.txn_state != TxnState.OPEN))))
        return n

    def purge_empty_aborted(self) -> int:
        """Forget aborted txns that wrote nothing: no write id and no component (an aborted
        compactor has no write id, but its ``_v<txn>`` output must stay invisible until cleaned)."""
        with self.store.write() as conn:
            has_wid = select(txn_to_write_id.c.t2w_txnid)
            has_comp = select(txn_components.c.tc_txnid)
            return conn.execute(delete(txns).where(
                txns.c.txn_state == TxnState.ABORTED, txns.c.txn_id.not_in(has_wid),
                txns.c.txn_id.not_in(has_comp))).rowcount

    def purge_committed_txns(self, older_than_ms: int) -> int:
        """Forget committed txns that ended before ``older_than_ms`` and that neither a write-id
        row nor a queued compaction names (a compaction waiting for the cleaner tells by its
        txn's state that its output committed)."""
        with self.store.write() as conn:
            compactor_txns = select(compaction_queue.c.cq_txn_id).where(compaction_queue.c.cq_txn_id.is_not(None))
            return conn.execute(delete(txns).where(
                txns.c.txn_state == TxnState.COMMITTED, txns.c.txn_ended < older_than_ms,
                txns.c.txn_id.not_in(select(txn_to_write_id.c.t2w_txnid)),
                txns.c.txn_id.not_in(compactor_txns))).rowcount


class _Expired(Exception):
    def __init__(self, txn_id: int):
        super().__init__(txn_id)
        self.txn_id = txn_id


def _aborted_error(txn_id: int, reason: str | None) -> TxnAbortedError:
    if reason == REASON_TIMED_OUT:
        return TxnTimedOutError(f"transaction {txn_id} was aborted: it timed out (no heartbeat)", txn_id, reason)
    if reason and reason.startswith(REASON_WRITE_CONFLICT):
        return WriteConflictError(f"transaction {txn_id} was aborted: {reason}", txn_id, reason)
    return TxnAbortedError(f"transaction {txn_id} was aborted: {reason or 'no reason given'}", txn_id, reason)


def _txn_info(row: RowMapping) -> TxnInfo:
    return TxnInfo(txn_id=row["txn_id"], state=TxnState(row["txn_state"]), started=row["txn_started"],
                   last_heartbeat=row["txn_last_heartbeat"], user=row["txn_user"], host=row["txn_host"],
                   agent_info=row["txn_agent_info"], reason=row["txn_meta_info"],
                   txn_type=TxnType(row["txn_type"]), ended=row["txn_ended"])


def _check_txn_id(txn_id: object) -> None:
    if not isinstance(txn_id, int) or isinstance(txn_id, bool) or txn_id <= 0:
        raise InvalidInputError(f"bad transaction id {txn_id!r}")


def _component_row(txn_id: int, key: tuple[str, str, str], value: tuple[Operation, int | None]) -> dict:
    return {"tc_txnid": txn_id, "tc_database": key[0], "tc_table": key[1], "tc_partition": key[2],
            "tc_operation_type": value[0], "tc_writeid": value[1]}


def _stream_batch(r: RowMapping) -> StreamBatch:
    return StreamBatch(f"{r['sb_database']}.{r['sb_table']}", r["sb_query_id"], r["sb_batch_id"], r["sb_txnid"],
                       r["sb_writeid"], r["sb_rows"], r["sb_committed_at"])


def _stat_row(w: WriteStat, txn_id: int, now: int | None) -> dict:
    """A ``write_stats`` row; ``now`` is its commit time, None while the txn is open."""
    return {"ws_database": w.db, "ws_table": w.table, "ws_partition": w.partition, "ws_writeid": w.write_id,
            "ws_txnid": txn_id, "ws_operation_type": w.operation, **w.counts(), "committed_at": now}


