"""The Python worker daemon of hive-acid jobs (``spark.python.daemon.module``): pyspark's own,
imported from the installed package instead of spark-submit's zip (see ``__init__``).

Every worker is forked from this daemon, so what the daemon imports before it forks, its
workers start with. The job modules, pyarrow and numpy - and pandas, which pyarrow imports on
its first conversion of a NumPy array - are imported here once, before the first fork, rather
than by each worker at its first task, all at once on every core (py-spy on a 20M-row load:
pandas alone took 0.6 s of each worker)."""
from airflow_hive_acid.spark.entrypoints import use_installed_pyspark

use_installed_pyspark()

from pyspark.daemon import manager  # noqa: E402  (after the path is set)

if __name__ == "__main__":
    import pandas  # noqa: F401, E402
    import pyarrow.compute  # noqa: F401, E402
    import pyarrow.orc  # noqa: F401, E402
    import pyarrow.parquet  # noqa: F401, E402

    import airflow_hive_acid.spark.runner  # noqa: F401, E402  (every job module)

    manager()
