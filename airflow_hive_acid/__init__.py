"""airflow-hive-acid: Hive ACID v2 tables for Spark pipelines, run from Apache Airflow.

Layers (imports point down only): ``acid`` (the on-disk format, pure Python + pyarrow),
``metastore`` (catalog + transaction manager), ``spark`` (jobs run through spark-submit), and
the Airflow hooks / operators / sensors / triggers. This module must not import Airflow: Airflow
imports it while it loads its providers.
"""
__version__ = "0.1.0"


def get_provider_info() -> dict:
    """What ``airflow providers list`` shows; a literal so Airflow can read it cheaply."""
    return {
        "package-name": "airflow-hive-acid",
        "name": "Hive ACID",
        "description": "Hive ACID v2 transactional tables for Spark pipelines: transactions, snapshots, "
                       "INSERT/UPDATE/DELETE/MERGE, compaction and cleaning.",
        "versions": [__version__],
    }
