"""Single-statement forms of the three hottest calls for PostgreSQL.

Open, allocate-write-id and a plain commit are each one statement (a data-modifying CTE where
needed) sent in autocommit mode: one round trip instead of five or more, and the per-table
write-id row they update stays locked only for that statement. They implement exactly the checks
of the general (multi-statement) code in ``txn.py``, which stays the reference and runs whenever
a fast form declines: SQLite, a txn that is not open, a table's first write id, a commit with
writes or recorded components.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from psycopg.errors import UndefinedTable
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from .counters import write_id_sequence
from .models import TxnState, TxnType

# The codes these statements bind (``Code`` columns do this for SQLAlchemy statements).
_STATES = {"open": TxnState.OPEN.value, "committed": TxnState.COMMITTED.value, "compaction": int(TxnType.COMPACTION)}

OPEN_ONE = """
INSERT INTO txns (txn_id, txn_state, txn_started, txn_last_heartbeat, txn_heartbeat_count,
                  txn_user, txn_host, txn_agent_info, txn_type)
VALUES (nextval('txn_id_seq'), %(open)s, %(now)s, %(now)s, 0, %(user)s, %(host)s, %(agent)s, %(type)s)
RETURNING txn_id
"""

# Opens a txn and allocates its write id for one table in the same statement. The caller has
# checked that the table's write-id sequence exists.
OPEN_WITH_WRITE_ID = """
WITH t AS (INSERT INTO txns (txn_id, txn_state, txn_started, txn_last_heartbeat, txn_heartbeat_count,
                             txn_user, txn_host, txn_agent_info, txn_type)
           VALUES (nextval('txn_id_seq'), %(open)s, %(now)s, %(now)s, 0, %(user)s, %(host)s, %(agent)s, %(type)s)
           RETURNING txn_id),
     ins AS (INSERT INTO txn_to_write_id (t2w_txnid, t2w_database, t2w_table, t2w_writeid)
             SELECT t.txn_id, %(db)s, %(tbl)s, nextval(%(seq)s) FROM t RETURNING t2w_writeid)
SELECT t.txn_id, (SELECT t2w_writeid FROM ins) FROM t
"""

# Allocates only when the txn is open and alive and holds no write id for the table yet;
# returns no row otherwise (the general path then says why).
ALLOCATE = """
WITH t AS (SELECT 1 FROM txns WHERE txn_id = %(txn)s AND txn_state = %(open)s AND txn_last_heartbeat >= %(oldest)s),
     have AS (SELECT t2w_writeid FROM txn_to_write_id
              WHERE t2w_txnid = %(txn)s AND t2w_database = %(db)s AND t2w_table = %(tbl)s)
INSERT INTO txn_to_write_id (t2w_txnid, t2w_database, t2w_table, t2w_writeid)
SELECT %(txn)s, %(db)s, %(tbl)s, nextval(%(seq)s)
WHERE EXISTS (SELECT 1 FROM t) AND NOT EXISTS (SELECT 1 FROM have)
RETURNING t2w_writeid
"""

# A commit with nothing to record: no write components, not a compactor txn.
COMMIT_PLAIN = """
WITH c AS (UPDATE txns SET txn_state = %(committed)s, txn_ended = %(now)s
           WHERE txn_id = %(txn)s AND txn_state = %(open)s AND txn_last_heartbeat >= %(oldest)s
             AND txn_type <> %(compaction)s
             AND NOT EXISTS (SELECT 1 FROM txn_components WHERE tc_txnid = %(txn)s)
           RETURNING txn_id),
     l AS (DELETE FROM hive_locks WHERE hl_txnid IN (SELECT txn_id FROM c))
SELECT count(*) FROM c
"""


class FastPath:
    """Raw driver connections in autocommit mode, from a small pool of their own, for the
    statements above (SQLAlchemy's per-statement work would double the client CPU per txn)."""

    def __init__(self, url: str):
        self.engine: Engine = create_engine(url, isolation_level="AUTOCOMMIT", pool_size=2, max_overflow=8,
                                            pool_recycle=600)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        conn = self.engine.raw_connection()
        try:
            cur = conn.cursor()
            try:
                yield cur
            finally:
                cur.close()
        finally:
            conn.close()   # back to the pool

    def _one(self, sql: str, params: dict[str, Any]) -> Any:
        with self.cursor() as cur:
            cur.execute(sql, {**_STATES, **params}, prepare=True)
            row = cur.fetchone()
        return row[0] if row else None

    def open_one(self, now: int, user: str, host: str, agent: str, txn_type: int) -> int:
        return self._one(OPEN_ONE, {"now": now, "user": user, "host": host, "agent": agent, "type": txn_type})

    def open_with_write_id(self, now: int, user: str, host: str, agent: str, txn_type: int, db: str,
                           tbl: str) -> tuple[int, int] | None:
        """None if the table has no write-id sequence (unknown table); no txn is opened then."""
        try:
            with self.cursor() as cur:
                cur.execute(OPEN_WITH_WRITE_ID, {**_STATES, "now": now, "user": user, "host": host, "agent": agent,
                                                 "type": txn_type, "db": db, "tbl": tbl,
                                                 "seq": write_id_sequence(db, tbl)}, prepare=True)
                txn, wid = cur.fetchone()
        except UndefinedTable:
            return None
        return txn, wid

    def allocate(self, txn: int, db: str, tbl: str, oldest: int) -> int | None:
        try:
            return self._one(ALLOCATE, {"txn": txn, "db": db, "tbl": tbl, "oldest": oldest,
                                        "seq": write_id_sequence(db, tbl)})
        except UndefinedTable:
            return None

    def commit_plain(self, txn: int, now: int, oldest: int) -> bool:
        return self._one(COMMIT_PLAIN, {"txn": txn, "now": now, "oldest": oldest}) == 1

    def dispose(self) -> None:
        self.engine.dispose()
