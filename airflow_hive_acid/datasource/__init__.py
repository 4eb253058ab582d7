"""``hive_acid``: the tables as a PySpark data source (Spark 4's Python Data Source API).

::

    from airflow_hive_acid.datasource import register
    register(spark)
    df = spark.read.format("hive_acid").option("metastore", url).load("sales.orders")
    df.write.format("hive_acid").option("metastore", url).mode("append").save("sales.orders")

This package sits above ``metastore/`` and ``spark/``: its driver side owns the transactions of
the reads and writes it plans, its executor side only reads and writes files (docs/architecture.md).
"""
from __future__ import annotations

from .source import HiveAcidDataSource, register

__all__ = ["HiveAcidDataSource", "register"]
