"""The Python worker daemon of hive-acid jobs (``spark.python.daemon.module``): pyspark's own,
imported from the installed package instead of spark-submit's zip (see ``__init__``)."""
from airflow_hive_acid.spark.entrypoints import use_installed_pyspark

use_installed_pyspark()

from pyspark.daemon import manager  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    manager()
