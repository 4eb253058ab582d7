"""``AcidMetastoreHook``: the Hive ACID metastore named by an Airflow connection, plus a heartbeat
context manager that keeps a transaction (and its locks) alive while a task works."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from ..errors import InvalidInputError
from ..heartbeat import Heartbeater
from ..metastore import Metastore
from ..metastore.db import default_url


class AcidMetastoreHook(BaseHook):
    """Connects to the metastore given by a ``hive_acid`` connection.

    Connection extras: ``metastore_url`` (``sqlite:///path`` or ``postgresql://host/db``),
    ``warehouse`` (root folder of new tables), ``txn_timeout`` (seconds, stored in the metastore
    by :meth:`initialize`), ``heartbeat_interval`` (seconds; default ``txn_timeout / 3``).
    Without the connection the embedded default applies: ``$HIVE_ACID_METASTORE`` or
    ``~/.hive-acid/metastore.db``.
    """

    conn_name_attr = "hive_acid_conn_id"
    default_conn_name = "hive_acid_default"
    conn_type = "hive_acid"
    hook_name = "Hive ACID metastore"

    def __init__(self, hive_acid_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hive_acid_conn_id = hive_acid_conn_id

    @cached_property
    def extras(self) -> dict[str, Any]:
        """The connection's extras; empty when the connection does not exist (embedded default)."""
        try:
            conn = self.get_connection(self.hive_acid_conn_id)
        except AirflowNotFoundException:
            return self._missing()
        return _extras(conn)

    async def aget_metastore_url(self) -> str:
        """:attr:`metastore_url` for triggers: reads the connection without blocking the event loop."""
        try:
            conn = await self.aget_connection(self.hive_acid_conn_id)
            extras = _extras(conn)
        except AirflowNotFoundException:
            extras = self._missing()
        self.__dict__["extras"] = extras
        return self.metastore_url

    def _missing(self) -> dict[str, Any]:
        if self.hive_acid_conn_id != self.default_conn_name:
            raise AirflowNotFoundException(f"connection {self.hive_acid_conn_id!r} (type hive_acid) is not defined")
        return {}

    @property
    def metastore_url(self) -> str:
        return str(self.extras.get("metastore_url") or default_url())

    @property
    def heartbeat_interval(self) -> float | None:
        value = self.extras.get("heartbeat_interval")
        if value in (None, ""):
            return None
        interval = float(value)
        if interval <= 0:
            raise InvalidInputError(f"connection {self.hive_acid_conn_id}: heartbeat_interval must be > 0, "
                                    f"got {value!r}")
        return interval

    def get_conn(self) -> Metastore:
        """A connected :class:`Metastore` (cached on the hook)."""
        return self.metastore

    @cached_property
    def metastore(self) -> Metastore:
        return Metastore(self.metastore_url)

    def initialize(self) -> Metastore:
        """Create the metastore schema if missing (idempotent), with the connection's warehouse
        and txn timeout; returns the connected metastore."""
        settings = {}
        if self.extras.get("txn_timeout") not in (None, ""):
            settings["hive.txn.timeout"] = str(int(float(self.extras["txn_timeout"])))
        warehouse = self.extras.get("warehouse") or os.environ.get("HIVE_ACID_WAREHOUSE") or None
        ms = Metastore.initialize(self.metastore_url, warehouse=warehouse, settings=settings)
        self.__dict__["metastore"] = ms
        return ms

    @contextmanager
    def heartbeat(self, txn_id: int, *, on_lost: Any = None) -> Iterator[Heartbeater]:
        """Heartbeat ``txn_id`` from a background thread for the duration of the block.

        If the metastore refuses a heartbeat (the txn was aborted elsewhere or timed out), the
        reason is logged, ``on_lost`` runs (e.g. kill the Spark job), and leaving the block raises
        :class:`~airflow_hive_acid.heartbeat.HeartbeatLost`, which fails the task.
        """
        beater = Heartbeater(self.metastore, int(txn_id), self.heartbeat_interval, on_lost)
        self.log.info("heartbeating transaction %s every %.1fs", txn_id, beater.interval)
        with beater:
            yield beater

    def test_connection(self) -> tuple[bool, str]:
        """Used by the UI's Test button: the metastore answers and is initialized."""
        try:
            ms = self.metastore
            return True, f"metastore {ms.url}: {len(ms.catalog.list_tables())} table(s)"
        except Exception as exc:  # noqa: BLE001 - reported to the user as the test result
            return False, str(exc)


def _extras(conn: Any) -> dict[str, Any]:
    """Settings of a ``hive_acid`` connection: its extras (a host holding a full database URL is
    accepted as ``metastore_url`` too)."""
    extras = dict(conn.extra_dejson)
    if not extras.get("metastore_url") and conn.host and "://" in conn.host:
        extras["metastore_url"] = conn.host
    return extras
