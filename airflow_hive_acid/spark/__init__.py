"""The Spark side: snapshot scans, the delta writer, DML planning, compaction, and the job entry
scripts (``entrypoints/``) given to ``spark-submit``. Only the ``hive_acid`` data source
(:mod:`airflow_hive_acid.datasource`) imports it: the job contract it implements lives in
:mod:`airflow_hive_acid.jobs`.
"""
