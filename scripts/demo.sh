#!/usr/bin/env bash
# `make demo`: the quickstart DAG under `airflow dags test` on the embedded defaults — an SQLite
# metastore and a warehouse folder under ./.hive-acid/demo, Airflow on SQLite under
# ./.hive-acid/airflow, Spark local[*] from the pip-installed pyspark — then the result.
set -euo pipefail
root="$PWD/.hive-acid"
export HIVE_ACID_HOME="${HIVE_ACID_HOME:-$root/demo}"
export AIRFLOW_HOME="${AIRFLOW_HOME:-$root/airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
unset HIVE_ACID_METASTORE
mkdir -p "$HIVE_ACID_HOME" "$AIRFLOW_HOME"

echo "== airflow db migrate (Airflow's own metadata: $AIRFLOW_HOME)"
airflow db migrate > "$AIRFLOW_HOME/migrate.log" 2>&1 || { tail -50 "$AIRFLOW_HOME/migrate.log"; exit 1; }

echo "== airflow dags test hive_acid_quickstart (log: $AIRFLOW_HOME/quickstart.log)"
if ! airflow dags test hive_acid_quickstart > "$AIRFLOW_HOME/quickstart.log" 2>&1 \
        || grep -q "state=failed" "$AIRFLOW_HOME/quickstart.log"; then
    tail -80 "$AIRFLOW_HOME/quickstart.log"; exit 1
fi
grep -E "\[DAG TEST\] (starting|end) task|DagRun Finished" "$AIRFLOW_HOME/quickstart.log" \
    | sed -E 's/^[^ ]+ \[[a-z ]+\] //; s/ \[airflow[^]]*\].*//; s/ loc=.*//'

echo
echo "== hive-acid read demo.customers   (metastore: $HIVE_ACID_HOME/metastore.db)"
hive-acid read demo.customers --order-by id
echo
echo "== hive-acid show compactions"
hive-acid show compactions
echo
echo "== hive-acid dirs demo.customers"
hive-acid dirs demo.customers
