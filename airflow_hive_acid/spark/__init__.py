"""The Spark side: snapshot scans, the delta writer, DML planning, compaction, and the job entry
scripts (``jobs/``) given to ``spark-submit``.

This package's ``__init__`` and ``protocol`` / ``launcher`` modules do not import pyspark: the
Airflow layer and the CLI use them to build job specs and run jobs.
"""
