"""Keep a transaction (and its locks) alive while a job runs: from a background thread
(:class:`Heartbeater`), or from a process of its own (:func:`spawn_heartbeat_process`) when the
txn is begun in one process and ended in another, as a Spark data source writer's is."""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from .errors import HeartbeatLost, InvalidInputError, TxnError
from .metastore import Metastore, NoSuchObjectError, TxnAbortedError
from .metastore.db import METASTORE_ENV

__all__ = ["HeartbeatLost", "HeartbeatProcess", "Heartbeater", "heartbeat_until_ended", "spawn_heartbeat_process",
           "stop_heartbeat_process"]

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
        self.interval = interval if interval is not None else default_interval(metastore)
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


def default_interval(metastore: Metastore) -> float:
    """A third of ``hive.txn.timeout``: two beats may fail before the txn times out."""
    return max(0.5, metastore.config.txn_timeout / 3)


@dataclass(frozen=True)
class HeartbeatProcess:
    """A heartbeat process: its pid, and the file whose removal (:func:`stop_heartbeat_process`,
    in any process) ends it."""

    pid: int
    while_file: str


def spawn_heartbeat_process(metastore: Metastore, txn_id: int, interval: float | None = None,
                            watch_pid: int | None = None) -> HeartbeatProcess:
    """Heartbeat ``txn_id`` from a new process (``python -m airflow_hive_acid.heartbeat``) until
    the txn ends, ``watch_pid`` (default: this process's parent) exits, or its ``while_file`` is
    removed (:func:`stop_heartbeat_process`, by whoever ends the txn, in any process).

    For a txn begun and ended by different short-lived processes: Spark runs a data source's
    ``writer()`` and its ``commit()`` in two Python workers, and kills the first once it has
    been idle a minute, so a thread there would stop beating long before the tasks end. The
    parent of a Spark Python worker lives as long as the driver, so a driver that dies stops the
    heartbeat and the txn times out. The metastore URL goes in the environment, not on the
    command line, as it may hold a password."""
    interval = interval if interval is not None else default_interval(metastore)
    if not interval > 0:
        raise InvalidInputError(f"heartbeat interval must be positive, got {interval}")
    watch = watch_pid if watch_pid is not None else os.getppid()
    fd, while_file = tempfile.mkstemp(prefix=f"hive-acid-heartbeat-txn{txn_id}-")
    os.close(fd)
    proc = subprocess.Popen(
        [sys.executable, "-m", "airflow_hive_acid.heartbeat", "--txn", str(txn_id), "--interval", str(interval),
         "--watch-pid", str(watch), "--while-file", while_file],
        env={**os.environ, METASTORE_ENV: metastore.url}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        start_new_session=True)
    log.info("transaction %s heartbeats from process %s while process %s lives", txn_id, proc.pid, watch)
    return HeartbeatProcess(proc.pid, while_file)


def stop_heartbeat_process(while_file: str) -> None:
    """End a heartbeat process (within half a second) by removing its file."""
    try:
        os.remove(while_file)
    except FileNotFoundError:
        pass


def heartbeat_until_ended(metastore: Metastore, txn_id: int, interval: float, watch_pid: int,
                          while_file: str | None = None) -> str:
    """Heartbeat now and every ``interval`` seconds until the txn is no longer open,
    ``watch_pid`` is gone or ``while_file`` is removed; returns why it stopped. Other errors
    are logged and retried."""
    next_beat = 0.0
    while True:
        if not _alive(watch_pid):
            return f"process {watch_pid} exited"
        if while_file is not None and not os.path.exists(while_file):
            return "stopped by the txn's owner"
        if time.monotonic() >= next_beat:
            next_beat = time.monotonic() + interval
            try:
                metastore.txns.heartbeat(txn_id)
            except (TxnError, NoSuchObjectError) as exc:     # committed, aborted, timed out, unknown
                return f"transaction {txn_id} ended: {exc}"
            except Exception as exc:  # noqa: BLE001 - transient: keep trying until the timeout
                log.warning("heartbeat of transaction %s failed, will retry: %s", txn_id, exc)
        time.sleep(min(interval, 0.5))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_hive_acid.heartbeat",
                                     description="heartbeat a txn until it ends or a process exits")
    parser.add_argument("--txn", type=int, required=True)
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--watch-pid", type=int, required=True)
    parser.add_argument("--while-file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s hive-acid heartbeat %(message)s")
    with Metastore(os.environ.get(METASTORE_ENV)) as ms:
        log.info("stopped: %s", heartbeat_until_ended(ms, args.txn, args.interval, args.watch_pid,
                                                          args.while_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
