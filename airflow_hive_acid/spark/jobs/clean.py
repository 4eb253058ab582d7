"""spark-submit entry point of the clean job: ``spark-submit clean.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("clean")
