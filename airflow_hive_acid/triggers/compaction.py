"""``CompactionTrigger``: waits, asynchronously, for a compaction (or a list of them) to reach a
target state; the deferrable form of :class:`~airflow_hive_acid.sensors.compaction.CompactionSensor`."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..errors import InvalidInputError
from ..metastore import CompactionInfo, CompactionState, Metastore

DEFAULT_TARGET = ("succeeded",)
FAILURE_STATES = ("failed", "did not initiate", "refused")


def normalize_states(states: Sequence[str] | str) -> tuple[str, ...]:
    """State names as SHOW COMPACTIONS prints them (``ready for cleaning``, ``succeeded``, ...)."""
    if isinstance(states, str):
        states = [states]
    out = tuple(CompactionState.parse(s).label for s in states)
    if not out:
        raise InvalidInputError("at least one target state is needed")
    return out


def compaction_status(ms: Metastore, *, compaction_id: int | None, table: str | None, partition: str | None,
                      target_states: Sequence[str], failure_states: Sequence[str] = FAILURE_STATES,
                      after_id: int = 0) -> dict[str, Any]:
    """One look at the compaction: ``{"status": "success" | "failed" | "waiting", "compaction":
    {...} | None, "message": ...}``. By table, the newest request with id > ``after_id`` counts."""
    info: CompactionInfo | None
    if compaction_id is not None:
        info = ms.compactions.get(int(compaction_id))
    else:
        if not table:
            raise InvalidInputError("give a compaction id, or a table (and partition) whose latest compaction to watch")
        info = ms.compactions.latest(table, partition)
        if info is not None and info.id <= after_id:
            info = None
    if info is None:
        return {"status": "waiting", "compaction": None, "message": f"no compaction of {table} yet"}
    state = info.state.label
    d = info.to_dict()
    if state in target_states:
        return {"status": "success", "compaction": d, "message": f"compaction {info.id} is {state}"}
    if state in failure_states:
        why = info.error_message or info.meta_info or ""
        return {"status": "failed", "compaction": d,
                "message": f"compaction {info.id} of {info.db}.{info.table} is {state}" + (f": {why}" if why else "")}
    return {"status": "waiting", "compaction": d, "message": f"compaction {info.id} is {state}"}


def compactions_status(ms: Metastore, compaction_ids: Sequence[int], *, target_states: Sequence[str],
                       failure_states: Sequence[str] = FAILURE_STATES) -> dict[str, Any]:
    """One look at several compactions: ``failed`` as soon as one has failed, ``success`` once all
    are in a target state (at once for none: nothing to wait for), else ``waiting``. The event
    carries ``compactions``, each as SHOW COMPACTIONS describes it, in the order given."""
    looks = [compaction_status(ms, compaction_id=i, table=None, partition=None, target_states=target_states,
                               failure_states=failure_states) for i in compaction_ids]
    compactions = [look["compaction"] for look in looks]
    failed = [look["message"] for look in looks if look["status"] == "failed"]
    if failed:
        return {"status": "failed", "compactions": compactions, "message": "; ".join(failed)}
    waiting = [look["message"] for look in looks if look["status"] == "waiting"]
    if waiting:
        return {"status": "waiting", "compactions": compactions,
                "message": f"{len(waiting)} of {len(looks)} compactions not done: " + "; ".join(waiting)}
    if not looks:
        return {"status": "success", "compactions": [], "message": "no compactions to wait for"}
    return {"status": "success", "compactions": compactions,
            "message": f"compactions {', '.join(str(i) for i in compaction_ids)} are "
                       + ", ".join(sorted({c["state"] for c in compactions}))}


class CompactionTrigger(BaseTrigger):
    """Polls the metastore every ``poll_interval`` seconds (each look in a thread, so the event
    loop never blocks) and fires once: status ``success``, ``failed`` or ``timeout``. It watches
    ``compaction_id``, every one of ``compaction_ids`` (the event then carries ``compactions``), or
    the latest request of ``table`` (+ ``partition``).

    It carries its own deadline (``timeout`` seconds from ``started_at``), because a trigger run
    by ``airflow dags test`` does not get the sensor's timeout.
    """

    def __init__(self, *, hive_acid_conn_id: str, compaction_id: int | None = None, table: str | None = None,
                 partition: str | None = None, target_states: Sequence[str] = DEFAULT_TARGET,
                 failure_states: Sequence[str] = FAILURE_STATES, poll_interval: float = 10.0,
                 timeout: float | None = None, started_at: float | None = None, after_id: int = 0,
                 compaction_ids: Sequence[int] | None = None) -> None:
        super().__init__()
        if compaction_ids is not None and (compaction_id is not None or table):
            raise InvalidInputError("CompactionTrigger takes compaction_ids alone, not with compaction_id or table")
        if compaction_id is None and compaction_ids is None and not table:
            raise InvalidInputError("CompactionTrigger needs compaction_id, compaction_ids or table")
        if poll_interval <= 0:
            raise InvalidInputError(f"poll_interval must be positive, got {poll_interval}")
        self.hive_acid_conn_id = hive_acid_conn_id
        self.compaction_id = compaction_id
        self.compaction_ids = None if compaction_ids is None else [int(i) for i in compaction_ids]
        self.table = table
        self.partition = partition
        self.target_states = normalize_states(target_states)
        self.failure_states = normalize_states(failure_states)
        self.poll_interval = float(poll_interval)
        self.timeout = timeout
        self.started_at = started_at if started_at is not None else time.time()
        self.after_id = after_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("airflow_hive_acid.triggers.compaction.CompactionTrigger", {
            "hive_acid_conn_id": self.hive_acid_conn_id, "compaction_id": self.compaction_id, "table": self.table,
            "partition": self.partition, "target_states": list(self.target_states),
            "failure_states": list(self.failure_states), "poll_interval": self.poll_interval,
            "timeout": self.timeout, "started_at": self.started_at, "after_id": self.after_id,
            "compaction_ids": self.compaction_ids})

    def _look(self, ms: Metastore) -> dict[str, Any]:
        if self.compaction_ids is not None:
            return compactions_status(ms, self.compaction_ids, target_states=self.target_states,
                                      failure_states=self.failure_states)
        return compaction_status(ms, compaction_id=self.compaction_id, table=self.table, partition=self.partition,
                                 target_states=self.target_states, failure_states=self.failure_states,
                                 after_id=self.after_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.metastore import AcidMetastoreHook
        url = await AcidMetastoreHook(hive_acid_conn_id=self.hive_acid_conn_id).aget_metastore_url()
        ms = await asyncio.to_thread(Metastore, url)
        try:
            while True:
                status = await asyncio.to_thread(self._look, ms)
                if status["status"] != "waiting":
                    yield TriggerEvent(status)
                    return
                if self.timeout is not None and time.time() - self.started_at >= self.timeout:
                    yield TriggerEvent({**status, "status": "timeout",
                                        "message": f"timed out after {self.timeout:g}s: {status['message']}"})
                    return
                self.log.info("%s; next look in %.0fs", status["message"], self.poll_interval)
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(ms.close)
