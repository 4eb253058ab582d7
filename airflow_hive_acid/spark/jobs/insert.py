"""spark-submit entry point of the insert job: ``spark-submit insert.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("insert")
