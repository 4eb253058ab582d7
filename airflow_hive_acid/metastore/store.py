"""``Metastore``: the one object callers hold — catalog, transactions, locks, compactions."""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import insert, select, text

from .catalog import Catalog, normalize_location
from .compaction import CompactionQueue
from .config import MetastoreConfig, default_warehouse, load_config, save_config
from .db import Store, now_ms
from .errors import InvalidInputError, NotInitializedError
from .initiator import Initiator
from .locks import LockManager
from .metrics import AcidMetrics, collect_metrics
from .schema import SCHEMA_VERSION, metadata, next_compaction_queue_id, next_lock_id, next_txn_id
from .schema import config as config_t
from .txn import TxnManager


@dataclass(frozen=True)
class HousekeepingReport:
    timed_out: list[int]
    purged_write_id_rows: int
    purged_aborted_txns: int
    purged_committed_txns: int
    purged_compaction_history: int
    requeued_compactions: list[int]
    failed_compactions: list[int] = field(default_factory=list)   # compactor txn aborted after compacting
    purged_stream_batches: int = 0

    def to_dict(self) -> dict:
        return self.__dict__.copy()


# the PostgreSQL advisory lock that serialises Metastore.initialize (any constant; "hiveacid" in ASCII)
SCHEMA_LOCK_KEY = 0x6869766561636964


@contextlib.contextmanager
def _one_at_a_time(store: Store) -> Iterator[None]:
    """Processes initializing one metastore take turns: a session advisory lock on PostgreSQL,
    held on a connection of its own; SQLite already serialises writers (``BEGIN IMMEDIATE``)."""
    if store.is_sqlite:
        yield
        return
    with store.engine.connect() as guard:
        guard.execute(text("SELECT pg_advisory_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
        guard.commit()
        try:
            yield
        finally:
            guard.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK_KEY})
            guard.commit()


class Metastore:
    """Catalog, transaction manager, lock manager and compaction queue over one database.

    ``Metastore(url)`` connects to an initialized metastore; ``Metastore.initialize(url, ...)``
    creates the schema first. URL: ``sqlite:///path`` (default: ``$HIVE_ACID_METASTORE`` or
    ``~/.hive-acid/metastore.db``) or ``postgresql://host/db``.
    """

    def __init__(self, url: str | None = None, *, clock: Callable[[], int] = now_ms,
                 config: MetastoreConfig | None = None):
        self.store = Store(url, clock=clock)
        self.config = config or load_config(self.store)
        self.catalog = Catalog(self.store, self.config.warehouse)
        self.txns = TxnManager(self.store, self.config, self.catalog)
        self.locks = LockManager(self.store, self.config, self.catalog, self.txns)
        self.compactions = CompactionQueue(self.store, self.config, self.catalog)
        self.initiator = Initiator(self.store, self.config, self.catalog, self.compactions)

    @property
    def url(self) -> str:
        return self.store.url

    @classmethod
    def initialize(cls, url: str | None = None, *, warehouse: str | None = None,
                   settings: dict[str, str] | None = None, clock: Callable[[], int] = now_ms) -> Metastore:
        """Create the schema if missing (idempotent) and store settings; returns a connected Metastore.

        Safe when several processes do it at once (the first tasks of two DAGs on a fresh
        metastore): on PostgreSQL they take turns behind an advisory lock, on SQLite the schema is
        created in one ``BEGIN IMMEDIATE`` write transaction; those that come later find it there."""
        store = Store(url, clock=clock)
        with _one_at_a_time(store):
            with store.write() as conn:
                metadata.create_all(conn)
                for table, col in ((next_txn_id, "ntxn_next"), (next_lock_id, "nl_next"),
                                   (next_compaction_queue_id, "ncq_next")):
                    if conn.execute(select(table.c.id)).first() is None:
                        conn.execute(insert(table).values(id=1, **{col: 1}))
                if conn.execute(select(config_t.c.key).where(config_t.c.key == "schema.version")).first() is None:
                    conn.execute(insert(config_t).values(key="schema.version", value=str(SCHEMA_VERSION)))
            cfg = load_config(store)
            if warehouse:
                cfg.warehouse = normalize_location(warehouse)
            elif not cfg.warehouse:
                cfg.warehouse = default_warehouse(store) if store.is_sqlite else ""
            for key, value in (settings or {}).items():
                cfg.set(key, value)
            if not cfg.warehouse:
                raise InvalidInputError("a PostgreSQL metastore needs a warehouse location: pass --warehouse")
            save_config(store, cfg)
        store.dispose()
        return cls(url, clock=clock)

    def set_setting(self, key: str, value: str) -> None:
        self.config.set(key, value)
        save_config(self.store, self.config)

    def housekeep(self, *, committed_txn_retention_s: float = 7 * 86400) -> HousekeepingReport:
        """What Hive's AcidHouseKeeperService does: abort timed-out txns, drop bookkeeping no
        snapshot needs, requeue compactions whose worker stopped, trim compaction history (and
        streaming batch records no replay can need)."""
        timed_out = self.txns.abort_timed_out()
        purged_rows = self.txns.purge_committed_metadata()
        purged_aborted = self.txns.purge_empty_aborted()
        purged_committed = self.txns.purge_committed_txns(
            self.store.clock() - int(committed_txn_retention_s * 1000))
        requeued = []
        stale = self.store.clock() - int(self.config.compactor_worker_timeout * 1000)
        for c in self.compactions.working_since(stale):
            self.compactions.requeue(c.id, f"worker {c.worker_id} did not finish within "
                                           f"{self.config.compactor_worker_timeout:g}s; requeued")
            requeued.append(c.id)
        # a worker whose compactor txn timed out (it died) gives its request back at once
        failed: list[int] = []
        for cid, action in self.compactions.recover_abandoned(self.txns.timeout_ms):
            (requeued if action == "requeued" else failed).append(cid)
        purged_hist = self.compactions.purge_history()
        purged_batches = self.txns.purge_stream_batches(self.store.clock() - int(committed_txn_retention_s * 1000))
        return HousekeepingReport(timed_out, purged_rows, purged_aborted, purged_committed, purged_hist, requeued,
                                  failed, purged_batches)

    def metrics(self) -> AcidMetrics:
        """Hive's ACID metrics, from the records (:mod:`~airflow_hive_acid.metastore.metrics`)."""
        return collect_metrics(self)

    def close(self) -> None:
        self.store.dispose()

    def __enter__(self) -> Metastore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Metastore", "HousekeepingReport", "NotInitializedError"]
