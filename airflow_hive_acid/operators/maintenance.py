"""Platform tasks: compaction (manual request, initiator, worker), the cleaner and the
housekeeper — what Hive runs as metastore services, scheduled here as Airflow tasks."""
from __future__ import annotations

import time
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from ..compactor import Compactor
from ..errors import InvalidInputError
from ..metastore import AcidMetrics, CompactionState, Metastore
from .base import AcidBaseOperator, fails_fast


class _CompactorOperator(AcidBaseOperator):
    @cached_property
    def compactor(self) -> Compactor:
        return Compactor(self.metastore_hook.metastore, self.spark_hook,
                         heartbeat_interval=self.metastore_hook.heartbeat_interval,
                         worker_id=f"airflow:{self.dag_id}.{self.task_id}")

    def on_kill(self) -> None:
        """Kill the Spark job; the request is requeued by the next claim or the housekeeper."""
        self.spark_hook.kill()


class AcidCompactOperator(_CompactorOperator):
    """``ALTER TABLE t [PARTITION (...)] COMPACT 'minor'|'major' [AND WAIT]``: queues a manual
    request (thresholds do not apply; a queued or running one for the same partition is reused).
    With ``wait=True`` this task runs the worker and then the cleaner and fails if the compaction
    failed; without, a worker elsewhere picks it up (watch it with ``CompactionSensor``).
    XCom: ``{"id", "state", ...}``, the compaction as SHOW COMPACTIONS shows it."""

    template_fields: Sequence[str] = ("table", "partition", "compaction_type")

    def __init__(self, *, table: str, partition: str | None = None, compaction_type: str = "major",
                 wait: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table, self.partition, self.compaction_type, self.wait = table, partition, compaction_type, wait
        self._out: dict[str, Any] | None = None

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        out = self.compactor.compact(self.table, self.partition or None, self.compaction_type, wait=self.wait)
        self._out = out
        self.log.info("compaction %s of %s: %s", out["id"], self.table, out.get("message") or out["state"])
        if out["state"] in ("failed", "refused", "did not initiate"):
            raise RuntimeError(f"compaction {out['id']} of {self.table} {out['state']}: {out.get('error')}")
        return out

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table, read and rewritten (a compaction changes files, not rows), and the request."""
        return compaction_lineage(self.table, self._out)


METRIC_PREFIX = "hive_acid"


def report_metrics(metastore: Metastore, log: Any) -> AcidMetrics:
    """Collect the ACID metrics, emit them as ``hive_acid.<name>`` gauges through Airflow's
    ``Stats`` (StatsD or OpenTelemetry, whichever Airflow is configured with) and log the
    thresholds crossed as warnings."""
    from airflow.sdk.observability.stats import Stats
    metrics = metastore.metrics()
    for name, value in metrics.gauges().items():
        Stats.gauge(f"{METRIC_PREFIX}.{name}", value)
    for warning in metrics.warnings:
        log.warning("ACID metrics: %s", warning)
    return metrics


class AcidInitiatorOperator(_CompactorOperator):
    """One pass of the initiator: queues minor/major compactions where the write stats recorded
    at commit cross the thresholds, then reports the ACID metrics (``emit_metrics``), with the
    cycle's duration as ``hive_acid.compaction_initiator_cycle_duration``. XCom: each decision
    with its reason."""

    def __init__(self, *, emit_metrics: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.emit_metrics = emit_metrics

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        started = time.monotonic()
        decisions = [d.to_dict() for d in self.compactor.initiate()]
        cycle = time.monotonic() - started
        for d in decisions:
            self.log.info("initiator: %s", d)
        ms = self.metastore_hook.metastore
        if cycle > ms.config.long_running_initiator_warning:
            self.log.warning("the initiator cycle took %.0fs (threshold %.0fs)", cycle,
                             ms.config.long_running_initiator_warning)
        if self.emit_metrics:
            from airflow.sdk.observability.stats import Stats
            Stats.timing(f"{METRIC_PREFIX}.compaction_initiator_cycle_duration", cycle * 1000.0)
            report_metrics(ms, self.log)
        return decisions


class AcidCompactionWorkerOperator(_CompactorOperator):
    """Runs queued compactions (of ``table``, or any) until none is left or ``max_requests`` ran."""

    template_fields: Sequence[str] = ("table",)

    def __init__(self, *, table: str | None = None, max_requests: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_requests <= 0:
            raise InvalidInputError(f"max_requests must be positive, got {max_requests}")
        self.table, self.max_requests = table, max_requests
        self._done: list[dict[str, Any]] = []

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        done: list[dict[str, Any]] = []
        self._done = done
        for _ in range(self.max_requests):
            result = self.compactor.run_worker(table=self.table or None)
            if result is None:
                break
            done.append(result.to_dict())
            self.log.info("worker: %s", done[-1])
        return done

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """Each table a compaction ran on (one run facet: the last request's)."""
        from ..lineage import lineage
        parts = [compaction_lineage(d["table"], d) for d in self._done]
        if not parts:
            return lineage()
        return lineage([d for p in parts for d in p.inputs], [d for p in parts for d in p.outputs],
                       parts[-1].run_facets.get("hiveAcid"))


def compaction_lineage(table: str, out: dict[str, Any] | None) -> Any:
    """A compaction's lineage from its worker result (``out`` of a worker, or of ``compact``
    with the worker's result under ``"worker"``)."""
    from ..lineage import HiveAcidRunFacet, lineage, table_input, table_output
    out = out or {}
    worker = out.get("worker") or out
    run = HiveAcidRunFacet(operation=f"compact {worker.get('type') or ''}".strip().lower(),
                           txnId=worker.get("txn_id"), writeId=worker.get("highest_write_id"),
                           compactionId=out.get("id"), committed=out.get("state") in COMPACTED_STATES)
    return lineage([table_input(table)], [table_output(table, rows=worker.get("rows"), size=worker.get("bytes"))],
                   run)


COMPACTED_STATES = (CompactionState.READY_FOR_CLEANING.label, CompactionState.SUCCEEDED.label)


class AcidCleanerOperator(_CompactorOperator):
    """One pass of the cleaner: removes what compactions made obsolete once no open txn can still
    read it, and the files of aborted writes. XCom: what each request removed."""

    template_fields: Sequence[str] = ("table",)

    def __init__(self, *, table: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table
        self._results: list[dict[str, Any]] = []

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        results = [r.to_dict() for r in self.compactor.clean(table=self.table or None)]
        self._results = results
        for r in results:
            self.log.info("cleaner: %s", r)
        return results

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The tables the cleaner removed files from or tried to (outputs: their storage changed,
        not their rows), one per table however many requests it ran for it."""
        from ..lineage import HiveAcidRunFacet, lineage, tables_output
        tables = [r["table"] for r in self._results]
        return lineage([], tables_output(self.metastore_hook.metastore, tables), HiveAcidRunFacet(operation="clean"))


class AcidHousekeeperOperator(AcidBaseOperator):
    """Hive's AcidHouseKeeperService as a task: aborts timed-out txns (reason ``timed out``),
    requeues compactions whose worker vanished, trims compaction history; then reports the ACID
    metrics (``emit_metrics``). XCom: what it did, and the metrics' gauges under ``metrics``."""

    def __init__(self, *, emit_metrics: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.emit_metrics = emit_metrics

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        ms = self.metastore_hook.metastore
        report = ms.housekeep().to_dict()
        self.log.info("housekeeper: %s", report)
        if self.emit_metrics:
            report["metrics"] = report_metrics(ms, self.log).gauges()
        return report
