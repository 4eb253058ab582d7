"""One transaction over several tasks: begin (XCom ``{txn_id, write_ids, snapshot}``), DML
operators that join it by ``txn_id``, then commit, or abort on a failure branch."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from ..assets import table_asset
from ..errors import InvalidInputError, TxnError
from ..metastore import TxnState
from .base import AcidBaseOperator, fails_fast, is_templated, parse_txn_id, task_key


class AcidBeginTransactionOperator(AcidBaseOperator):
    """Opens a txn and allocates a write id on each of ``tables``; pushes
    ``{"txn_id", "write_ids": {"db.table": id}, "snapshot": {"db.table": {...}}}``.

    Later tasks must join it within ``hive.txn.timeout`` of each other: between tasks nobody
    heartbeats it. A retry of this task reuses the txn its earlier attempt opened if still open.
    """

    template_fields: Sequence[str] = ("tables",)

    def __init__(self, *, tables: Sequence[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(tables, str):
            tables = [tables]
        if not tables:
            raise InvalidInputError("AcidBeginTransactionOperator needs at least one table")
        self.tables = list(tables)
        self._txn_id: int | None = None

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        key = task_key(context)
        tables = [ms.catalog.get_table(t).qualified_name for t in self.tables]
        txn_id = next((t.txn_id for t in ms.txns.find_txns(key) if t.state is TxnState.OPEN), None)
        if txn_id is not None:
            self.log.info("reusing transaction %s opened by an earlier try of this task", txn_id)
            ms.txns.heartbeat(txn_id)
            write_ids = ms.txns.allocate_write_ids(txn_id, tables)
        else:
            txn_id, write_ids = ms.txns.begin_write(tables, agent_info=key)
        self._txn_id = txn_id
        snaps = ms.txns.snapshots(tables, txn_id=txn_id)
        self.log.info("transaction %s open; write ids %s", txn_id, write_ids)
        return {"txn_id": txn_id, "write_ids": write_ids,
                "snapshot": {t: s.to_dict() for t, s in snaps.items()}}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The tables the txn was opened to write (outputs, with their schemas) and the txn."""
        from ..lineage import HiveAcidRunFacet, lineage, tables_output
        return lineage([], tables_output(self.metastore_hook.metastore, self.tables),
                       HiveAcidRunFacet(operation="begin", txnId=self._txn_id, committed=False))


class AcidCommitTransactionOperator(AcidBaseOperator):
    """Commits ``txn_id`` (idempotent: an already committed txn is success; an aborted one fails
    the task with its reason) and emits an Asset event per table it wrote, with its stats."""

    template_fields: Sequence[str] = ("txn_id",)

    def __init__(self, *, txn_id: int | str, tables: Sequence[str] | None = None, **kwargs: Any) -> None:
        if tables and not is_templated(tables) and "outlets" not in kwargs:
            kwargs["outlets"] = [table_asset(t) for t in tables]
        super().__init__(**kwargs)
        self.txn_id = txn_id
        self.tables = list(tables or [])
        self._txn_id: int | None = None
        self._committed = False

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        txn_id = parse_txn_id(self.txn_id)
        if txn_id is None:
            raise InvalidInputError("AcidCommitTransactionOperator needs a txn_id")
        self._txn_id = txn_id
        result = ms.txns.commit_txn(txn_id)
        self._committed = True
        if result.already_committed:
            self.log.info("transaction %s was already committed", txn_id)
        writes = ms.txns.writes_of(txn_id)
        stats = summarize_writes(writes)
        for table, extra in stats.items():
            emit_asset_event(context, self.outlets, table, {"txn_id": txn_id, **extra})
        self.log.info("transaction %s committed: %s", txn_id, stats)
        return {"txn_id": txn_id, "committed": True, "tables": stats}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Every table the committed txn wrote, with what the metastore recorded of its writes
        (rows by kind, files, bytes, partitions); before a commit, the tables named."""
        from ..lineage import HiveAcidRunFacet, lineage, tables_output
        ms = self.metastore_hook.metastore
        txn_id = self._txn_id
        if txn_id is None or not self._committed:
            return lineage([], tables_output(ms, self.tables),
                           HiveAcidRunFacet(operation="commit", txnId=txn_id, committed=False))
        writes = ms.txns.writes_of(txn_id)
        tables = [*ms.txns.write_ids_of(txn_id), *(f"{w.db}.{w.table}" for w in writes)]
        return lineage([], tables_output(ms, tables, writes),
                       HiveAcidRunFacet(operation="commit", txnId=txn_id, committed=True))


class AcidAbortTransactionOperator(AcidBaseOperator):
    """Aborts ``txn_id`` with ``reason`` — the failure branch (``trigger_rule="one_failed"``) of a
    multi-task txn. Nothing the txn wrote ever becomes visible; the cleaner removes its files.
    ``fail_task=True`` fails this task after the abort, so the DAG run ends failed, not green."""

    template_fields: Sequence[str] = ("txn_id", "reason")

    def __init__(self, *, txn_id: int | str, reason: str = "aborted by Airflow failure branch",
                 fail_task: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.txn_id = txn_id
        self.reason = reason
        self.fail_task = fail_task
        self._txn_id: int | None = None
        self._aborted = False

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        txn_id = parse_txn_id(self.txn_id)
        if txn_id is None:
            raise InvalidInputError("AcidAbortTransactionOperator needs a txn_id (did the begin task run?)")
        self._txn_id = txn_id
        info = ms.txns.get_txn(txn_id)
        if info.state is TxnState.COMMITTED:
            raise TxnError(f"transaction {txn_id} is already committed and cannot be aborted")
        if info.state is TxnState.ABORTED:
            self.log.info("transaction %s was already aborted: %s", txn_id, info.reason)
        else:
            ms.txns.abort_txn(txn_id, self.reason)
            self.log.info("transaction %s aborted: %s", txn_id, self.reason)
        self._aborted = True
        reason = ms.txns.get_txn(txn_id).reason
        if self.fail_task:
            raise AirflowFailException(f"transaction {txn_id} aborted: {reason}")
        return {"txn_id": txn_id, "aborted": True, "reason": reason}

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The tables the aborted txn held write ids on: none of its writes to them will ever be
        visible. Also the ``FAIL`` event of ``fail_task=True`` (the provider falls back to this)."""
        from ..lineage import HiveAcidRunFacet, lineage, tables_output
        txn_id = self._txn_id
        if txn_id is None or not self._aborted:
            return lineage(run=HiveAcidRunFacet(operation="abort", txnId=txn_id))
        ms = self.metastore_hook.metastore
        return lineage([], tables_output(ms, ms.txns.write_ids_of(txn_id)),
                       HiveAcidRunFacet(operation="abort", txnId=txn_id, committed=False))


def summarize_writes(writes: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """Write stats of a txn, summed per ``db.table``: the Asset event extra and XCom."""
    out: dict[str, dict[str, Any]] = {}
    for w in writes:
        s = out.setdefault(f"{w.db}.{w.table}", {"write_id": w.write_id, "rows_inserted": 0, "rows_updated": 0,
                                                   "rows_deleted": 0, "partitions": []})
        s["rows_inserted"] += w.rows_inserted
        s["rows_updated"] += w.rows_updated
        s["rows_deleted"] += w.rows_deleted
        if w.partition and w.partition not in s["partitions"]:
            s["partitions"].append(w.partition)
    return out


def emit_asset_event(context: Context, outlets: Sequence[Any], table: str, extra: dict[str, Any]) -> None:
    """Put ``extra`` on the event of the table's Asset if the task declares it as an outlet."""
    asset = table_asset(table)
    for outlet in outlets or []:
        if getattr(outlet, "uri", None) == asset.uri:
            context["outlet_events"][outlet].extra = extra
