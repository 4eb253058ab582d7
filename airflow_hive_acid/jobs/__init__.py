"""The job contract, without pyspark: what a job is asked (``spec``), what it answers
(``manifest``), and how it is run (``launcher``). The CLI, the statement runner, the compactor
and the Airflow layer build requests and read manifests here; only ``spark-submit`` reaches
``airflow_hive_acid.spark`` (and ``datasource``), through the entry scripts in ``spark/entrypoints``
(and ``datasource/entrypoints``)."""
from ..errors import JobFailed
from .launcher import LocalSubmitter, Submit, run_job
from .manifest import CleanOutput, CompactOutput, IngestOutput, Manifest, PartitionStats, ReadOutput
from .spec import (
    Clean,
    Compact,
    Delete,
    Ingest,
    Insert,
    JobSpec,
    JobSpecError,
    Merge,
    MergeClause,
    Read,
    Request,
    SnapshotSpec,
    SourceSpec,
    TableSpec,
    Update,
    parse_assignments,
    parse_merge_clause,
)

__all__ = ["JobFailed", "LocalSubmitter", "Submit", "run_job", "CleanOutput", "CompactOutput", "IngestOutput",
           "Manifest", "PartitionStats", "ReadOutput", "Clean", "Compact", "Delete", "Ingest", "Insert", "JobSpec",
           "JobSpecError", "Merge", "MergeClause", "Read", "Request", "SnapshotSpec", "SourceSpec", "TableSpec",
           "Update", "parse_assignments", "parse_merge_clause"]
