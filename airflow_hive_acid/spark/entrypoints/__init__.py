"""The entry scripts ``spark-submit`` runs (``<job>.py --spec-b64 SPEC``: the job spec as base64
JSON), and the Python worker daemon module the jobs ask Spark to start (``daemon.py``).

spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the driver's and the workers'
path. Python compiles modules imported from a zip at every start (about 0.6 s for pyspark, once
in the driver and once in the worker daemon of every job). When SPARK_HOME is the pip-installed
pyspark, its installed modules are the same ones, compiled once: :func:`use_installed_pyspark`
puts them first.
"""
from __future__ import annotations

import importlib.util
import os
import sys


def use_installed_pyspark() -> None:
    """Import pyspark from the installed package when it is this job's SPARK_HOME (call before
    anything imports pyspark)."""
    if "pyspark" in sys.modules:
        return
    home = os.environ.get("SPARK_HOME")
    installed = None
    for entry in sys.path:
        if entry.endswith(".zip") or not os.path.isdir(os.path.join(entry or ".", "pyspark")):
            continue
        installed = os.path.abspath(entry or ".")
        break
    if installed is None or home is None:
        return
    if os.path.realpath(os.path.join(installed, "pyspark")) != os.path.realpath(home):
        return                              # another Spark: its zip must win
    sys.path.insert(0, installed)
    importlib.invalidate_caches()
