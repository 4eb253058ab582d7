"""The Initiator: which tables and partitions need a compaction, decided from the write stats
recorded at commit — never by listing files — with Hive's thresholds (``docs/format.md``
§8.8): MAJOR when delta bytes / base bytes exceed ``delta.pct.threshold`` or when too many
aborted txns wrote there, MINOR when there are more deltas than ``delta.num.threshold`` (MAJOR
if there is no base yet) or when the oldest aborted write is old. Per-table overrides are the
``compactorthreshold.<hive key>`` properties; ``no_auto_compaction=true`` opts a table out; after
``failed.compacts.threshold`` consecutive failures a partition is left alone until a compaction
of it succeeds (e.g. a manual one) or ``failed.retry.time`` passes.
"""
from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from .catalog import Catalog
from .compaction import CompactionQueue
from .config import MetastoreConfig
from .db import Store
from .errors import InvalidInputError
from .models import NO_PARTITION, CompactionState, CompactionType, Operation, TableInfo, TxnState
from .schema import compaction_queue as cq
from .schema import completed_compactions as cc
from .schema import txn_components, txns, write_stats

_ACTIVE = (CompactionState.INITIATED, CompactionState.WORKING)
_ENDED = (CompactionState.SUCCEEDED, CompactionState.FAILED, CompactionState.REFUSED)
_Key = tuple[str, str, str]      # (database, table, partition)
COMPACTOR_THRESHOLD_PREFIX = "compactorthreshold."
NO_AUTO_COMPACTION = "no_auto_compaction"

INITIATED = "initiated"
ALREADY_QUEUED = "already queued"
SKIPPED = "skipped"
DID_NOT_INITIATE = "did not initiate"


def default_initiator_id() -> str:
    """``<host>-<pid>-<thread>``, like Hive's ``<host>-<threadId>``; also the compactor worker's
    default id (Hive's ``CQ_WORKER_ID``)."""
    return f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident() % 100000}"


@dataclass
class EntityStats:
    """What the write stats say about one table or partition since its last base."""

    base_write_id: int = 0
    base_bytes: int = 0
    deltas: int = 0           # delta + delete_delta directories above the base
    delta_bytes: int = 0
    aborted_txns: int = 0
    oldest_aborted_ms: int | None = None
    delete_deltas: int = 0    # of ``deltas``, the delete_delta directories
    base_rows: int = 0
    delta_rows: int = 0       # rows inserted, updated and deleted above the base

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class InitiatorDecision:
    """One table/partition the initiator looked at: what it decided and why."""

    table: str
    partition: str
    action: str                       # initiated | already queued | skipped | did not initiate
    type: CompactionType | None
    reason: str
    compaction_id: int | None = None
    stats: EntityStats = field(default_factory=EntityStats)

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "partition": self.partition or None, "action": self.action,
                "type": self.type.name if self.type else None, "reason": self.reason,
                "compaction_id": self.compaction_id, "stats": self.stats.to_dict()}


def _setting(info: TableInfo, hive_key: str, default: float) -> float:
    """A table's ``compactorthreshold.<key>`` override, else the metastore setting."""
    raw = info.properties.get(COMPACTOR_THRESHOLD_PREFIX + hive_key)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidInputError(f"table {info.qualified_name}: property {COMPACTOR_THRESHOLD_PREFIX + hive_key}="
                         f"{raw!r} is not a number") from None


def _no_auto_compaction(info: TableInfo) -> bool:
    return any(k.lower() == NO_AUTO_COMPACTION and str(v).strip().lower() == "true"
               for k, v in info.properties.items())


def delta_dirs(row: dict) -> tuple[int, int]:
    """The delta and delete delta directories one recorded write made (a statement writes at
    most one of each per partition)."""
    ins = 1 if (row["delta_files"] or row["delta_bytes"] or row["rows_inserted"]) else 0
    dels = 1 if (row["delete_delta_files"] or row["delete_delta_bytes"]) else 0
    return ins, dels


def _rows_of(row: dict) -> int:
    return row["rows_inserted"] + row["rows_updated"] + row["rows_deleted"]


def is_base(row: dict) -> bool:
    """A recorded write that made a base: an INSERT OVERWRITE (``base_files``) or a major
    compaction (a ``c`` stat with no delta output)."""
    if row["ws_operation_type"] is Operation.COMPACT:
        return not (row["delta_files"] or row["delete_delta_files"] or row["delta_bytes"])
    return row["base_files"] > 0


def entity_stats(rows: list[dict]) -> EntityStats:
    """Fold one entity's committed write stats (any order) into base / delta figures.

    A base comes from an INSERT OVERWRITE (``base_files``) or a major compaction (a ``c`` stat
    with no delta files); a minor compaction (a ``c`` stat with delta files) replaces every
    delta up to its write id by its own two directories."""
    st = EntityStats()
    rows = sorted(rows, key=lambda r: (r["ws_writeid"], r["ws_operation_type"] is Operation.COMPACT))
    for r in rows:
        if is_base(r) and r["ws_writeid"] >= st.base_write_id:
            st.base_write_id, st.base_bytes, st.base_rows = r["ws_writeid"], r["base_bytes"], r["rows_inserted"]
    minor_at = st.base_write_id
    above: list[dict] = []          # what is read on top of the base: the newest minor's output, then deltas
    for r in rows:
        if r["ws_operation_type"] is Operation.COMPACT and not is_base(r) and r["ws_writeid"] > st.base_write_id \
                and r["ws_writeid"] >= minor_at:
            minor_at, above = r["ws_writeid"], [r]
    above += [r for r in rows if r["ws_operation_type"] is not Operation.COMPACT and r["ws_writeid"] > minor_at
              and not r["base_files"]]
    for r in above:
        ins, dels = delta_dirs(r)
        st.deltas += ins + dels
        st.delete_deltas += dels
        st.delta_bytes += r["delta_bytes"] + r["delete_delta_bytes"]
        st.delta_rows += _rows_of(r)
    return st


class Initiator:
    """Looks at every full-ACID table's partitions and queues the compactions they need."""

    def __init__(self, store: Store, config: MetastoreConfig, catalog: Catalog, queue: CompactionQueue):
        self.store = store
        self.config = config
        self.catalog = catalog
        self.queue = queue

    def run(self, *, table: str | None = None, initiator_id: str | None = None) -> list[InitiatorDecision]:
        """One initiator cycle (optionally for one table); every entity looked at gets a
        decision with its reason, and queued requests carry that reason too."""
        initiator_id = initiator_id or default_initiator_id()
        tables = [self.catalog.get_table(table)] if table else self.catalog.list_tables()
        by_key = {(t.db, t.name): t for t in tables if t.is_transactional and not t.is_insert_only}
        stats_rows, aborts, active, history = self._load(by_key)
        keys = sorted(set(stats_rows) | {k for k in aborts if k[2] or not by_key[k[:2]].is_partitioned})
        now = self.store.clock()
        out = []
        for key in keys:
            info = by_key[key[:2]]
            st = entity_stats(stats_rows.get(key, []))
            n_aborted, oldest = aborts.get(key, (0, None))
            st.aborted_txns, st.oldest_aborted_ms = n_aborted, oldest
            out.append(self._decide(info, key[2], st, active.get(key), history.get(key, []), now, initiator_id))
        return out

    def _load(self, by_key: dict[tuple[str, str], TableInfo]) -> tuple[
            dict[_Key, list[dict]], dict[_Key, tuple[int, int]], dict[_Key, tuple[int, CompactionState]],
            dict[_Key, list[tuple[CompactionState, int]]]]:
        stats_rows: dict[_Key, list[dict]] = {}
        aborts: dict[_Key, tuple[int, int]] = {}
        active: dict[_Key, tuple[int, CompactionState]] = {}
        history: dict[_Key, list[tuple[CompactionState, int]]] = {}
        dbs = sorted({k[0] for k in by_key})
        if not dbs:
            return stats_rows, aborts, active, history
        with self.store.read() as conn:
            q = select(write_stats).where(write_stats.c.committed_at.is_not(None), write_stats.c.ws_database.in_(dbs))
            for r in conn.execute(q).mappings():
                k = (r["ws_database"], r["ws_table"], r["ws_partition"])
                if k[:2] in by_key:
                    stats_rows.setdefault(k, []).append(dict(r))
            q = (select(txn_components.c.tc_database, txn_components.c.tc_table, txn_components.c.tc_partition,
                        func.count(func.distinct(txns.c.txn_id)), func.min(txns.c.txn_started))
                 .join(txns, txns.c.txn_id == txn_components.c.tc_txnid)
                 .where(txns.c.txn_state == TxnState.ABORTED, txn_components.c.tc_operation_type != Operation.COMPACT,
                        txn_components.c.tc_database.in_(dbs))
                 .group_by(txn_components.c.tc_database, txn_components.c.tc_table, txn_components.c.tc_partition))
            for d, t, p, n, oldest in conn.execute(q):
                if (d, t) in by_key:
                    aborts[(d, t, p)] = (int(n), int(oldest))
            for cid, d, t, p, state in conn.execute(select(cq.c.cq_id, cq.c.cq_database, cq.c.cq_table,
                                                            cq.c.cq_partition, cq.c.cq_state)
                                                     .where(cq.c.cq_state.in_(_ACTIVE)).order_by(cq.c.cq_id)):
                active.setdefault((d, t, p), (cid, state))
            for d, t, p, state, end in conn.execute(
                    select(cc.c.cc_database, cc.c.cc_table, cc.c.cc_partition, cc.c.cc_state, cc.c.cc_end)
                    .where(cc.c.cc_state.in_(_ENDED), cc.c.cc_database.in_(dbs)).order_by(cc.c.cc_id)):
                history.setdefault((d, t, p), []).append((state, end or 0))
        return stats_rows, aborts, active, history

    def _decide(self, info: TableInfo, part: str, st: EntityStats, active: tuple[int, CompactionState] | None,
                history: list[tuple[CompactionState, int]], now: int, initiator_id: str) -> InitiatorDecision:
        name = info.qualified_name

        def decision(action: str, reason: str, ctype: CompactionType | None = None,
                     cid: int | None = None) -> InitiatorDecision:
            return InitiatorDecision(name, part, action, ctype, reason, cid, st)

        if _no_auto_compaction(info):
            return decision(SKIPPED, f"table property {NO_AUTO_COMPACTION}=true")
        if active is not None:
            return decision(ALREADY_QUEUED, f"compaction {active[0]} is already "
                                            f"{active[1].label}", cid=active[0])
        ctype, reason = self._determine_type(info, st, now)
        if ctype is None:
            return decision(SKIPPED, reason)
        limit = int(self.config.failed_compacts_threshold)
        last = history[-limit:] if limit > 0 else []
        if limit > 0 and len(last) == limit and all(s is CompactionState.FAILED for s, _ in last) and \
                now - last[-1][1] < self.config.failed_retry_time * 1000:
            why = (f"Compaction is not initiated since last {limit} consecutive compaction attempts failed "
                   f"(would have been {ctype.name}: {reason}); a successful manual compaction resets this")
            cid = self.queue.record_did_not_initiate(name, part or None, ctype, why, initiator_id)
            return decision(DID_NOT_INITIATE, why, ctype, cid)
        res = self.queue.enqueue(name, part or None, ctype, initiator_id=initiator_id, reason=reason)
        if not res.accepted:
            return decision(ALREADY_QUEUED, res.message, ctype, res.id)
        return decision(INITIATED, reason, ctype, res.id)

    def _determine_type(self, info: TableInfo, st: EntityStats,
                        now: int) -> tuple[CompactionType | None, str]:
        """Hive's ``determineCompactionType`` over recorded stats instead of a listing."""
        cfg = self.config
        abort_limit = _setting(info, "hive.compactor.abortedtxn.threshold", cfg.aborted_txn_threshold)
        abort_age = _setting(info, "hive.compactor.aborted.txn.time.threshold", cfg.aborted_txn_time_threshold)
        if st.aborted_txns > abort_limit:
            return CompactionType.MAJOR, (f"{st.aborted_txns} aborted transactions wrote here "
                                          f"(> hive.compactor.abortedtxn.threshold {abort_limit:g})")
        if st.oldest_aborted_ms is not None and abort_age > 0 and now - st.oldest_aborted_ms > abort_age * 1000:
            age_h = (now - st.oldest_aborted_ms) / 3_600_000
            return CompactionType.MINOR, (f"oldest aborted write here is {age_h:.1f} h old "
                                          f"(> hive.compactor.aborted.txn.time.threshold {abort_age:g} s)")
        pct = _setting(info, "hive.compactor.delta.pct.threshold", cfg.delta_pct_threshold)
        num = _setting(info, "hive.compactor.delta.num.threshold", cfg.delta_num_threshold)
        no_base = st.base_bytes == 0 and st.delta_bytes > 0
        if not no_base and st.base_bytes > 0 and st.delta_bytes / st.base_bytes > pct:
            return CompactionType.MAJOR, (f"delta bytes {st.delta_bytes} / base bytes {st.base_bytes} = "
                                          f"{st.delta_bytes / st.base_bytes:.3f} > delta.pct.threshold {pct:g}")
        if st.deltas > num:
            if no_base:
                return CompactionType.MAJOR, f"{st.deltas} deltas > delta.num.threshold {num:g} and no base yet"
            return CompactionType.MINOR, f"{st.deltas} deltas > delta.num.threshold {num:g}"
        return None, (f"no threshold met: {st.deltas} deltas (threshold {num:g}), delta/base bytes "
                      f"{st.delta_bytes}/{st.base_bytes} (threshold {pct:g}), {st.aborted_txns} aborted txns")


__all__ = [
    "NO_PARTITION",
    "EntityStats",
    "Initiator",
    "InitiatorDecision",
    "default_initiator_id",
    "entity_stats",
]
