"""The metastore's tables (SQLAlchemy Core), named and shaped after Hive's TXN schema.

Column names follow Hive (``TXNS``, ``TXN_COMPONENTS``, ``HIVE_LOCKS``, ``COMPACTION_QUEUE``...)
lower-cased, so a Hive operator recognises them. "No partition" is stored as ``''`` rather than
NULL so that equality and unique keys need no special cases.
"""
from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Sequence,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.types import TypeDecorator

from .models import CompactionState, CompactionType, LockState, LockType, Operation, TxnState

SCHEMA_VERSION = 1
metadata = MetaData()


class Code(TypeDecorator):
    """A state or kind stored as Hive's one-letter code (``TXN_STATE``, ``CQ_STATE``, ...):
    statements bind the enum member and rows come back as members, so no code is spelled
    outside ``models.py``. Binding anything but a member is a programming error."""

    impl = String(1)
    cache_ok = True

    def __init__(self, enum_type: type[enum.Enum]):
        super().__init__()
        self.enum_type = enum_type

    def process_bind_param(self, value: Any, dialect: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, self.enum_type):
            raise TypeError(f"expected a {self.enum_type.__name__}, got {value!r}")
        return value.value

    def process_result_value(self, value: Any, dialect: Any) -> enum.Enum | None:
        return None if value is None else self.enum_type(value)

NAME = String(128)
PART = String(767)

config = Table(
    "ha_config", metadata,
    Column("key", String(128), primary_key=True),
    Column("value", Text, nullable=False),
)

dbs = Table(
    "dbs", metadata,
    Column("name", NAME, primary_key=True),
    Column("location", Text, nullable=False),
    Column("created_at", BigInteger, nullable=False),
)

tbls = Table(
    "tbls", metadata,
    Column("db", NAME, nullable=False),
    Column("name", NAME, nullable=False),
    Column("location", Text, nullable=False),
    Column("columns", Text, nullable=False),            # "id bigint, name string"
    Column("partition_columns", Text, nullable=False),  # "" or "ds string"
    Column("bucket_columns", Text, nullable=False),     # "" or "id"
    Column("num_buckets", Integer, nullable=False),     # 0 when not bucketed
    Column("properties", Text, nullable=False),         # JSON object
    Column("created_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("db", "name"),
)

partitions = Table(
    "partitions", metadata,
    Column("db", NAME, nullable=False),
    Column("tbl", NAME, nullable=False),
    Column("part_name", PART, nullable=False),          # "ds=2024-01-01/hr=03"
    Column("created_at", BigInteger, nullable=False),
    Column("created_by_txn", BigInteger, nullable=False),
    PrimaryKeyConstraint("db", "tbl", "part_name"),
)

# -- transactions ----------------------------------------------------------------------------
# Txn ids: on SQLite a counter row (writers are serialised anyway); on PostgreSQL a sequence, so
# opening a txn takes no row lock. Snapshots on PostgreSQL lock ``txns`` in SHARE mode, which
# waits out in-flight opens and commits, so a txn id below the high watermark is never unseen.
next_txn_id = Table(
    "next_txn_id", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),  # always 1
    Column("ntxn_next", BigInteger, nullable=False),
)
txn_id_seq = Sequence("txn_id_seq", start=1, metadata=metadata)

txns = Table(
    "txns", metadata,
    Column("txn_id", BigInteger, primary_key=True, autoincrement=False),
    Column("txn_state", Code(TxnState), nullable=False),
    Column("txn_started", BigInteger, nullable=False),  # epoch ms
    Column("txn_last_heartbeat", BigInteger, nullable=False),
    Column("txn_heartbeat_count", BigInteger, nullable=False, default=0),
    Column("txn_ended", BigInteger),
    Column("txn_user", String(128), nullable=False),
    Column("txn_host", String(128), nullable=False),
    Column("txn_agent_info", String(256), nullable=False),
    Column("txn_meta_info", Text),                       # abort reason
    Column("txn_type", Integer, nullable=False),         # 0 default, 3 compaction
)
Index("txns_state_idx", txns.c.txn_state)
Index("txns_agent_idx", txns.c.txn_agent_info)   # a retried task finds its earlier attempt

next_write_id = Table(
    "next_write_id", metadata,
    Column("nwi_database", NAME, nullable=False),
    Column("nwi_table", NAME, nullable=False),
    Column("nwi_next", BigInteger, nullable=False),
    PrimaryKeyConstraint("nwi_database", "nwi_table"),
)

txn_to_write_id = Table(
    "txn_to_write_id", metadata,
    Column("t2w_txnid", BigInteger, nullable=False),
    Column("t2w_database", NAME, nullable=False),
    Column("t2w_table", NAME, nullable=False),
    Column("t2w_writeid", BigInteger, nullable=False),
    # an aborted txn's files in this table are gone (the cleaner swept every partition for it)
    Column("t2w_swept", Boolean, nullable=False, default=False, server_default=false()),
    PrimaryKeyConstraint("t2w_database", "t2w_table", "t2w_writeid"),
    UniqueConstraint("t2w_database", "t2w_table", "t2w_txnid", name="t2w_txn_uq"),
)
Index("t2w_txnid_idx", txn_to_write_id.c.t2w_txnid)

txn_components = Table(  # what open and aborted txns wrote (kept after abort for the cleaner)
    "txn_components", metadata,
    Column("tc_txnid", BigInteger, nullable=False),
    Column("tc_database", NAME, nullable=False),
    Column("tc_table", NAME, nullable=False),
    Column("tc_partition", PART, nullable=False),
    Column("tc_operation_type", Code(Operation), nullable=False),
    Column("tc_writeid", BigInteger),
)
Index("tc_txnid_idx", txn_components.c.tc_txnid)
Index("tc_entity_idx", txn_components.c.tc_database, txn_components.c.tc_table)

completed_txn_components = Table(
    "completed_txn_components", metadata,
    Column("ctc_txnid", BigInteger, nullable=False),
    Column("ctc_database", NAME, nullable=False),
    Column("ctc_table", NAME, nullable=False),
    Column("ctc_partition", PART, nullable=False),
    Column("ctc_timestamp", BigInteger, nullable=False),
    Column("ctc_writeid", BigInteger, nullable=False),
    Column("ctc_update_delete", String(1), nullable=False),   # Y / N
)
Index("ctc_entity_idx", completed_txn_components.c.ctc_database, completed_txn_components.c.ctc_table,
      completed_txn_components.c.ctc_partition)

write_set = Table(  # committed update/delete footprints for write-write conflict detection
    "write_set", metadata,
    Column("ws_database", NAME, nullable=False),
    Column("ws_table", NAME, nullable=False),
    Column("ws_partition", PART, nullable=False),
    Column("ws_txnid", BigInteger, nullable=False),
    Column("ws_commit_id", BigInteger, nullable=False),
    Column("ws_operation_type", Code(Operation), nullable=False),
)
Index("ws_entity_idx", write_set.c.ws_database, write_set.c.ws_table, write_set.c.ws_partition)

write_stats = Table(  # per committed write: what it added, so the initiator never lists files
    "write_stats", metadata,
    Column("ws_database", NAME, nullable=False),
    Column("ws_table", NAME, nullable=False),
    Column("ws_partition", PART, nullable=False),
    Column("ws_writeid", BigInteger, nullable=False),
    Column("ws_txnid", BigInteger, nullable=False),
    Column("ws_operation_type", Code(Operation), nullable=False),   # or COMPACT: compactor output
    Column("rows_inserted", BigInteger, nullable=False),
    Column("rows_updated", BigInteger, nullable=False),
    Column("rows_deleted", BigInteger, nullable=False),
    Column("delta_files", Integer, nullable=False),
    Column("delta_bytes", BigInteger, nullable=False),
    Column("delete_delta_files", Integer, nullable=False),
    Column("delete_delta_bytes", BigInteger, nullable=False),
    Column("base_files", Integer, nullable=False),
    Column("base_bytes", BigInteger, nullable=False),
    Column("committed_at", BigInteger),   # NULL while the txn is open (a statement recorded it)
)
Index("wstats_entity_idx", write_stats.c.ws_database, write_stats.c.ws_table, write_stats.c.ws_partition,
      write_stats.c.ws_writeid)

txn_statements = Table(  # statement ids within a txn, stable for a caller's key (task retries)
    "txn_statements", metadata,
    Column("ts_txnid", BigInteger, nullable=False),
    Column("ts_database", NAME, nullable=False),
    Column("ts_table", NAME, nullable=False),
    Column("ts_key", String(256), nullable=False),
    Column("ts_stmt_id", Integer, nullable=False),
    Column("ts_snapshot", Text),      # the snapshot the statement read at (JSON), for a retried task's XCom
    PrimaryKeyConstraint("ts_txnid", "ts_database", "ts_table", "ts_key"),
    UniqueConstraint("ts_txnid", "ts_database", "ts_table", "ts_stmt_id", name="ts_stmt_uq"),
)

stream_batches = Table(  # micro-batches of streaming queries committed into a table: exactly once
    "stream_batches", metadata,
    Column("sb_database", NAME, nullable=False),
    Column("sb_table", NAME, nullable=False),
    Column("sb_query_id", String(64), nullable=False),   # the query id Spark keeps in the checkpoint
    Column("sb_batch_id", BigInteger, nullable=False),
    Column("sb_txnid", BigInteger, nullable=False),
    Column("sb_writeid", BigInteger, nullable=False),
    Column("sb_rows", BigInteger, nullable=False),
    Column("sb_committed_at", BigInteger, nullable=False),
    PrimaryKeyConstraint("sb_database", "sb_table", "sb_query_id", "sb_batch_id"),
)

# -- locks -----------------------------------------------------------------------------------
next_lock_id = Table(
    "next_lock_id", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("nl_next", BigInteger, nullable=False),
)

hive_locks = Table(
    "hive_locks", metadata,
    Column("hl_lock_ext_id", BigInteger, nullable=False),
    Column("hl_lock_int_id", BigInteger, nullable=False),
    Column("hl_txnid", BigInteger, nullable=False),        # 0: not in a transaction
    Column("hl_db", NAME, nullable=False),
    Column("hl_table", NAME, nullable=False),              # '' for a database lock
    Column("hl_partition", PART, nullable=False),          # '' for a table lock
    Column("hl_lock_state", Code(LockState), nullable=False),
    Column("hl_lock_type", Code(LockType), nullable=False),
    Column("hl_last_heartbeat", BigInteger, nullable=False),
    Column("hl_acquired_at", BigInteger),
    Column("hl_user", String(128), nullable=False),
    Column("hl_host", String(128), nullable=False),
    Column("hl_agent_info", String(256), nullable=False),
    Column("hl_blockedby_ext_id", BigInteger),
    Column("hl_blockedby_int_id", BigInteger),
    PrimaryKeyConstraint("hl_lock_ext_id", "hl_lock_int_id"),
)
Index("hl_txnid_idx", hive_locks.c.hl_txnid)
Index("hl_db_idx", hive_locks.c.hl_db)

# -- compaction ------------------------------------------------------------------------------
def _compaction_columns(p: str) -> list[Column]:
    return [
        Column(f"{p}_database", NAME, nullable=False),
        Column(f"{p}_table", NAME, nullable=False),
        Column(f"{p}_partition", PART, nullable=False),
        Column(f"{p}_state", Code(CompactionState), nullable=False),
        Column(f"{p}_type", Code(CompactionType), nullable=False),
        Column(f"{p}_tblproperties", Text),
        Column(f"{p}_worker_id", String(128)),
        Column(f"{p}_enqueue_time", BigInteger, nullable=False),
        Column(f"{p}_start", BigInteger),
        Column(f"{p}_run_as", String(128)),
        Column(f"{p}_highest_write_id", BigInteger),
        Column(f"{p}_meta_info", Text),                        # why it was initiated
        Column(f"{p}_hadoop_job_id", String(128)),             # the Spark application id
        Column(f"{p}_error_message", Text),
        Column(f"{p}_next_txn_id", BigInteger),
        Column(f"{p}_txn_id", BigInteger),
        Column(f"{p}_commit_time", BigInteger),
        Column(f"{p}_initiator_id", String(128)),
        Column(f"{p}_initiator_version", String(128)),
        Column(f"{p}_worker_version", String(128)),
        Column(f"{p}_cleaner_start", BigInteger),
        Column(f"{p}_retry_retention", BigInteger, nullable=False, default=0),
        Column(f"{p}_pool_name", String(128)),
        Column(f"{p}_manual", Boolean, nullable=False, default=False),
    ]


compaction_queue = Table(
    "compaction_queue", metadata,
    Column("cq_id", BigInteger, primary_key=True, autoincrement=False),
    *_compaction_columns("cq"),
)
Index("cq_entity_idx", compaction_queue.c.cq_database, compaction_queue.c.cq_table, compaction_queue.c.cq_partition)
Index("cq_state_idx", compaction_queue.c.cq_state)

completed_compactions = Table(
    "completed_compactions", metadata,
    Column("cc_id", BigInteger, primary_key=True, autoincrement=False),
    *_compaction_columns("cc"),
    Column("cc_end", BigInteger),
)
Index("cc_entity_idx", completed_compactions.c.cc_database, completed_compactions.c.cc_table,
      completed_compactions.c.cc_partition)

next_compaction_queue_id = Table(
    "next_compaction_queue_id", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("ncq_next", BigInteger, nullable=False),
)
