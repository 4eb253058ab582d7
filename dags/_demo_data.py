"""Where the example DAGs stage their input files: ``$HIVE_ACID_DEMO_DATA``, else ``incoming/``
beside the embedded metastore (``$HIVE_ACID_HOME``, default ``~/.hive-acid``). In a real pipeline
these files come from an extract job or a landing bucket.

Also the date a run is about. In Airflow 3 a run triggered by hand (``airflow dags trigger``, the
UI's button) has no logical date and no data interval: ``logical_date``, ``data_interval_start``,
``ds``, ``ds_nodash``, ``ts`` ... are absent from its context, so a DAG that must also run by hand
takes the logical date when there is one and the time the run was triggered (``run_after``)
otherwise."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pendulum

# ``{{ ds }}`` that a manual run renders too: the logical date's day, else the day it was triggered
RUN_DS = "{{ (dag_run.logical_date or dag_run.run_after) | ds }}"


def data_dir(*parts: str) -> str:
    root = os.environ.get("HIVE_ACID_DEMO_DATA") or str(
        Path(os.environ.get("HIVE_ACID_HOME") or Path.home() / ".hive-acid") / "incoming")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


def run_date(dag_run: Any) -> pendulum.DateTime:
    """The run's logical date (a scheduled run: the start of its interval under the default
    ``CronTriggerTimetable``), or, for a manual run, when it was triggered."""
    if dag_run is None:
        raise ValueError("run_date needs the task's dag_run (declare a dag_run parameter on the @task)")
    when = dag_run.logical_date or dag_run.run_after
    return pendulum.instance(when).in_timezone("UTC")
