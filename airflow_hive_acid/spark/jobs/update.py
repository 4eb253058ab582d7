"""spark-submit entry point of the update job: ``spark-submit update.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("update")
