"""ACID health metrics from the metastore's records, as Hive's ``AcidMetricsService`` and delta
metrics report them: open and aborted transactions, the compaction queue by state and the age
of its oldest entries, and per table the deltas read on top of the base, the directories
waiting for the cleaner and the delta rows as a share of the base rows.

Everything comes from the records (transactions, the compaction queue, the write stats recorded
at commit), never from listing files, so a collection costs a few queries however big the
tables are. Names follow Hive's metric names (``MetricsConstants``), so dashboards built for
Hive read these; the warnings use the metastore's ``metastore.deltametrics.*`` and compactor
monitoring thresholds (``docs/operations.md``, metrics).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select

from .config import MetastoreConfig
from .initiator import delta_dirs, entity_stats, is_base
from .models import CompactionState, Operation, TxnState
from .schema import compaction_queue as cq
from .schema import completed_compactions as cc
from .schema import txn_to_write_id, txns, write_stats


@dataclass
class TableMetrics:
    """One table's layout as its write stats record it, summed over its partitions."""

    table: str
    partitions: int = 0
    active_deltas: int = 0          # delta_ and delete_delta_ directories read on top of the base
    active_delete_deltas: int = 0
    small_deltas: int = 0           # deltas smaller than deltametrics.delta.pct.threshold of the base
    obsolete_deltas: int = 0        # directories a compaction replaced that the cleaner has not removed
    base_rows: int = 0
    delta_rows: int = 0             # rows inserted, updated and deleted above the base

    @property
    def delta_pct(self) -> float | None:
        """Delta rows as a percentage of base rows (None without a base)."""
        return round(100.0 * self.delta_rows / self.base_rows, 3) if self.base_rows else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "delta_pct": self.delta_pct}


@dataclass
class AcidMetrics:
    """One collection. ``gauges()`` is the flat name -> value map emitted to StatsD/OpenTelemetry
    and Prometheus; ``warnings`` what crossed a threshold."""

    collected_at_ms: int
    open_txns: int = 0
    oldest_open_txn_id: int | None = None
    oldest_open_txn_age_s: float = 0.0
    aborted_txns: int = 0                   # aborted and not yet cleaned (their files may be there)
    oldest_aborted_txn_id: int | None = None
    oldest_aborted_txn_age_s: float = 0.0
    compactions: dict[str, int] = field(default_factory=dict)   # per state label
    oldest_initiated_age_s: float = 0.0
    oldest_working_age_s: float = 0.0
    oldest_ready_for_cleaning_age_s: float = 0.0
    tables: list[TableMetrics] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def gauges(self) -> dict[str, float]:
        g: dict[str, float] = {
            "num_open_transactions": self.open_txns,
            "oldest_open_non_repl_txn_age_in_sec": self.oldest_open_txn_age_s,
            "num_aborted_transactions": self.aborted_txns,
            "oldest_aborted_txn_age_in_sec": self.oldest_aborted_txn_age_s,
            "compaction_oldest_enqueue_age_in_sec": self.oldest_initiated_age_s,
            "compaction_oldest_working_age_in_sec": self.oldest_working_age_s,
            "compaction_oldest_cleaning_age_in_sec": self.oldest_ready_for_cleaning_age_s,
            "compaction_num_active_deltas": sum(t.active_deltas for t in self.tables),
            "compaction_num_small_deltas": sum(t.small_deltas for t in self.tables),
            "compaction_num_obsolete_deltas": sum(t.obsolete_deltas for t in self.tables),
        }
        for state in CompactionState:
            g["compaction_num_" + state.label.replace(" ", "_")] = self.compactions.get(state.label, 0)
        for t in self.tables:
            prefix = f"table.{t.table}."
            g[prefix + "active_deltas"] = t.active_deltas
            g[prefix + "active_delete_deltas"] = t.active_delete_deltas
            g[prefix + "obsolete_deltas"] = t.obsolete_deltas
            g[prefix + "delta_pct"] = t.delta_pct or 0.0
        return g

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tables"] = [t.to_dict() for t in self.tables]
        return d

    def to_prometheus(self, prefix: str = "hive_acid") -> str:
        """The text exposition format: one gauge per metric, per-table ones labelled ``table``."""
        lines: list[str] = []
        per_table: dict[str, list[tuple[str, float]]] = {}
        for name, value in self.gauges().items():
            if name.startswith("table."):
                table, metric = name[len("table."):].rsplit(".", 1)
                per_table.setdefault(metric, []).append((table, value))
                continue
            lines += [f"# TYPE {prefix}_{name} gauge", f"{prefix}_{name} {_num(value)}"]
        for metric, values in per_table.items():
            lines.append(f"# TYPE {prefix}_table_{metric} gauge")
            lines += [f'{prefix}_table_{metric}{{table="{table}"}} {_num(v)}' for table, v in values]
        return "\n".join(lines) + "\n"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


def collect_metrics(ms: Any) -> AcidMetrics:
    """Collect the ACID metrics of metastore ``ms`` (a :class:`~airflow_hive_acid.metastore.Metastore`),
    warning by its configured thresholds."""
    cfg = ms.config
    now = ms.store.clock()
    m = AcidMetrics(collected_at_ms=now)

    def age(ms_value: int | None) -> float:
        return round(max(0, now - ms_value) / 1000.0, 3) if ms_value else 0.0

    tables = {(t.db, t.name): t for t in ms.catalog.list_tables() if t.is_transactional and not t.is_insert_only}
    with ms.store.read() as conn:
        n, oldest_id, oldest = conn.execute(select(func.count(), func.min(txns.c.txn_id), func.min(txns.c.txn_started))
                                            .where(txns.c.txn_state == TxnState.OPEN)).one()
        m.open_txns, m.oldest_open_txn_id, m.oldest_open_txn_age_s = int(n), oldest_id, age(oldest)
        unswept = select(txn_to_write_id.c.t2w_txnid).where(txn_to_write_id.c.t2w_swept.is_(False))
        n, oldest_id, oldest = conn.execute(
            select(func.count(), func.min(txns.c.txn_id), func.min(txns.c.txn_started))
            .where(txns.c.txn_state == TxnState.ABORTED, txns.c.txn_id.in_(unswept))).one()
        m.aborted_txns, m.oldest_aborted_txn_id, m.oldest_aborted_txn_age_s = int(n), oldest_id, age(oldest)
        queued = conn.execute(select(cq.c.cq_state, func.count(), func.min(cq.c.cq_enqueue_time),
                                     func.min(cq.c.cq_start),
                                     func.min(func.coalesce(cq.c.cq_commit_time, cq.c.cq_enqueue_time)))
                              .group_by(cq.c.cq_state)).all()
        for state, count, enqueued, started, compacted in queued:
            m.compactions[state.label] = int(count)
            if state is CompactionState.INITIATED:
                m.oldest_initiated_age_s = age(enqueued)
            elif state is CompactionState.WORKING:
                m.oldest_working_age_s = age(started)
            elif state is CompactionState.READY_FOR_CLEANING:
                m.oldest_ready_for_cleaning_age_s = age(compacted)
        for state, count in conn.execute(select(cc.c.cc_state, func.count()).group_by(cc.c.cc_state)):
            m.compactions[state.label] = m.compactions.get(state.label, 0) + int(count)
        rows: dict[tuple[str, str, str], list[dict]] = {}
        for r in conn.execute(select(write_stats).where(write_stats.c.committed_at.is_not(None))).mappings():
            key = (r["ws_database"], r["ws_table"], r["ws_partition"])
            if key[:2] in tables:
                rows.setdefault(key, []).append(dict(r))
        cleaning: dict[tuple[str, str, str], list[int]] = {}
        for d, t, p, hwid in conn.execute(select(cq.c.cq_database, cq.c.cq_table, cq.c.cq_partition,
                                                 cq.c.cq_highest_write_id)
                                          .where(cq.c.cq_state == CompactionState.READY_FOR_CLEANING)):
            cleaning.setdefault((d, t, p), []).append(hwid or 0)
    by_table: dict[tuple[str, str], TableMetrics] = {k: TableMetrics(f"{k[0]}.{k[1]}") for k in sorted(tables)}
    for key, entity_rows in rows.items():
        tm = by_table[key[:2]]
        st = entity_stats(entity_rows)
        tm.partitions += 1
        tm.active_deltas += st.deltas
        tm.active_delete_deltas += st.delete_deltas
        tm.base_rows += st.base_rows
        tm.delta_rows += st.delta_rows
        tm.small_deltas += _small_deltas(entity_rows, st.base_write_id, st.base_bytes,
                                         cfg.deltametrics_delta_pct_threshold)
        tm.obsolete_deltas += sum(obsolete_dirs(entity_rows, hwid) for hwid in cleaning.get(key, []))
    m.tables = list(by_table.values())
    m.warnings = _warnings(m, cfg)
    return m


def _small_deltas(rows: list[dict], base_write_id: int, base_bytes: int, pct: float) -> int:
    """Deltas above the base whose bytes are below ``pct`` of the base's (Hive's small deltas)."""
    if not base_bytes:
        return 0
    return sum(1 for r in rows if r["ws_operation_type"] is not Operation.COMPACT and r["ws_writeid"] > base_write_id
               and not r["base_files"] and sum(delta_dirs(r))
               and (r["delta_bytes"] + r["delete_delta_bytes"]) < pct * base_bytes)


def obsolete_dirs(rows: list[dict], highest_write_id: int) -> int:
    """Directories a compaction up to ``highest_write_id`` made obsolete: the recorded writes
    at or below it and above the newest base under it, and that base when the compaction made a
    new one."""
    below = [r for r in rows if r["ws_writeid"] <= highest_write_id]
    compacted = [r for r in below
                 if r["ws_operation_type"] is Operation.COMPACT and r["ws_writeid"] == highest_write_id]
    major = any(is_base(r) for r in compacted)
    older_bases = [r["ws_writeid"] for r in below if is_base(r) and r not in compacted]
    floor = max(older_bases, default=0)
    dirs = sum(sum(delta_dirs(r)) for r in below if r["ws_writeid"] > floor and r not in compacted and not is_base(r))
    return dirs + (1 if major and older_bases else 0)


def _warnings(m: AcidMetrics, cfg: MetastoreConfig) -> list[str]:
    out = []
    if m.oldest_initiated_age_s > cfg.oldest_initiated_warning:
        out.append(f"the oldest initiated compaction has waited {m.oldest_initiated_age_s:.0f}s "
                   f"(threshold {cfg.oldest_initiated_warning:.0f}s): are workers running?")
    if m.aborted_txns and m.oldest_aborted_txn_age_s > cfg.oldest_aborted_warning:
        out.append(f"aborted transaction {m.oldest_aborted_txn_id} is {m.oldest_aborted_txn_age_s:.0f}s old and "
                   f"not cleaned (threshold {cfg.oldest_aborted_warning:.0f}s): is the cleaner running?")
    for t in m.tables:
        if t.active_deltas > cfg.deltametrics_delta_num_threshold:
            out.append(f"{t.table} has {t.active_deltas} active deltas (threshold "
                       f"{cfg.deltametrics_delta_num_threshold}): compact it")
        if t.obsolete_deltas > cfg.deltametrics_obsolete_delta_num_threshold:
            out.append(f"{t.table} has {t.obsolete_deltas} obsolete directories (threshold "
                       f"{cfg.deltametrics_obsolete_delta_num_threshold}): is the cleaner running?")
    return out
