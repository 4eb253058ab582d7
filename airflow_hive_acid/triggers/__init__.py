"""Triggers (run by the triggerer, or in-process by ``airflow dags test``)."""
from .compaction import CompactionTrigger

__all__ = ["CompactionTrigger"]
