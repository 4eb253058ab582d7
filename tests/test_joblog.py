"""What a reader sees of a job: Spark's INFO chatter dropped unless verbose, warnings and errors
kept whole, and the summary table of what was written."""
from airflow_hive_acid.jobs.joblog import OutputFilter, progress_line, summary_table
from airflow_hive_acid.jobs.manifest import Manifest, PartitionStats

SPARK_OUTPUT = """\
WARNING: Using incubator modules: jdk.incubator.vector
Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties
26/11/24 00:19:20 INFO SparkContext: Running Spark version 4.2.0
26/11/24 00:19:20 INFO ResourceUtils: ==============================================================
26/11/24 00:19:20 INFO SparkContext: Submitted application: hive-acid merge s.t
  continuation of an INFO record
26/11/24 00:19:21 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform
Setting Spark log level to "WARN".
hive-acid: merge write  1,000 rows  2.5 s
26/11/24 00:19:22 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/merge.py", line 3, in task
ValueError: partition value 'a/b' contains '/'
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)
26/11/24 00:19:23 INFO ShutdownHookManager: Deleting directory /tmp/spark-1
Traceback (most recent call last):
"""


def test_info_chatter_is_dropped_and_warnings_and_errors_kept_whole():
    f = OutputFilter()
    kept = [line for line in SPARK_OUTPUT.splitlines() if f.keep(line)]
    assert kept == [
        "26/11/24 00:19:21 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform",
        "hive-acid: merge write  1,000 rows  2.5 s",
        "26/11/24 00:19:22 ERROR Executor: Exception in task 0.0 in stage 1.0 (TID 1)",
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):",
        '  File "/x/merge.py", line 3, in task',
        "ValueError: partition value 'a/b' contains '/'",
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)",
        "Traceback (most recent call last):",
    ]
    verbose = OutputFilter(verbose=True)
    assert all(verbose.keep(line) for line in SPARK_OUTPUT.splitlines())


def test_brief_keeps_only_the_jobs_own_lines_and_verbose_overrides_it():
    """The CLI's terminal: stage lines only (the error comes as its last line); ``--verbose`` all."""
    lines = [*SPARK_OUTPUT.splitlines(), "hive-acid job failed: ValueError: partition value 'a/b' contains '/'"]
    brief = OutputFilter(brief=True)
    assert [line for line in lines if brief.keep(line)] == ["hive-acid: merge write  1,000 rows  2.5 s"]
    both = OutputFilter(verbose=True, brief=True)
    assert all(both.keep(line) for line in lines)


def test_summary_table_per_partition_with_a_total():
    parts = [PartitionStats(partition="ds=2024-01-01", rows_inserted=1500, rows_updated=20, delta_files=2,
                            delta_bytes=123456, delete_delta_files=1, delete_delta_bytes=789,
                            directories=["delta_0000005_0000005_0000", "delete_delta_0000005_0000005_0000"]),
             PartitionStats(partition="ds=2024-01-02", rows_deleted=3, delete_delta_files=1, delete_delta_bytes=300,
                            directories=["delete_delta_0000005_0000005_0000"])]
    lines = summary_table(parts)
    assert lines[0].split() == ["partition", "inserted", "updated", "deleted", "files", "bytes", "published"]
    assert lines[1].split()[:6] == ["ds=2024-01-01", "1,500", "20", "0", "3", "124,245"]
    assert lines[1].endswith("delta_0000005_0000005_0000, delete_delta_0000005_0000005_0000")
    assert lines[3].split() == ["total", "(2", "partitions)", "1,500", "20", "3", "4", "124,545"]
    assert lines[0].index("inserted") + 8 == lines[1].index("1,500") + 5 == lines[3].index("1,500") + 5, \
        "numbers are right-aligned under their header"
    assert summary_table([]) == ["(nothing written)"]
    assert summary_table([PartitionStats(rows_inserted=1)])[1].startswith("(table)")


def test_a_stage_prints_its_progress_line(capsys):
    m = Manifest(job="merge")
    with m.stage("write") as progress:
        progress["rows"] = 1234
    assert capsys.readouterr().out.startswith("hive-acid: merge write  1,234 rows  0.0 s")
    assert m.stages[0]["stage"] == "write" and m.stages[0]["rows"] == 1234
    assert progress_line("read", "scan", 1.25) == "hive-acid: read scan  1.2 s"
