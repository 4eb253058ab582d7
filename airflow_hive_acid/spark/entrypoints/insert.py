"""spark-submit entry point of the insert job: ``spark-submit insert.py --spec-b64 SPEC``."""
from airflow_hive_acid.spark.entrypoints import use_installed_pyspark

use_installed_pyspark()

from airflow_hive_acid.spark.runner import main  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    main("insert")
