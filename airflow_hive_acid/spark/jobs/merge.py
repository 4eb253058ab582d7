"""spark-submit entry point of the merge job: ``spark-submit merge.py --spec FILE``."""
from airflow_hive_acid.spark.runner import main

if __name__ == "__main__":
    main("merge")
