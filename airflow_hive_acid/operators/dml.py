"""INSERT / UPDATE / DELETE / MERGE as Airflow tasks. Alone, each runs open -> write id -> lock
-> heartbeat -> Spark job -> commit and emits an Asset event on its table; given ``txn_id`` it
joins that txn and its writes become visible when the txn commits. XCom: the statement's stats."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context

from ..assets import table_asset
from ..errors import InvalidInputError
from ..jobs import Delete, Insert, Merge, MergeClause, Request, SourceSpec, Update, parse_assignments
from ..jobs.joblog import summary_table
from ..metastore import TableInfo, TxnState
from ..statements import StatementResult, StatementRunner, table_source
from .base import AcidBaseOperator, fails_fast, is_templated, parse_txn_id, task_key
from .transaction import emit_asset_event

_KEY_LIST = re.compile(r"^\s*[A-Za-z_]\w*(\s*,\s*[A-Za-z_]\w*)*\s*$")   # "id" or "id, region"


class AcidDmlOperator(AcidBaseOperator):
    """Shared life cycle of the DML operators; subclasses say which job and which arguments.

    ``replay_committed``: a retry (or re-run) of a task whose own txn already committed returns
    that txn's stats and writes nothing again; an open txn left by a dead earlier try is aborted.
    In a joined txn the statement id is keyed by the task, so a retry replaces its own output.
    """

    template_fields: Sequence[str] = ("table", "txn_id")
    job_name: str = ""          # the statement's job: insert, update, delete, merge

    def __init__(self, *, table: str, txn_id: int | str | None = None, replay_committed: bool = True,
                 **kwargs: Any) -> None:
        if txn_id is None and not is_templated(table) and "outlets" not in kwargs:
            kwargs["outlets"] = [table_asset(table)]
        super().__init__(**kwargs)
        self.table = table
        self.txn_id = txn_id
        self.replay_committed = replay_committed
        self._runner: StatementRunner | None = None
        self._info: TableInfo | None = None
        self._result: StatementResult | None = None

    def request(self) -> Request:
        """The statement this task runs, from its (rendered) arguments."""
        raise NotImplementedError

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        key = task_key(context)
        txn_id = parse_txn_id(self.txn_id)
        info = self._info = ms.catalog.get_table(self.table)
        if txn_id is None:
            earlier = self._earlier_attempt(key, info.qualified_name)
            if earlier is not None:
                return earlier
        request = self.request()
        self._runner = StatementRunner(ms, self.spark_hook, agent_info=key, lock_wait=self.lock_wait,
                                       heartbeat_interval=self.metastore_hook.heartbeat_interval)
        result = self._result = self._runner.run(request, info.qualified_name, txn_id=txn_id, statement_key=key)
        out = result.to_dict()
        self.log.info("%s %s: %s inserted, %s updated, %s deleted; write id %s of txn %s (%s)",
                      request.job.upper(), out["table"], out["rows_inserted"], out["rows_updated"],
                      out["rows_deleted"], out["write_id"], out["txn_id"],
                      "committed" if out["committed"] else "joined, not yet committed")
        for line in summary_table(result.manifest.partitions):
            self.log.info("%s", line)
        if out["committed"]:
            emit_asset_event(context, self.outlets, info.qualified_name, {
                k: out[k] for k in ("txn_id", "write_id", "rows_inserted", "rows_updated", "rows_deleted",
                                    "partitions")})
        return out

    def _earlier_attempt(self, key: str, table: str) -> dict[str, Any] | None:
        ms = self.metastore_hook.metastore
        for txn in ms.txns.find_txns(key):
            if txn.state is TxnState.OPEN:
                self.log.warning("aborting transaction %s left open by an earlier try of this task", txn.txn_id)
                ms.txns.abort_txn(txn.txn_id, f"superseded by a retry of {key}")
            elif txn.state is TxnState.COMMITTED and self.replay_committed:
                self.log.warning("an earlier try of this task committed transaction %s: not writing again",
                                 txn.txn_id)
                self._result = StatementResult.of_committed(ms, txn.txn_id, table, key)
                return {**self._result.to_dict(), "replayed": True}
        return None

    # -- OpenLineage (called by the provider's listener after execute) -------------------------
    def lineage_inputs(self) -> list[Any]:
        """What the statement reads: the target itself (UPDATE, DELETE); sources say otherwise."""
        from ..lineage import table_input
        return [table_input(self.table, self._info)]

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Source and target, the target's schema and what was written, and the txn."""
        from ..lineage import HiveAcidRunFacet, lineage, table_output
        r = self._result
        if r is None:
            return lineage(self.lineage_inputs(), [table_output(self.table, self._info)])
        run = HiveAcidRunFacet(operation=self.job_name, txnId=r.txn_id, writeId=r.write_id,
                               statementId=r.statement_id, committed=r.committed,
                               validWriteIds=r.snapshot.get("valid_write_ids"))
        return lineage(self.lineage_inputs(), [table_output(r.table, self._info, r.manifest.partitions)], run)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        """The datasets the failed statement meant to read and write; nothing of it is visible."""
        from ..lineage import HiveAcidRunFacet, lineage, table_output
        return lineage(self.lineage_inputs(), [table_output(self.table, self._info)],
                       HiveAcidRunFacet(operation=self.job_name, committed=False))

    def on_kill(self) -> None:
        """Kill the Spark job and abort the task's own txn at once (a joined txn is left to the
        task that owns it: its abort branch, or the housekeeper after the timeout)."""
        self.spark_hook.kill()
        runner = self._runner
        txn_id = runner.own_txn if runner is not None else None
        if txn_id is not None:
            try:
                self.metastore_hook.metastore.txns.abort_txn(txn_id, "Airflow task killed")
                self.log.info("aborted transaction %s", txn_id)
            except Exception:  # noqa: BLE001 - the housekeeper aborts it after the timeout anyway
                self.log.exception("could not abort transaction %s", txn_id)


class _SourceMixin:
    source: str | None
    source_table: str | None
    source_format: str | None
    source_options: dict[str, str]

    def _source(self, ms: Any) -> SourceSpec:
        if bool(self.source) == bool(self.source_table):
            raise InvalidInputError("give source (a path) or source_table (an ACID table), one of them")
        if self.source_table:
            return table_source(ms, self.source_table)
        return SourceSpec(path=self.source, format=self.source_format, options=dict(self.source_options))

    def source_inputs(self) -> list[Any]:
        from ..lineage import path_input, table_input
        if self.source_table:
            return [table_input(self.source_table)]
        return [path_input(self.source)] if self.source else []


class AcidInsertOperator(_SourceMixin, AcidDmlOperator):
    """``INSERT INTO`` (or ``INSERT OVERWRITE`` with ``overwrite=True``: a new ``base_W`` of the
    partition or table) from files at ``source`` or from the ACID table ``source_table``.
    Partitioned tables take dynamic partitions from the data unless ``partition`` names one."""

    job_name = "insert"
    template_fields: Sequence[str] = ("table", "txn_id", "source", "source_table", "partition")

    def __init__(self, *, table: str, source: str | None = None, source_table: str | None = None,
                 source_format: str | None = None, source_options: dict[str, str] | None = None,
                 overwrite: bool = False, partition: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        self.source, self.source_table = source, source_table
        self.source_format, self.source_options = source_format, dict(source_options or {})
        self.overwrite = overwrite
        self.partition = partition

    def request(self) -> Insert:
        return Insert(source=self._source(self.metastore_hook.metastore), overwrite=bool(self.overwrite),
                      partition=dict(self.partition) if self.partition else None)

    def lineage_inputs(self) -> list[Any]:
        return self.source_inputs()


class AcidDeleteOperator(AcidDmlOperator):
    """``DELETE FROM table WHERE <where>`` (a Spark SQL condition over the table's columns)."""

    job_name = "delete"
    template_fields: Sequence[str] = ("table", "txn_id", "where")

    def __init__(self, *, table: str, where: str, **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        self.where = where

    def request(self) -> Delete:
        return Delete(where=self.where)


class AcidUpdateOperator(AcidDmlOperator):
    """``UPDATE table SET <set> WHERE <where>``; ``set`` is ``{"col": "expr"}`` or ``"a = x, b = y"``.
    Partition and bucket columns cannot be updated."""

    job_name = "update"
    template_fields: Sequence[str] = ("table", "txn_id", "set", "where")

    def __init__(self, *, table: str, set: dict[str, str] | str, where: str = "true", **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        self.set = set
        self.where = where

    def request(self) -> Update:
        sets = parse_assignments(self.set) if isinstance(self.set, str) else {
            str(k).strip().lower(): str(v) for k, v in self.set.items()}
        return Update(set=sets, where=self.where)


class AcidMergeOperator(_SourceMixin, AcidDmlOperator):
    """``MERGE INTO table t USING source s ON <keys> <clauses>``.

    ``on``: key columns (``["id"]``) or a Spark SQL condition over ``t`` and ``s``. ``clauses``
    in SQL order, as text (``"WHEN MATCHED AND s.op = 'D' THEN DELETE"``,
    ``"WHEN MATCHED THEN UPDATE SET name = s.name"``, ``"WHEN NOT MATCHED THEN INSERT *"``,
    ``"WHEN NOT MATCHED BY SOURCE THEN DELETE"``) or :class:`MergeClause`. Only changed rows are
    written; a target row matched by two source rows fails the job and nothing is committed.
    """

    job_name = "merge"
    template_fields: Sequence[str] = ("table", "txn_id", "source", "source_table", "on", "clauses")

    def __init__(self, *, table: str, on: Sequence[str] | str, clauses: Sequence[str | MergeClause],
                 source: str | None = None, source_table: str | None = None, source_format: str | None = None,
                 source_options: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(table=table, **kwargs)
        if not clauses:
            raise InvalidInputError("AcidMergeOperator needs at least one WHEN clause")
        self.source, self.source_table = source, source_table
        self.source_format, self.source_options = source_format, dict(source_options or {})
        self.on = on
        self.clauses = list(clauses)

    def request(self) -> Merge:
        on: list[str] | str
        if isinstance(self.on, str) and not _KEY_LIST.match(self.on):
            on = self.on                              # a join condition over t and s
        else:
            keys = self.on.split(",") if isinstance(self.on, str) else list(self.on)
            on = [k.strip().lower() for k in keys if k.strip()]
        return Merge(source=self._source(self.metastore_hook.metastore), on=on,
                     clauses=[MergeClause.of(c) for c in self.clauses])

    def lineage_inputs(self) -> list[Any]:
        return [*self.source_inputs(), *super().lineage_inputs()]     # the source, and the target it joins
