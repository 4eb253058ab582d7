"""``CompactionSensor``: waits until a compaction (by id, every one of a list, or the latest of a
table/partition) reaches a target state — by default ``succeeded``, i.e. compacted and cleaned —
and fails at once when one ends ``failed`` (or ``did not initiate`` / ``refused``)."""
from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseSensorOperator, Context, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout

from ..errors import InvalidInputError
from ..hooks.metastore import AcidMetastoreHook
from ..operators.base import positive_id
from ..triggers.compaction import (
    DEFAULT_TARGET,
    FAILURE_STATES,
    CompactionTrigger,
    compaction_status,
    compactions_status,
    normalize_states,
)


def parse_compaction_id(value: Any, what: str = "compaction_id") -> int:
    """A compaction id from an int, a rendered template's string, or a dict that names one: a
    compaction as SHOW COMPACTIONS / ``AcidCompactOperator`` / the worker give it (``id``), or an
    initiator decision (``compaction_id``)."""
    if isinstance(value, dict):
        found = value.get("compaction_id", value.get("id"))
        if found is None:
            raise InvalidInputError(f"{what}: {value!r} names no compaction (no 'compaction_id' or 'id')")
        value = found
    return positive_id(value, what, "a compaction id")


def parse_compaction_ids(value: Any) -> list[int]:
    """The ids of ``compaction_ids``: a list (or tuple) of what :func:`parse_compaction_id` takes,
    or a rendered template's string of one (JSON, or a Python literal as Jinja prints an XCom).
    Order is kept, repeats dropped; an empty list is valid (nothing to wait for)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = json.loads(text)
        except ValueError:
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise InvalidInputError(f"compaction_ids must be a list of compaction ids, got {text!r}") from None
    if value is None:
        raise InvalidInputError("compaction_ids is None: the XCom it names is missing (did that task push one?)")
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"compaction_ids must be a list of compaction ids, got {value!r}")
    ids = [parse_compaction_id(v, f"compaction_ids[{n}]") for n, v in enumerate(value)]
    return list(dict.fromkeys(ids))


class CompactionSensor(BaseSensorOperator):
    """Wait for a compaction.

    ``compaction_id``: an id, or the XCom of ``AcidCompactOperator`` (a dict with ``id``); or
    ``compaction_ids``: a list of them (templated, e.g. the ids an initiator queued, pulled from
    XCom), all of which must reach a target state; an empty list succeeds at once, without
    deferring, so a maintenance run with nothing to compact ends green; or ``table``
    (+ ``partition``) to watch that table's latest request. ``deferrable=True`` hands the wait to
    :class:`CompactionTrigger` (no worker slot held); ``mode="reschedule"`` works too. Pushes the
    compaction as SHOW COMPACTIONS describes it (a list of them for ``compaction_ids``).
    """

    template_fields: Sequence[str] = ("compaction_id", "compaction_ids", "table", "partition")

    def __init__(self, *, compaction_id: int | str | dict | None = None,
                 compaction_ids: Sequence[int | str | dict] | str | None = None, table: str | None = None,
                 partition: str | None = None, target_states: Sequence[str] | str = DEFAULT_TARGET,
                 failure_states: Sequence[str] = FAILURE_STATES, deferrable: bool = False,
                 hive_acid_conn_id: str = AcidMetastoreHook.default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if compaction_ids is not None:
            if compaction_id is not None or table or partition:
                raise InvalidInputError("CompactionSensor takes compaction_ids alone, not with compaction_id, "
                                        "table or partition")
            if not isinstance(compaction_ids, str):
                parse_compaction_ids(compaction_ids)      # a literal list: check it now, not at run time
        elif compaction_id is None and not table:
            raise InvalidInputError("CompactionSensor needs compaction_id, compaction_ids or table")
        self.compaction_id = compaction_id
        self.compaction_ids = compaction_ids
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
        if self.compaction_id is None or self.compaction_id == "":
            return None
        return parse_compaction_id(self.compaction_id)

    def _ids(self) -> list[int] | None:
        return None if self.compaction_ids is None else parse_compaction_ids(self.compaction_ids)

    def _status(self) -> dict[str, Any]:
        ids = self._ids()
        if ids is not None:
            return compactions_status(self.hook.metastore, ids, target_states=self.target_states,
                                      failure_states=self.failure_states)
        return compaction_status(self.hook.metastore, compaction_id=self._id(), table=self.table,
                                 partition=self.partition or None, target_states=self.target_states,
                                 failure_states=self.failure_states)

    def poke(self, context: Context) -> PokeReturnValue:
        status = self._status()
        self.log.info(status["message"])
        if status["status"] == "failed":
            raise AirflowFailException(status["message"])
        return PokeReturnValue(status["status"] == "success", xcom_value=_pushed(status))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        status = self._status()
        if status["status"] == "success":
            self.log.info(status["message"])
            return _pushed(status)
        if status["status"] == "failed":
            raise AirflowFailException(status["message"])
        timeout = self.timeout.total_seconds() if isinstance(self.timeout, timedelta) else self.timeout
        poke = self.poke_interval.total_seconds() if isinstance(self.poke_interval, timedelta) else self.poke_interval
        self.defer(trigger=CompactionTrigger(
            hive_acid_conn_id=self.hive_acid_conn_id, compaction_id=self._id(), compaction_ids=self._ids(),
            table=self.table, partition=self.partition or None, target_states=self.target_states,
            failure_states=self.failure_states, poll_interval=float(poke), timeout=float(timeout) if timeout else None),
            method_name="execute_complete",
            timeout=timedelta(seconds=float(timeout)) if timeout else None)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        """Resumed from the trigger: everything needed is in the event (a resumed task is a new
        operator instance)."""
        if event.get("status") == "success":
            self.log.info(event.get("message"))
            return _pushed(event)
        if event.get("status") == "timeout":
            raise AirflowSensorTimeout(event.get("message"))
        raise AirflowFailException(event.get("message") or f"unexpected event {event!r}")


def _pushed(status: dict[str, Any]) -> Any:
    """What the sensor pushes: the compaction, or the list of them in ``compaction_ids`` mode."""
    return status["compactions"] if "compactions" in status else status.get("compaction")
