"""spark-submit entry point of the delete job: ``spark-submit delete.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("delete")
