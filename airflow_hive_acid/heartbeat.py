"""Keep a transaction (and its locks) alive from a background thread while a job runs."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from .errors import HeartbeatLost, InvalidInputError
from .metastore import Metastore, NoSuchObjectError, TxnAbortedError

__all__ = ["HeartbeatLost", "Heartbeater"]

log = logging.getLogger(__name__)


class Heartbeater:
    """``with Heartbeater(ms, txn_id): run_job()`` — heartbeats every ``interval`` seconds
    (default ``txn_timeout / 3``). A refused heartbeat stops the thread, calls ``on_lost`` (e.g.
    kill the Spark job) and makes ``check()`` / leaving the block raise ``HeartbeatLost``.
    A failed call for another reason (database briefly away) is logged and retried next time."""

    def __init__(self, metastore: Metastore, txn_id: int, interval: float | None = None,
                 on_lost: Callable[[str], None] | None = None):
        self.metastore = metastore
        self.txn_id = txn_id
        self.interval = interval if interval is not None else max(0.5, metastore.config.txn_timeout / 3)
        if self.interval <= 0:
            raise InvalidInputError(f"heartbeat interval must be positive, got {self.interval}")
        self.on_lost = on_lost
        self.lost: str | None = None
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hive-acid-heartbeat-{txn_id}", daemon=True)

    def __enter__(self) -> Heartbeater:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if exc_type is None:
            self.check()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=max(5.0, self.interval))

    def check(self) -> None:
        if self.lost:
            raise HeartbeatLost(self.lost, self.txn_id)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.metastore.txns.heartbeat(self.txn_id)
                self.beats += 1
            except (TxnAbortedError, NoSuchObjectError) as exc:
                self.lost = f"heartbeat of transaction {self.txn_id} refused: {exc}"
                log.error(self.lost)
                if self.on_lost is not None:
                    try:
                        self.on_lost(self.lost)
                    except Exception:  # noqa: BLE001 - the job is being torn down anyway
                        log.exception("on_lost callback failed")
                return
            except Exception as exc:  # noqa: BLE001 - transient: keep trying until the timeout
                log.warning("heartbeat of transaction %s failed, will retry: %s", self.txn_id, exc)
