"""Connection handling: one engine per metastore URL, short write transactions, consistent reads.

SQLite (the embedded default) runs in WAL mode; every write transaction starts with
``BEGIN IMMEDIATE`` so writers from many processes queue on SQLite's lock instead of failing
half-way. PostgreSQL runs READ COMMITTED and the code takes row locks (``FOR UPDATE``) on the
counter and table rows it must serialise on; reads that need one consistent view use
REPEATABLE READ.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Connection, Engine, make_url

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .pgfast import FastPath

DEFAULT_HOME_ENV = "HIVE_ACID_HOME"
METASTORE_ENV = "HIVE_ACID_METASTORE"


def default_home() -> Path:
    return Path(os.environ.get(DEFAULT_HOME_ENV) or Path.home() / ".hive-acid")


def default_url() -> str:
    """``$HIVE_ACID_METASTORE``, else an SQLite file under ``$HIVE_ACID_HOME`` (``~/.hive-acid``)."""
    env = os.environ.get(METASTORE_ENV)
    if env:
        return env
    return f"sqlite:///{default_home() / 'metastore.db'}"


def normalize_url(url: str) -> str:
    """Accept a bare file path for SQLite and pick the psycopg 3 driver for PostgreSQL."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif not (parsed.drivername.startswith("postgresql") or parsed.drivername.startswith("sqlite")):
        raise InvalidInputError(f"unsupported metastore URL {url!r}: use sqlite:///PATH or postgresql://...")
    return parsed.render_as_string(hide_password=False)


def require_psycopg(url: str) -> None:
    """PostgreSQL needs psycopg 3, which only the ``postgres`` extra installs; say so by name
    rather than fail on a bare ``No module named 'psycopg'``."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        shown = make_url(url).render_as_string(hide_password=True)
        raise InvalidInputError(f"metastore {shown} is PostgreSQL, whose driver psycopg is not installed: "
                                "pip install 'airflow-hive-acid[postgres]'") from None


def now_ms() -> int:
    return int(time.time() * 1000)


def _switch_to_wal(cur: Any, wait: float = 60.0) -> None:
    """``PRAGMA journal_mode = WAL``, retried while the file is locked. On a new file the switch
    writes the header; two processes switching at once deadlock (one holds SHARED and wants
    RESERVED while the other holds PENDING), and SQLite answers "database is locked" at once
    without calling the busy handler, so the retry is ours."""
    deadline = time.monotonic() + wait
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class Store:
    """An engine plus the transaction helpers every metastore component uses."""

    def __init__(self, url: str | None = None, *, clock: Callable[[], int] = now_ms):
        self.url = normalize_url(url or default_url())
        self.clock = clock
        parsed = make_url(self.url)
        self.is_sqlite = parsed.drivername.startswith("sqlite")
        if self.is_sqlite:
            self.engine = self._sqlite_engine(parsed.database)
            self._consistent_engine: Engine | None = self.engine
        else:
            require_psycopg(self.url)
            # No pre-ping: it would add a round trip to every call. Connections are recycled
            # instead, and callers that loop (heartbeats) tolerate one failed call.
            self.engine = create_engine(self.url, pool_size=4, max_overflow=8, pool_recycle=600)
            self._consistent_engine = None
        self.fast: FastPath | None = None
        if not self.is_sqlite:
            from .pgfast import FastPath  # imports psycopg: only installed with the postgres extra
            self.fast = FastPath(self.url)
        self.dialect = self.engine.dialect.name

    # -- engines ------------------------------------------------------------------------------
    @staticmethod
    def _sqlite_engine(path: str | None) -> Engine:
        if not path or path == ":memory:":
            raise InvalidInputError("the SQLite metastore must be a file (many processes share it)")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 60, "isolation_level": None})

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA busy_timeout = 60000")
            _switch_to_wal(cur)
            cur.execute("PRAGMA synchronous = NORMAL")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("hive_acid_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine

    # -- transactions -------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A short read-write transaction (``BEGIN IMMEDIATE`` on SQLite)."""
        with self.engine.connect() as conn:
            if self.is_sqlite:
                conn = conn.execution_options(hive_acid_write=True)
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self, consistent: bool = False) -> Iterator[Connection]:
        """A read-only transaction. Each statement sees a consistent state; with ``consistent``
        all its statements see the same one (REPEATABLE READ on PostgreSQL, a WAL snapshot on
        SQLite) — what a snapshot made of several queries needs."""
        engine = self.engine
        if consistent and not self.is_sqlite:
            if self._consistent_engine is None:
                self._consistent_engine = create_engine(self.url, pool_size=2, max_overflow=8, pool_recycle=600,
                                                        isolation_level="REPEATABLE READ")
            engine = self._consistent_engine
        with engine.connect() as conn:
            with conn.begin():
                yield conn

    def for_update(self, stmt: Any, *, shared: bool = False, skip_locked: bool = False) -> Any:
        """Add ``FOR UPDATE`` / ``FOR SHARE`` on PostgreSQL; SQLite writers are already serialised."""
        if self.is_sqlite:
            return stmt
        return stmt.with_for_update(read=shared, skip_locked=skip_locked)

    def insert_ignore(self, table: Any) -> Any:
        """``INSERT ... ON CONFLICT DO NOTHING``: concurrent writers adding the same row both succeed."""
        if self.is_sqlite:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert
            return sqlite_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert
        return postgresql_insert(table).on_conflict_do_nothing()

    def has_schema(self) -> bool:
        return inspect(self.engine).has_table("ha_config")

    def dispose(self) -> None:
        self.engine.dispose()
        if self._consistent_engine is not None and self._consistent_engine is not self.engine:
            self._consistent_engine.dispose()
        if self.fast is not None:
            self.fast.dispose()
