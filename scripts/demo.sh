#!/usr/bin/env bash
# The embedded-default walk-through: an SQLite metastore and a local warehouse under ./.hive-acid.
set -euo pipefail
export HIVE_ACID_HOME="${HIVE_ACID_HOME:-$PWD/.hive-acid/demo}"
rm -rf "$HIVE_ACID_HOME"
say() { printf '\n$ %s\n' "$*"; "$@"; }

say hive-acid init
say hive-acid create-table sales.orders --columns "id bigint, customer string, amount decimal(10,2)" \
    --partitioned-by "ds string" --bucketed-by id --buckets 4
say hive-acid describe sales.orders
txn=$(hive-acid --json txn open | python3 -c 'import json,sys; print(json.load(sys.stdin)["txn_id"])')
echo "opened transaction $txn"
say hive-acid --json txn allocate "$txn" sales.orders
say hive-acid --json snapshot sales.orders
say hive-acid txn commit "$txn"
txn2=$(hive-acid --json txn open | python3 -c 'import json,sys; print(json.load(sys.stdin)["txn_id"])')
say hive-acid --json txn allocate "$txn2" sales.orders
say hive-acid txn abort "$txn2" --reason "demo: bad input file"
say hive-acid --json snapshot sales.orders
say hive-acid show transactions
say hive-acid show compactions
