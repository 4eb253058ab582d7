"""spark-submit entry point of the streaming ingest job: ``spark-submit ingest.py --spec-b64 SPEC``."""
from airflow_hive_acid.spark.entrypoints import use_installed_pyspark

use_installed_pyspark()

from airflow_hive_acid.datasource.ingest import run_ingest  # noqa: E402  (after the path is set)
from airflow_hive_acid.spark.runner import main  # noqa: E402

if __name__ == "__main__":
    main("ingest", run_ingest)
