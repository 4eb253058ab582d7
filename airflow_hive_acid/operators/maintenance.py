"""Platform tasks: compaction (manual request, initiator, worker), the cleaner and the
housekeeper — what Hive runs as metastore services, scheduled here as Airflow tasks."""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from airflow.sdk import Context

from ..compactor import Compactor
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

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        out = self.compactor.compact(self.table, self.partition or None, self.compaction_type, wait=self.wait)
        self.log.info("compaction %s of %s: %s", out["id"], self.table, out.get("message") or out["state"])
        if out["state"] in ("failed", "refused", "did not initiate"):
            raise RuntimeError(f"compaction {out['id']} of {self.table} {out['state']}: {out.get('error')}")
        return out


class AcidInitiatorOperator(_CompactorOperator):
    """One pass of the initiator: queues minor/major compactions where the write stats recorded
    at commit cross the thresholds. XCom: each decision with its reason."""

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        decisions = [d.to_dict() for d in self.compactor.initiate()]
        for d in decisions:
            self.log.info("initiator: %s", d)
        return decisions


class AcidCompactionWorkerOperator(_CompactorOperator):
    """Runs queued compactions (of ``table``, or any) until none is left or ``max_requests`` ran."""

    template_fields: Sequence[str] = ("table",)

    def __init__(self, *, table: str | None = None, max_requests: int = 10, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if max_requests <= 0:
            raise ValueError(f"max_requests must be positive, got {max_requests}")
        self.table, self.max_requests = table, max_requests

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        done = []
        for _ in range(self.max_requests):
            result = self.compactor.run_worker(table=self.table or None)
            if result is None:
                break
            done.append(result.to_dict())
            self.log.info("worker: %s", done[-1])
        return done


class AcidCleanerOperator(_CompactorOperator):
    """One pass of the cleaner: removes what compactions made obsolete once no open txn can still
    read it, and the files of aborted writes. XCom: what each request removed."""

    template_fields: Sequence[str] = ("table",)

    def __init__(self, *, table: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.table = table

    @fails_fast
    def execute(self, context: Context) -> list[dict[str, Any]]:
        results = [r.to_dict() for r in self.compactor.clean(table=self.table or None)]
        for r in results:
            self.log.info("cleaner: %s", r)
        return results


class AcidHousekeeperOperator(AcidBaseOperator):
    """Hive's AcidHouseKeeperService as a task: aborts timed-out txns (reason ``timed out``),
    requeues compactions whose worker vanished, trims compaction history."""

    @fails_fast
    def execute(self, context: Context) -> dict[str, Any]:
        report = self.metastore_hook.metastore.housekeep().to_dict()
        self.log.info("housekeeper: %s", report)
        return report
