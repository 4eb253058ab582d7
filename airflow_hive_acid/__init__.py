"""airflow-hive-acid: Hive ACID v2 tables for Spark pipelines, run from Apache Airflow.

Layers (imports point down only; ``docs/architecture.md``): ``acid`` (the on-disk format, pure
Python + pyarrow), ``metastore`` (catalog + transaction manager), ``jobs`` (the job contract:
requests, manifests, launcher; no pyspark), ``statements`` / ``compactor`` (transactions around
jobs), the Airflow hooks / operators / sensors / triggers and the CLI; ``spark`` (the jobs
themselves) is reached only through spark-submit. This module must not import Airflow: Airflow
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
        "integrations": [{
            "integration-name": "Hive ACID",
            "external-doc-url": "https://cwiki.apache.org/confluence/display/Hive/Hive+Transactions",
            "tags": ["software"],
        }],
        "hooks": [{
            "integration-name": "Hive ACID",
            "python-modules": ["airflow_hive_acid.hooks.metastore", "airflow_hive_acid.hooks.spark"],
        }],
        "operators": [{
            "integration-name": "Hive ACID",
            "python-modules": ["airflow_hive_acid.operators.transaction", "airflow_hive_acid.operators.dml",
                               "airflow_hive_acid.operators.table", "airflow_hive_acid.operators.maintenance",
                               "airflow_hive_acid.operators.streaming"],
        }],
        "sensors": [{
            "integration-name": "Hive ACID",
            "python-modules": ["airflow_hive_acid.sensors.compaction"],
        }],
        "triggers": [{
            "integration-name": "Hive ACID",
            "python-modules": ["airflow_hive_acid.triggers.compaction"],
        }],
        "connection-types": [{
            "connection-type": "hive_acid",
            "hook-class-name": "airflow_hive_acid.hooks.metastore.AcidMetastoreHook",
            "hook-name": "Hive ACID metastore",
            "conn-fields": {
                "metastore_url": {
                    "label": "Metastore URL",
                    "description": "sqlite:///path/metastore.db or postgresql://host:5432/db",
                    "schema": {"type": ["string", "null"]},
                },
                "warehouse": {
                    "label": "Warehouse root",
                    "description": "Folder (or URI Spark can reach) under which new tables are created",
                    "schema": {"type": ["string", "null"]},
                },
                "txn_timeout": {
                    "label": "Transaction timeout (s)",
                    "description": "hive.txn.timeout: a txn silent this long is aborted",
                    "schema": {"type": ["integer", "null"], "default": 300},
                },
                "heartbeat_interval": {
                    "label": "Heartbeat interval (s)",
                    "description": "Default: txn timeout / 3",
                    "schema": {"type": ["number", "null"]},
                },
            },
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "password", "port", "extra"],
                "relabeling": {},
                "placeholders": {},
            },
        }],
        "asset-uris": [{
            "schemes": ["hive-acid"],
            "handler": "airflow_hive_acid.assets.sanitize_uri",
            "to_openlineage_converter": "airflow_hive_acid.assets.convert_asset_to_openlineage",
        }],
    }
