"""What a job's output looks like to the person reading a task log or a terminal.

Spark's INFO chatter is off unless asked for (``spark.log.level`` for the driver, and a filter
for the lines printed before that setting takes hold); in a task log every warning and error is
kept in full, tracebacks included, and on a terminal (the CLI) only the job's own lines are; the
job prints one progress line per stage; the caller ends with a summary table of what was written.
Used by the jobs (progress lines), the Airflow hook and the CLI's submitter (the filter) and the
operators and the CLI (the summary). No pyspark, no Airflow.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ..acid.stats import WriteCounts

PROGRESS_PREFIX = "hive-acid: "

# The driver's log level from the start of its SparkContext (Spark >= 3.5 honours it at start-up).
QUIET_CONF = {"spark.log.level": "WARN"}

_LOG4J_RECORD = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_CHATTER = frozenset({"TRACE", "DEBUG", "INFO"})
# what every JVM start prints outside log4j, with nothing to act on
_BANNERS = ("Using Spark's default log4j profile:", "Setting Spark log level to",
            "WARNING: Using incubator modules:", "Setting default log level to",
            "To adjust logging level use sc.setLogLevel")


class OutputFilter:
    """Decides, line by line, what of spark-submit's output a reader sees: everything when
    ``verbose``; only the job's own lines (its stage lines, ``hive-acid: ...``) when ``brief``,
    for a terminal where the command ends with the job's error in one line; otherwise (a task
    log) all but log4j records below WARN and their continuation lines."""

    def __init__(self, verbose: bool = False, brief: bool = False):
        self.verbose = verbose
        self.brief = brief and not verbose
        self._in_chatter = False

    def keep(self, line: str) -> bool:
        if self.verbose:
            return True
        if self.brief:
            return line.startswith(PROGRESS_PREFIX)
        if line.startswith(_BANNERS):
            return False
        record = _LOG4J_RECORD.match(line)
        if record is not None:
            self._in_chatter = record.group(1) in _CHATTER
            return not self._in_chatter
        if self._in_chatter and (not line.strip() or line[:1].isspace()):
            return False                     # the indented rest of a multi-line INFO record
        self._in_chatter = False
        return True


def progress_line(job: str, stage: str, seconds: float, rows: int | None = None) -> str:
    """One stage of a job as it finishes, e.g. ``hive-acid: merge write  1,000,000 rows  12.3 s``."""
    rows_part = f"  {rows:,} rows" if rows is not None else ""
    return f"{PROGRESS_PREFIX}{job} {stage}{rows_part}  {seconds:.1f} s"


def print_progress(job: str, stage: str, seconds: float, rows: int | None = None) -> None:
    print(progress_line(job, stage, seconds, rows), file=sys.stdout, flush=True)


_SUMMARY_COLUMNS = ("partition", "inserted", "updated", "deleted", "files", "bytes", "published")


def summary_table(partitions: Sequence[Any]) -> list[str]:
    """Per partition: rows inserted, updated and deleted, files, bytes and the directories
    published, with a total line when there are several. ``partitions`` are
    :class:`~airflow_hive_acid.jobs.manifest.PartitionStats` (or anything with their fields)."""
    rows: list[tuple[str, ...]] = []
    total = WriteCounts()
    for p in partitions:
        total.add(p)
        rows.append(_summary_row(p.partition or "(table)", p, ", ".join(getattr(p, "directories", ()) or ())))
    if not rows:
        return ["(nothing written)"]
    if len(rows) > 1:
        rows.append(_summary_row(f"total ({len(rows)} partitions)", total, ""))
    return _align([_SUMMARY_COLUMNS, *rows], right=(1, 2, 3, 4, 5))


def _summary_row(name: str, c: WriteCounts, published: str) -> tuple[str, ...]:
    files = c.delta_files + c.delete_delta_files + c.base_files
    size = c.delta_bytes + c.delete_delta_bytes + c.base_bytes
    return (name, f"{c.rows_inserted:,}", f"{c.rows_updated:,}", f"{c.rows_deleted:,}", f"{files:,}", f"{size:,}",
            published)


def _align(table: Iterable[tuple[str, ...]], right: tuple[int, ...]) -> list[str]:
    rows = list(table)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                      for i, cell in enumerate(r)).rstrip() for r in rows]
