"""``CompactionSensor``: waits until a compaction (by id, or the latest of a table/partition)
reaches a target state — by default ``succeeded``, i.e. compacted and cleaned — and fails at once
when it ends ``failed`` (or ``did not initiate`` / ``refused``)."""
from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from ..errors import InvalidInputError
from ..hooks.metastore import AcidMetastoreHook
from ..operators.base import parse_txn_id
from ..triggers.compaction import (
    DEFAULT_TARGET,
    FAILURE_STATES,
    CompactionTrigger,
    compaction_status,
    normalize_states,
)


class CompactionSensor(BaseSensorOperator):
    """Wait for a compaction.

    ``compaction_id``: an id, or the XCom of ``AcidCompactOperator`` (a dict with ``id``); or
    ``table`` (+ ``partition``) to watch that table's latest request. ``deferrable=True`` hands the
    wait to :class:`CompactionTrigger` (no worker slot held); ``mode="reschedule"`` works too.
    Pushes the compaction as SHOW COMPACTIONS describes it.
    """

    template_fields: Sequence[str] = ("compaction_id", "table", "partition")

    def __init__(self, *, compaction_id: int | str | dict | None = None, table: str | None = None,
                 partition: str | None = None, target_states: Sequence[str] | str = DEFAULT_TARGET,
                 failure_states: Sequence[str] = FAILURE_STATES, deferrable: bool = False,
                 hive_acid_conn_id: str = AcidMetastoreHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if compaction_id is None and not table:
            raise InvalidInputError("CompactionSensor needs compaction_id or table")
        self.compaction_id = compaction_id
        self.table = table
        self.partition = partition
        self.target_states = normalize_states(target_states)
        self.failure_states = normalize_states(failure_states)
        self.deferrable = deferrable
        self.hive_acid_conn_id = hive_acid_conn_id

    @cached_property
    def hook(self) -> AcidMetastoreHook:
        return AcidMetastoreHook(hive_acid_conn_id=self.hive_acid_conn_id)

    def _id(self) -> int | None:
        return parse_txn_id(self.compaction_id, "compaction_id")

    def _status(self) -> dict[str, Any]:
        return compaction_status(self.hook.metastore, compaction_id=self._id(), table=self.table,
                                 partition=self.partition or None, target_states=self.target_states,
                                 failure_states=self.failure_states)

    def poke(self, context: Context) -> PokeReturnValue:
        status = self._status()
        self.log.info(status["message"])
        if status["status"] == "failed":
            raise AirflowFailException(status["message"])
        return PokeReturnValue(status["status"] == "success", xcom_value=status["compaction"])

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        status = self._status()
        if status["status"] == "success":
            return status["compaction"]
        if status["status"] == "failed":
            raise AirflowFailException(status["message"])
        timeout = self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else self.timeout
        poke = self.poke_interval.total_seconds() if isinstance(self.poke_interval, timedelta) else self.poke_interval
        self.defer(trigger=CompactionTrigger(
            hive_acid_conn_id=self.hive_acid_conn_id, compaction_id=self._id(), table=self.table,
            partition=self.partition or None, target_states=self.target_states, failure_states=self.failure_states,
            poll_interval=float(poke), timeout=float(timeout) if timeout else None),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(timeout)) if timeout else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed from the trigger: everything needed is in the event (a resumed task is a new
        operator instance)."""
        if event.get("status") == "success":
            self.log.info(event.get("message"))
            return event.get("compaction")
        if event.get("status") == "timeout":
            raise AirflowSensorTimeout(event.get("message"))
        raise AirflowFailException(event.get("message") or f"unexpected event {event!r}")
