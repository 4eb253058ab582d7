"""Table-level tasks: create a table (idempotent) and read one at a snapshot into XCom."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from ..errors import InvalidInputError
from ..jobs import Read
from ..statements import StatementRunner
from .base import AcidBaseOperator, fails_fast, parse_txn_id, task_key


class AcidCreateTableOperator(AcidBaseOperator):
    """``CREATE TABLE IF NOT EXISTS`` of a transactional table (the metastore schema is created
    first if missing, so a DAG can start from nothing). Returns the table's description."""

    template_fields: Sequence[str] = ("table", "columns", "partitioned_by", "location", "properties")

    def __init__(self, *, table: str, columns: str, partitioned_by: str | None = None,
                 bucketed_by: Sequence[str] | str | None = None, buckets: int = 0, location: str | None = None,
                 properties: dict[str, str] | None = None, if_not_exists: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.columns, self.partitioned_by = table, columns, partitioned_by
        self.bucketed_by, self.buckets = bucketed_by, buckets
        self.location, self.properties, self.if_not_exists = location, dict(properties or {}), if_not_exists
        self._info: Any = None

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.initialize()
        info = ms.catalog.create_table(self.table, self.columns, partitioned_by=self.partitioned_by,
                                       bucketed_by=self.bucketed_by, buckets=self.buckets, location=self.location,
                                       properties=self.properties, if_not_exists=self.if_not_exists)
        self._info = info
        self.log.info("table %s at %s", info.qualified_name, info.location)
        return info.to_dict()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as an output with its schema (the columns and partition columns it has, also
        when it existed already); without it, after a failure, only the name."""
        from ..lineage import lineage, table_output
        info = self._info
        return lineage([], [table_output(info.qualified_name, info) if info is not None else table_output(self.table)])


class AcidReadOperator(AcidBaseOperator):
    """Reads ``table`` at a snapshot (its own read-only txn, or ``txn_id``'s; ``at_write_id`` for
    an older state) and returns up to ``limit`` rows as dicts — for checks and small lookups; big
    reads belong in a Spark job with :func:`airflow_hive_acid.spark.scan.read_table`."""

    template_fields: Sequence[str] = ("table", "where", "partition", "txn_id", "at_write_id")

    def __init__(self, *, table: str, columns: Sequence[str] | None = None, where: str | None = None,
                 partition: str | None = None, order_by: Sequence[str] | None = None, limit: int = 1000,
                 at_write_id: int | str | None = None, txn_id: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not isinstance(limit, int) or limit <= 0:
            raise InvalidInputError(f"limit must be a positive integer, got {limit!r}")
        self.table, self.columns, self.where, self.partition = table, columns, where, partition
        self.order_by, self.limit, self.at_write_id, self.txn_id = order_by, limit, at_write_id, txn_id
        self._runner: StatementRunner | None = None

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        ms = self.metastore_hook.metastore
        runner = StatementRunner(ms, self.spark_hook, agent_info=task_key(context), lock_wait=self.lock_wait,
                                 heartbeat_interval=self.metastore_hook.heartbeat_interval)
        at = int(self.at_write_id) if self.at_write_id not in (None, "") else None
        request = Read(limit=self.limit, partition=self.partition, where=self.where,
                       order_by=list(self.order_by or []) or None,
                       columns=[c.lower() for c in self.columns] if self.columns else None)
        self._runner = runner
        rows = runner.read_rows(self.table, request, txn_id=parse_txn_id(self.txn_id), at_write_id=at)
        self.log.info("%s: %d row(s)", self.table, len(rows))
        for row in rows[:50]:
            self.log.info("  %s", row)
        return rows

    def on_kill(self) -> None:
        """Kill the read job; its read-only txn ends by the housekeeper's timeout (it wrote nothing)."""
        self.spark_hook.kill()

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table read, with its schema, and the snapshot the rows came from."""
        from ..lineage import HiveAcidRunFacet, lineage, table_input
        info = self.metastore_hook.metastore.catalog.get_table(self.table)
        read = (self._runner.last_read if self._runner is not None else None) or {}
        return lineage([table_input(info.qualified_name, info)], [],
                       HiveAcidRunFacet(operation="read", txnId=read.get("txn_id"),
                                        validWriteIds=read.get("valid_write_ids")))
