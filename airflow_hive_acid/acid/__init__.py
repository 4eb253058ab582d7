"""The Hive ACID v2 format in pure Python + pyarrow: names, snapshots, AcidState, bucketing,
the ACID ORC schema. Knows nothing of Spark, databases or Airflow."""
