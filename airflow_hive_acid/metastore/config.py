"""Metastore-wide settings, stored in the database so every client (CLI, Airflow workers, the
housekeeper) applies the same timeout and limits. Names follow Hive's configuration keys."""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from sqlalchemy import select

from .db import Store, default_home
from .errors import InvalidInputError, NotInitializedError
from .schema import config as config_t


@dataclass
class MetastoreConfig:
    warehouse: str = ""
    txn_timeout: float = 300.0            # hive.txn.timeout (seconds)
    max_open_txns: int = 100_000          # metastore.max.open.txns
    lock_wait_timeout: float = 120.0      # how long lock() waits before LOCK_ACQUIRE_TIMEDOUT
    housekeeper_interval: float = 60.0    # metastore.acid.housekeeper.interval (seconds)
    compactor_worker_timeout: float = 86400.0  # hive.compactor.worker.timeout (seconds)
    delta_num_threshold: int = 10          # hive.compactor.delta.num.threshold
    delta_pct_threshold: float = 0.1       # hive.compactor.delta.pct.threshold
    aborted_txn_threshold: int = 1000      # hive.compactor.abortedtxn.threshold
    aborted_txn_time_threshold: float = 43200.0  # hive.compactor.aborted.txn.time.threshold (s)
    failed_compacts_threshold: int = 2     # metastore.compactor.initiator.failed.compacts.threshold
    failed_retry_time: float = 7 * 86400.0  # hive.compactor.initiator.failed.retry.time (s)
    # when the ACID metrics warn (metastore/metrics.py)
    deltametrics_delta_num_threshold: int = 100        # metastore.deltametrics.delta.num.threshold
    deltametrics_obsolete_delta_num_threshold: int = 100  # metastore.deltametrics.obsolete.delta.num.threshold
    deltametrics_delta_pct_threshold: float = 0.01     # metastore.deltametrics.delta.pct.threshold
    oldest_initiated_warning: float = 3600.0  # metastore.compactor.oldest.initiated.compaction.time.threshold.warning
    oldest_aborted_warning: float = 86400.0   # metastore.compactor.oldest.uncleaned.aborted.txn.time.threshold.warning
    long_running_initiator_warning: float = 21600.0  # metastore.compactor.long.running.initiator.threshold.warning

    KEYS = {
        "warehouse": "hive.metastore.warehouse.dir",
        "txn_timeout": "hive.txn.timeout",
        "max_open_txns": "metastore.max.open.txns",
        "lock_wait_timeout": "hive.lock.wait.timeout",
        "housekeeper_interval": "metastore.acid.housekeeper.interval",
        "compactor_worker_timeout": "hive.compactor.worker.timeout",
        "delta_num_threshold": "hive.compactor.delta.num.threshold",
        "delta_pct_threshold": "hive.compactor.delta.pct.threshold",
        "aborted_txn_threshold": "hive.compactor.abortedtxn.threshold",
        "aborted_txn_time_threshold": "hive.compactor.aborted.txn.time.threshold",
        "failed_compacts_threshold": "metastore.compactor.initiator.failed.compacts.threshold",
        "failed_retry_time": "hive.compactor.initiator.failed.retry.time",
        "deltametrics_delta_num_threshold": "metastore.deltametrics.delta.num.threshold",
        "deltametrics_obsolete_delta_num_threshold": "metastore.deltametrics.obsolete.delta.num.threshold",
        "deltametrics_delta_pct_threshold": "metastore.deltametrics.delta.pct.threshold",
        "oldest_initiated_warning": "metastore.compactor.oldest.initiated.compaction.time.threshold.warning",
        "oldest_aborted_warning": "metastore.compactor.oldest.uncleaned.aborted.txn.time.threshold.warning",
        "long_running_initiator_warning": "metastore.compactor.long.running.initiator.threshold.warning",
    }

    @classmethod
    def key_names(cls) -> dict[str, str]:
        """Hive-style key -> attribute."""
        return {v: k for k, v in cls.KEYS.items()}

    def set(self, key: str, value: str) -> None:
        attr = self.key_names().get(key, key if key in self.KEYS else None)
        if attr is None:
            raise InvalidInputError(f"unknown setting {key!r}; known: {sorted(self.KEYS.values())}")
        typ = {f.name: f.type for f in fields(self)}[attr]
        if typ in ("str", str):
            setattr(self, attr, value)
            return
        try:
            number = int(value) if typ in ("int", int) else float(value)
        except ValueError:
            raise InvalidInputError(f"setting {key!r} needs a number, got {value!r}") from None
        if not number > 0:      # also refuses nan
            raise InvalidInputError(f"setting {key!r} must be positive, got {value!r}")
        setattr(self, attr, number)

    def items(self) -> dict[str, str]:
        return {self.KEYS[f.name]: str(getattr(self, f.name)) for f in fields(self)}


def default_warehouse(store: Store) -> str:
    """For an SQLite metastore: a ``warehouse`` folder beside the database file."""
    db_file = store.engine.url.database
    return str(Path(db_file).resolve().parent / "warehouse") if db_file else str(default_home() / "warehouse")


def load_config(store: Store) -> MetastoreConfig:
    if not store.has_schema():
        raise NotInitializedError(f"metastore {store.engine.url!r} is not initialized: run 'hive-acid init'")
    cfg = MetastoreConfig()
    with store.read() as conn:
        for key, value in conn.execute(select(config_t.c.key, config_t.c.value)):
            if key in cfg.key_names():
                cfg.set(key, value)
    return cfg


def save_config(store: Store, cfg: MetastoreConfig) -> None:
    with store.write() as conn:
        for key, value in cfg.items().items():
            if key == "schema.version":
                continue
            updated = conn.execute(config_t.update().where(config_t.c.key == key).values(value=value)).rowcount
            if not updated:
                conn.execute(config_t.insert().values(key=key, value=value))
