"""Airflow operators for Hive ACID tables."""
from .dml import (
    AcidDeleteOperator,
    AcidDmlOperator,
    AcidInsertOperator,
    AcidMergeOperator,
    AcidUpdateOperator,
)
from .maintenance import (
    AcidCleanerOperator,
    AcidCompactionWorkerOperator,
    AcidCompactOperator,
    AcidHousekeeperOperator,
    AcidInitiatorOperator,
)
from .streaming import AcidStreamingIngestOperator
from .table import AcidCreateTableOperator, AcidReadOperator
from .transaction import (
    AcidAbortTransactionOperator,
    AcidBeginTransactionOperator,
    AcidCommitTransactionOperator,
)

__all__ = [
    "AcidAbortTransactionOperator", "AcidBeginTransactionOperator", "AcidCleanerOperator",
    "AcidCommitTransactionOperator", "AcidCompactOperator", "AcidCompactionWorkerOperator",
    "AcidCreateTableOperator", "AcidDeleteOperator", "AcidDmlOperator", "AcidHousekeeperOperator",
    "AcidInitiatorOperator", "AcidInsertOperator", "AcidMergeOperator", "AcidReadOperator",
    "AcidStreamingIngestOperator", "AcidUpdateOperator",
]
