"""Entry scripts of the jobs whose driver owns transactions through the ``hive_acid`` data
source (``<job>.py --spec-b64 SPEC``, found by ``jobs.launcher.job_script``)."""
