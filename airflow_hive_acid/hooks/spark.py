"""``AcidSparkHook``: runs a job of the job protocol (``spark/entrypoints/<job>.py --spec-b64
SPEC``) through the Spark provider's ``SparkSubmitHook``, streams its output to the task log,
reads the manifest back from the table's filesystem.

It never imports pyspark: the entry scripts and ``spark-submit`` come from the pyspark install,
located by :mod:`airflow_hive_acid.jobs.launcher` without importing it.
"""
from __future__ import annotations

import os
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowException, AirflowNotFoundException

from ..errors import JobFailed
from ..jobs import JobSpec, Manifest
from ..jobs.joblog import QUIET_CONF, OutputFilter
from ..jobs.launcher import (
    FastJvm,
    application,
    collect_manifest,
    env_conf,
    kill_process_group,
    spark_home,
    spark_submit_binary,
)

LOCAL_MASTER = "local[*]"

if TYPE_CHECKING:
    from airflow.sdk.types import Logger


class _FilteredLog:
    """Stands in for a hook's logger: INFO messages ``keep`` refuses (Spark's chatter) are not
    logged; everything else passes."""

    def __init__(self, log: Any, keep: Callable[[str], bool]):
        self._log, self._keep = log, keep

    def info(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        if self._keep(str(msg) % args if args else str(msg)):
            self._log.info(msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


class _JobSubmit(SparkSubmitHook):
    """SparkSubmitHook with three changes this provider needs: ``local[*]`` (not YARN) when the
    connection does not exist, a kill that reaches the whole process group (spark-submit alone
    would leave the job's Python driver running), and the job's output filtered for the task log
    (:mod:`~airflow_hive_acid.jobs.joblog`: the stage lines, warnings and errors; all of it when
    ``show_spark_output``)."""

    def __init__(self, *, fallback_master: str | None, show_spark_output: bool = False, **kwargs: Any) -> None:
        self._fallback_master = fallback_master
        self.output_tail: deque[str] = deque(maxlen=40)
        self._output = OutputFilter(verbose=show_spark_output)
        super().__init__(**kwargs)

    @contextmanager
    def _logging_only(self, keep: Callable[[str], bool]) -> Iterator[None]:
        log = self.log
        self._log = cast("Logger", _FilteredLog(log, keep))   # duck-typed: info() filtered, the rest passed on
        try:
            yield
        finally:
            self._log = log

    def _resolve_connection(self) -> dict[str, Any]:
        if not self._fallback_master:
            return super()._resolve_connection()
        # without the connection the provider says it defaults to YARN; the job runs on the fallback
        with self._logging_only(lambda msg: not msg.startswith("Could not load connection string")):
            data = super()._resolve_connection()
        data["master"] = self._fallback_master
        return data

    def _process_spark_submit_log(self, itr: Any) -> None:
        def remember(lines: Any) -> Any:
            for line in lines:
                self.output_tail.append(line.rstrip("\n"))
                yield line
        with self._logging_only(self._output.keep):
            super()._process_spark_submit_log(remember(itr))

    def on_kill(self) -> None:
        super().on_kill()      # first: its YARN/cluster kill needs spark-submit still running
        kill_process_group(self._submit_sp)


class AcidSparkHook(BaseHook):
    """Submits hive-acid Spark jobs with the ``spark_default`` connection (any master Spark
    supports; ``local[*]`` when the connection is not configured), in the deploy mode of the
    connection's ``deploy-mode`` extra: the spec travels on the command line and the manifest
    comes back through the table's filesystem, so the driver may run on any node.

    The instance is the ``submit`` callable :class:`~airflow_hive_acid.statements.StatementRunner`
    takes; :meth:`kill` stops the running job (used by operators' ``on_kill`` and when the txn's
    heartbeat is refused).

    ``env`` adds variables to the driver's environment (the Spark provider carries them to a YARN
    or Kubernetes driver in cluster mode). The task log shows the job's stage lines, warnings and
    errors; ``verbose=True`` (or the connection extra ``"verbose": true``) shows Spark's INFO
    output too and spark-submit's own ``--verbose``.
    """

    conn_name_attr = "conn_id"
    default_conn_name = "spark_default"
    conn_type = "spark"
    hook_name = "Hive ACID Spark jobs"

    def __init__(self, conn_id: str = default_conn_name, *, conf: dict[str, Any] | None = None,
                 driver_memory: str | None = None, executor_memory: str | None = None,
                 executor_cores: int | None = None, total_executor_cores: int | None = None,
                 num_executors: int | None = None, verbose: bool = False, env: dict[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.conn_id = conn_id
        self.conf = {k: str(v) for k, v in (conf or {}).items()}
        self.env = dict(env or {})
        self.resources = {"driver_memory": driver_memory, "executor_memory": executor_memory,
                          "executor_cores": executor_cores, "total_executor_cores": total_executor_cores,
                          "num_executors": num_executors}
        self.verbose = verbose
        self._current: _JobSubmit | None = None
        self._lock = threading.Lock()
        self.killed = False

    @cached_property
    def fallback_master(self) -> str | None:
        """``local[*]`` (or ``$HIVE_ACID_SPARK_MASTER``) when ``spark_default`` does not exist;
        None when the connection names the master. Looked up once per hook."""
        try:
            self.get_connection(self.conn_id)
            return None
        except AirflowNotFoundException:
            if self.conn_id != self.default_conn_name:
                raise
            return os.environ.get("HIVE_ACID_SPARK_MASTER", LOCAL_MASTER)

    def __call__(self, spec: JobSpec) -> Manifest:
        return self.submit_job(spec)

    def submit_job(self, spec: JobSpec) -> Manifest:
        """Run one job to completion and return its manifest; ``JobFailed`` carries the job's own
        error when it wrote one, else the exit status and the tail of its output."""
        if self.killed:
            raise JobFailed(f"{spec.job} job not started: the task is being killed")
        env = {"SPARK_HOME": spark_home(), "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
               "PYSPARK_DRIVER_PYTHON": os.environ.get("PYSPARK_DRIVER_PYTHON", sys.executable), **self.env}
        jvm = FastJvm(self._deploy_mode)
        verbose = self.show_spark_output
        conf = {**({} if verbose else QUIET_CONF), **env_conf(), **self.conf}
        app = application(spec, self._master, jvm.conf(conf), self._deploy_mode)
        submit = _JobSubmit(
            fallback_master=self.fallback_master, show_spark_output=verbose, conn_id=self.conn_id, conf=app.conf,
            java_class=app.java_class, name=f"hive-acid-{spec.job}", application_args=app.args, env_vars=env,
            spark_binary=spark_submit_binary(), verbose=verbose,
            **{k: v for k, v in self.resources.items() if v is not None})
        with self._lock:
            self._current = submit
        rc = 0
        try:
            submit.submit(app.file, start_new_session=True)
        except AirflowException:
            rc = submit._submit_sp.returncode if submit._submit_sp is not None else 1
            rc = rc or 1
        finally:
            with self._lock:
                self._current = None
            jvm.finish()
        if self.killed:
            raise JobFailed(f"{spec.job} job killed")
        return collect_manifest(spec, rc, submit.output_tail)

    def kill(self) -> None:
        """Kill the running job (its spark-submit, driver and Python workers)."""
        self.killed = True
        with self._lock:
            current = self._current
        if current is not None:
            current.on_kill()

    @cached_property
    def show_spark_output(self) -> bool:
        """All of Spark's output in the task log: ``verbose`` or the connection's ``verbose`` extra."""
        if self.verbose or self.fallback_master is not None:
            return self.verbose
        return str(self.get_connection(self.conn_id).extra_dejson.get("verbose", "")).lower() in ("true", "1", "yes")

    @cached_property
    def _deploy_mode(self) -> str | None:
        """The connection's deploy mode (its ``deploy-mode`` extra), None without a connection."""
        if self.fallback_master is not None:
            return None
        return self.get_connection(self.conn_id).extra_dejson.get("deploy-mode")

    @cached_property
    def _master(self) -> str:
        """The master URL spark-submit gets (as ``SparkSubmitHook`` resolves it)."""
        if self.fallback_master is not None:
            return self.fallback_master
        return _JobSubmit(fallback_master=None, conn_id=self.conn_id)._connection["master"]

    def get_conn(self) -> None:  # a hook must have one; there is no long-lived connection here
        return None
