"""Where txn ids and per-table write ids come from.

SQLite serialises writers, so counter rows (Hive's ``NEXT_TXN_ID`` / ``NEXT_WRITE_ID``) cost
nothing there. On PostgreSQL a counter row would make every open (and every write-id allocation
of a table) wait for the previous one to commit; sequences hand out ids without a row lock.
Sequences may skip values (a rolled-back allocation, a crash), which is harmless: ids never
repeat and never go back, and a skipped write id simply has no files. What readers must not see
is an id that is handed out but not yet recorded: snapshots on PostgreSQL therefore take SHARE
locks on ``txns`` and ``txn_to_write_id`` first, which wait for such in-flight statements.
"""
from __future__ import annotations

import hashlib

from sqlalchemy import func, insert, select, text, update
from sqlalchemy.engine import Connection

from .schema import next_txn_id, next_write_id, txn_id_seq

LOCK_FOR_SNAPSHOT = (text("LOCK TABLE txns IN SHARE MODE"), text("LOCK TABLE txn_to_write_id IN SHARE MODE"))


def write_id_sequence(db: str, table: str) -> str:
    """The PostgreSQL sequence of a table's write ids: a name derived from a hash, never from
    user text, so it can appear in DDL."""
    return "ha_wid_" + hashlib.sha1(f"{db}.{table}".encode()).hexdigest()[:24]


class Counters:
    def __init__(self, is_sqlite: bool):
        self.is_sqlite = is_sqlite

    # -- txn ids ------------------------------------------------------------------------------
    def take_txn_ids(self, conn: Connection, count: int) -> list[int]:
        if self.is_sqlite:
            end = conn.execute(update(next_txn_id).where(next_txn_id.c.id == 1)
                               .values(ntxn_next=next_txn_id.c.ntxn_next + count)
                               .returning(next_txn_id.c.ntxn_next)).scalar_one()
            return list(range(end - count, end))
        return [conn.execute(select(txn_id_seq.next_value())).scalar_one() for _ in range(count)]

    def next_txn_id(self, conn: Connection) -> int:
        """No txn opened from now on gets an id below this."""
        if self.is_sqlite:
            return conn.execute(select(next_txn_id.c.ntxn_next).where(next_txn_id.c.id == 1)).scalar_one()
        last, called = conn.execute(text("SELECT last_value, is_called FROM txn_id_seq")).one()
        return last + 1 if called else last

    # -- write ids ----------------------------------------------------------------------------
    def create_write_id_counter(self, conn: Connection, db: str, table: str) -> None:
        """Called with the table's creation; a re-created table keeps counting where the dropped
        one stopped, so a write id never names two different writes."""
        if self.is_sqlite:
            if conn.execute(select(next_write_id.c.nwi_next).where(
                    next_write_id.c.nwi_database == db, next_write_id.c.nwi_table == table)).first() is None:
                conn.execute(insert(next_write_id).values(nwi_database=db, nwi_table=table, nwi_next=1))
        else:
            conn.execute(text(f'CREATE SEQUENCE IF NOT EXISTS "{write_id_sequence(db, table)}" START 1'))

    def take_write_id(self, conn: Connection, db: str, table: str) -> int | None:
        """The table's next write id, or None if it has no counter (unknown table)."""
        if self.is_sqlite:
            return conn.execute(update(next_write_id)
                                .where(next_write_id.c.nwi_database == db, next_write_id.c.nwi_table == table)
                                .values(nwi_next=next_write_id.c.nwi_next + 1)
                                .returning(next_write_id.c.nwi_next - 1)).scalar()
        if not self._sequence_exists(conn, db, table):
            return None
        return conn.execute(select(func.nextval(write_id_sequence(db, table)))).scalar_one()

    def write_id_high_watermark(self, conn: Connection, db: str, table: str) -> int:
        """The highest write id handed out for the table (0 if none). On PostgreSQL call it after
        the snapshot locks, so every id up to it is recorded or abandoned."""
        if self.is_sqlite:
            nxt = conn.execute(select(next_write_id.c.nwi_next).where(
                next_write_id.c.nwi_database == db, next_write_id.c.nwi_table == table)).scalar()
            return (nxt - 1) if nxt is not None else 0
        if not self._sequence_exists(conn, db, table):
            return 0
        last = conn.execute(select(func.pg_sequence_last_value(write_id_sequence(db, table)))).scalar()
        return last or 0

    def advance_write_id(self, conn: Connection, db: str, table: str, past: int) -> None:
        """Make the next write id at least ``past + 1`` (adopting a table with history)."""
        if self.is_sqlite:
            conn.execute(update(next_write_id).where(
                next_write_id.c.nwi_database == db, next_write_id.c.nwi_table == table,
                next_write_id.c.nwi_next <= past).values(nwi_next=past + 1))
        elif past > self.write_id_high_watermark(conn, db, table):
            conn.execute(select(func.setval(write_id_sequence(db, table), past, True)))

    @staticmethod
    def _sequence_exists(conn: Connection, db: str, table: str) -> bool:
        return conn.execute(select(func.to_regclass(write_id_sequence(db, table)))).scalar() is not None

    def lock_for_snapshot(self, conn: Connection) -> None:
        if not self.is_sqlite:
            for stmt in LOCK_FOR_SNAPSHOT:
                conn.execute(stmt)
