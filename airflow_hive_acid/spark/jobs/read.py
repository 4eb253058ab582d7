"""spark-submit entry point of the read job: ``spark-submit read.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("read")
