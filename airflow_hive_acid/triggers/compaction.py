"""``CompactionTrigger``: waits, asynchronously, for a compaction to reach a target state; the
deferrable form of :class:`~airflow_hive_acid.sensors.compaction.CompactionSensor`."""
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


class CompactionTrigger(BaseTrigger):
    """Polls the metastore every ``poll_interval`` seconds (each look in a thread, so the event
    loop never blocks) and fires once: status ``success``, ``failed`` or ``timeout``.

    It carries its own deadline (``timeout`` seconds from ``started_at``), because a trigger run
    by ``airflow dags test`` does not get the sensor's timeout.
    """

    def __init__(self, *, hive_acid_conn_id: str, compaction_id: int | None = None, table: str | None = None,
                 partition: str | None = None, target_states: Sequence[str] = DEFAULT_TARGET,
                 failure_states: Sequence[str] = FAILURE_STATES, poll_interval: float = 10.0,
                 timeout: float | None = None, started_at: float | None = None, after_id: int = 0) -> None:
        super().__init__()
        if compaction_id is None and not table:
            raise InvalidInputError("CompactionTrigger needs compaction_id or table")
        if poll_interval <= 0:
            raise InvalidInputError(f"poll_interval must be positive, got {poll_interval}")
        self.hive_acid_conn_id = hive_acid_conn_id
        self.compaction_id = compaction_id
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
            "timeout": self.timeout, "started_at": self.started_at, "after_id": self.after_id})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from ..hooks.metastore import AcidMetastoreHook
        url = await AcidMetastoreHook(hive_acid_conn_id=self.hive_acid_conn_id).aget_metastore_url()
        ms = await asyncio.to_thread(Metastore, url)
        try:
            while True:
                status = await asyncio.to_thread(
                    compaction_status, ms, compaction_id=self.compaction_id, table=self.table,
                    partition=self.partition, target_states=self.target_states,
                    failure_states=self.failure_states, after_id=self.after_id)
                if status["status"] != "waiting":
                    yield TriggerEvent(status)
                    return
                if self.timeout is not None and time.time() - self.started_at >= self.timeout:
                    yield TriggerEvent({"status": "timeout", "compaction": status["compaction"],
                                        "message": f"timed out after {self.timeout:g}s: {status['message']}"})
                    return
                self.log.info("%s; next look in %.0fs", status["message"], self.poll_interval)
                await asyncio.sleep(self.poll_interval)
        finally:
            await asyncio.to_thread(ms.close)
