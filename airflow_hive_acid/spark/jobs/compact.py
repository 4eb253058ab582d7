"""spark-submit entry point of the compact job: ``spark-submit compact.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("compact")
