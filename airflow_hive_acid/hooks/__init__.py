"""Airflow hooks: the metastore from a ``hive_acid`` connection, and Spark jobs via SparkSubmitHook."""
from .metastore import AcidMetastoreHook
from .spark import AcidSparkHook

__all__ = ["AcidMetastoreHook", "AcidSparkHook"]
