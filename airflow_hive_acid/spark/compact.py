"""Compaction and cleaning as Spark jobs (``docs/format.md`` §4.7, §8.7, §8.9).

Compaction of one partition (or an unpartitioned table): the driver lists it once and lets
AcidState choose, with the compactor's ValidWriteIdList (everything below the lowest open
write id, aborted ids excluded), what to compact; each bucket is one Spark task that reads its
files with the project's reader and writes one bucket file:

* MAJOR -> ``base_<hwm>_v<txn>``: rows with deletes applied and aborted rows dropped, every
  row keeping its ROW__ID (Hive's query-based major compactor does the same).
* MINOR -> ``delta_<min>_<hwm>_v<txn>`` + ``delete_delta_<min>_<hwm>_v<txn>``: the insert and
  delete events of the deltas copied as they are (aborted ones dropped), deletes not applied.

Output goes to the table's hidden staging directory and is then moved into place; the
``_v<txn>`` suffix keeps it invisible to every reader until the compactor's txn commits, so a
crash at any point leaves nothing a reader would pick (the cleaner removes it).

Cleaning: list the partitions again, choose with the cleaner's snapshot, delete what is
obsolete or aborted up to the compaction's highest write id (or, for aborted writes, only
directories of aborted write ids and staging of aborted txns), then list once more and report
whatever is still there, so the caller only calls a compaction succeeded when files are gone.
"""
from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark import SparkContext

from ..acid import fs as afs
from ..acid.errors import AcidError
from ..acid.names import NameError_, ParsedBase, base_name, bucket_file_name, delta_name, parse_dir
from ..acid.reader import (
    ROW_ID_COLUMN,
    BucketGroup,
    DataFile,
    ReadRequest,
    TimestampRangeError,
    bucket_groups,
    check_acid_file,
    open_orc,
    read_bucket_group,
    valid_write_id_mask,
)
from ..acid.schema import (
    BUCKET,
    CURRENT_TRANSACTION,
    DELETE_OPERATION,
    INSERT_OPERATION,
    ORIGINAL_TRANSACTION,
    ROW_ID,
    row_id_type,
)
from ..acid.state import AcidDirectory, get_acid_state
from ..acid.writeids import (
    ValidCleanerWriteIdList,
    ValidCompactorWriteIdList,
    ValidTxnList,
    ValidWriteIdList,
)
from ..acid.writer import compacted_events, write_acid_file
from ..jobs.manifest import CleanOutput, CompactOutput, PartitionStats
from ..jobs.spec import Clean, Compact, JobSpec, JobSpecError
from .scan import Table
from .tasks import run_tasks

MAJOR, MINOR = "major", "minor"


class CompactionJobError(AcidError):
    """A compaction or clean that cannot run as asked."""


# -- compaction ------------------------------------------------------------------------------
def enough_to_compact(kind: str, state: AcidDirectory) -> str | None:
    """Hive's ``isEnoughToCompact``: None if there is work, else why not."""
    n = len(state.deltas) + len(state.delete_deltas)
    if kind == MAJOR:
        if state.original_files or n + (1 if state.base else 0) > 1:
            return None
        return f"major compaction needs more than one directory (base: {state.base is not None}, deltas: {n})"
    if n > 1 and not (len(state.deltas) == 1 and len(state.delete_deltas) == 1):
        return None
    return f"minor compaction needs more than one delta besides a single delta/delete-delta pair (deltas: {n})"


def run_compaction(sc: SparkContext, spec: JobSpec, r: Compact) -> tuple[list[PartitionStats], CompactOutput]:
    """Compact one partition as ``r`` says; ``spec.txn_id`` is the compactor's txn,
    ``spec.write_id`` the highest write id to compact."""
    kind = r.type
    table = Table(spec.table)
    part = r.partition
    txn = spec.txn_id
    wl = ValidCompactorWriteIdList.parse(spec.snapshot.valid_write_ids)
    txns = ValidTxnList.parse(spec.snapshot.valid_txns)
    hwm = wl.high_watermark
    if txn <= 0 or hwm != spec.write_id:
        raise JobSpecError(f"compaction spec needs the compactor txn and highest write id {hwm}, got "
                           f"txn {txn}, write id {spec.write_id}")
    fs, root = table.fs_and_root
    listing = afs.list_table(fs, root, table.spec.partition_names, [part] if part else None)
    state = get_acid_state(listing.partitions.get(part, []), wl, txns)
    result = CompactOutput(type=kind, partition=part, highest_write_id=hwm, input=state.chosen_names(),
                           obsolete_before=sorted(state.obsolete), aborted_before=sorted(state.aborted))
    why_not = enough_to_compact(kind, state)
    if why_not is not None:
        result.reason = why_not
        return [], result
    pdir = afs.join(root, part)
    if kind == MAJOR:
        groups = bucket_groups(part, pdir, state, wl)
        outputs = {"base": base_name(hwm, txn)}
    else:
        lo = min(d.parsed.min_write_id for d in state.deltas + state.delete_deltas)
        only_deltas = AcidDirectory(deltas=state.deltas, delete_deltas=state.delete_deltas,
                                    has_uncompacted_aborts=state.has_uncompacted_aborts)
        groups = bucket_groups(part, pdir, only_deltas, wl)
        outputs = {"delta": delta_name(lo, hwm, -1, txn), "delete_delta": delta_name(lo, hwm, -1, txn, delete=True)}
    staging = afs.join(root, afs.STAGING_DIR, f"txn_{txn}_compact_{uuid.uuid4().hex[:8]}")
    try:
        rows = _run_tasks(sc, table, groups, wl, kind, outputs, afs.join(staging, part))
        stats = _publish(fs, afs.join(staging, part), pdir, kind, outputs, rows, part)
    finally:
        afs.remove_dir(fs, staging)
    result.compacted, result.output, result.bucket_groups = True, stats.directories, len(groups)
    result.rows, result.delete_events = stats.rows_inserted, stats.rows_deleted
    return [stats], result


def _run_tasks(sc: SparkContext, table: Table, groups: list[BucketGroup], wl: ValidWriteIdList, kind: str,
               outputs: dict[str, str], out_dir: str) -> list:
    location = table.spec.location
    columns = table.spec.data_columns
    compression = table.spec.compression
    snapshot_text = wl.to_string()

    def work(i: int) -> list[dict]:
        fs, _ = afs.filesystem_for(location)
        snap = ValidCompactorWriteIdList.parse(snapshot_text)
        if kind == MAJOR:
            return _major_bucket(fs, groups[i], snap, columns, afs.join(out_dir, outputs["base"]), compression)
        return _minor_bucket(fs, groups[i], snap, columns, out_dir, outputs, compression)

    # one bucket per task: a bucket is the unit of output, and tasks this size are never tiny
    return run_tasks(sc, len(groups), work)


def _read_rows(fs: pafs.FileSystem, group: BucketGroup, snap: ValidWriteIdList, columns: list) -> tuple[pa.Table, str]:
    """Visible rows of a bucket group with their ROW__IDs, through the project's reader, and the
    unit their timestamps are in: nanoseconds, so that Hive-written digits survive, unless a
    file holds years beyond 1677-2262 (then microseconds, refusing to drop any digit)."""
    for unit in ("ns", "us"):
        request = ReadRequest(columns, None, True, timestamp_unit=unit, exact=True)
        try:
            batches = list(read_bucket_group(fs, group, snap, request))
        except TimestampRangeError:
            continue
        if batches:
            return pa.Table.from_batches(batches), unit
        schema = pa.schema([pa.field(c.name, c.type.to_arrow(unit)) for c in columns]
                           + [pa.field(ROW_ID_COLUMN, row_id_type())])
        return schema.empty_table(), unit
    raise AssertionError("microsecond reads never raise TimestampRangeError")


def _sorted_order(ot: np.ndarray, bp: np.ndarray, rid: np.ndarray, cur: np.ndarray | None = None,
                  unique: bool = True) -> np.ndarray | None:
    """None if (originalTransaction, bucket, rowId) already ascend, else the sorting order
    (ties, only allowed for delete events, by currentTransaction descending)."""
    if len(rid) < 2:
        return None
    o, b, r = np.diff(ot), np.diff(bp.astype(np.int64)), np.diff(rid)
    if bool(np.all((o > 0) | ((o == 0) & ((b > 0) | ((b == 0) & (r > 0)))))):
        return None
    keys = (rid, bp, ot) if cur is None else (-cur, rid, bp, ot)
    order = np.lexsort(keys)
    if unique:
        so, sb, sr = ot[order], bp[order], rid[order]
        dup = (np.diff(so) == 0) & (np.diff(sb.astype(np.int64)) == 0) & (np.diff(sr) == 0)
        if dup.any():
            i = int(np.argmax(dup))
            raise CompactionJobError(f"two rows share ROW__ID ({so[i]}, {sb[i]}, {sr[i]}): the table's files "
                                     "are inconsistent; refusing to compact")
    return order


def _insert_events_in_key_order(t: pa.Table, columns: list, timestamp_unit: str) -> pa.Table:
    """Rows read with their ROW__IDs -> insert events sorted by (originalTransaction, bucket,
    rowId), keeping every ROW__ID; an insert event's currentTransaction is its
    originalTransaction (ACID v2 split update)."""
    rid = t.column(ROW_ID_COLUMN).combine_chunks()
    ot = pc.struct_field(rid, [0]).to_numpy(zero_copy_only=False)
    bp = pc.struct_field(rid, [1]).to_numpy(zero_copy_only=False)
    rr = pc.struct_field(rid, [2]).to_numpy(zero_copy_only=False)
    cols = [t.column(c.name).combine_chunks() for c in columns]
    order = _sorted_order(ot, bp, rr)
    if order is not None:
        idx = pa.array(order)
        ot, bp, rr = ot[order], bp[order], rr[order]
        cols = [c.take(idx) for c in cols]
    return compacted_events(INSERT_OPERATION, ot, bp, rr, ot, cols, columns, timestamp_unit)


def _major_bucket(fs: pafs.FileSystem, group: BucketGroup, snap: ValidWriteIdList, columns: list,
                  base_dir: str, compression: str) -> list[dict]:
    t, unit = _read_rows(fs, group, snap, columns)
    if not t.num_rows:
        return []
    events = _insert_events_in_key_order(t, columns, unit)
    written = write_acid_file(fs, afs.join(base_dir, bucket_file_name(group.bucket)), events, columns, base=True,
                              compression=compression)
    return [{"dir": "base", "kind": "i", "rows": written.rows, "bytes": written.bytes}]


def _minor_bucket(fs: pafs.FileSystem, group: BucketGroup, snap: ValidWriteIdList, columns: list,
                  out_dir: str, outputs: dict[str, str], compression: str) -> list[dict]:
    out = []
    rows, unit = _read_rows(fs, replace(group, delete_files=[]), snap, columns)   # deletes are kept, not applied
    if rows.num_rows:
        events = _insert_events_in_key_order(rows, columns, unit)
        w = write_acid_file(fs, afs.join(out_dir, outputs["delta"], bucket_file_name(group.bucket)), events, columns,
                            compression=compression)
        out.append({"dir": "delta", "kind": "i", "rows": w.rows, "bytes": w.bytes})
    parts = [delete_events_of(fs, f, snap, columns) for f in group.delete_files]
    if parts and sum(len(p[0]) for p in parts):
        ot, bp, rr, cur = (np.concatenate([p[i] for p in parts]) for i in range(4))
        order = _sorted_order(ot, bp, rr, cur, unique=False)
        if order is not None:
            ot, bp, rr, cur = ot[order], bp[order], rr[order], cur[order]
        events = compacted_events(DELETE_OPERATION, ot, bp, rr, cur, None, columns)
        w = write_acid_file(fs, afs.join(out_dir, outputs["delete_delta"], bucket_file_name(group.bucket)), events,
                            columns, compression=compression)
        out.append({"dir": "delete_delta", "kind": "d", "rows": w.rows, "bytes": w.bytes})
    return out


def delete_events_of(fs: pafs.FileSystem, f: DataFile, snap: ValidWriteIdList,
                     columns: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The valid delete events of one delete-delta file as they are stored."""
    orc = open_orc(fs, f)
    check_acid_file(orc, f, columns)
    t = orc.read(columns=[ORIGINAL_TRANSACTION, BUCKET, ROW_ID, CURRENT_TRANSACTION])
    ot, bp = t.column(ORIGINAL_TRANSACTION).to_numpy(), t.column(BUCKET).to_numpy()
    rid, cur = t.column(ROW_ID).to_numpy(), t.column(CURRENT_TRANSACTION).to_numpy()
    keep = valid_write_id_mask(cur, snap)
    return ot[keep], bp[keep], rid[keep], cur[keep]


def _publish(fs: pafs.FileSystem, staged_part: str, pdir: str, kind: str, outputs: dict[str, str],
             rows: list, part: str) -> PartitionStats:
    """Markers into each finished directory, then move them into place. A major always leaves
    a base (possibly without files: every row was deleted); a minor leaves a delta even if empty
    so that the directories it replaced become obsolete."""
    stats = PartitionStats(part)
    present = set()
    for r in rows:
        present.add(r["dir"])
        if r["dir"] == "base":
            stats.base_files += 1
            stats.base_bytes += r["bytes"]
            stats.rows_inserted += r["rows"]
        elif r["dir"] == "delta":
            stats.delta_files += 1
            stats.delta_bytes += r["bytes"]
            stats.rows_inserted += r["rows"]
        else:
            stats.delete_delta_files += 1
            stats.delete_delta_bytes += r["bytes"]
            stats.rows_deleted += r["rows"]
    wanted = ["base"] if kind == MAJOR else [k for k in ("delta", "delete_delta") if k in present] or ["delta"]
    for key in wanted:
        staged = afs.join(staged_part, outputs[key])
        fs.create_dir(staged, recursive=True)
        afs.write_acid_version(fs, staged)
        if key == "base":
            afs.write_metadata_acid(fs, staged, "compacted")
    for key in wanted:   # each move is atomic; none is visible before the compactor commits
        afs.publish(fs, afs.join(staged_part, outputs[key]), afs.join(pdir, outputs[key]))
        stats.directories.append(outputs[key])
    return stats


# -- cleaning --------------------------------------------------------------------------------
def _delete_path(fs: pafs.FileSystem, path: str, is_dir: bool) -> None:
    if is_dir:
        fs.delete_dir(path)
    else:
        fs.delete_file(path)


def _within(name: str, hwm: int | None, txns: ValidTxnList) -> bool:
    """Never touch anything above the compaction's highest write id, except output of an
    aborted compactor (a ``_v`` directory whose txn aborted)."""
    try:
        p = parse_dir(name)
    except NameError_:
        return True                      # an original file / directory made obsolete by a base
    if p.visibility_txn_id and txns.is_txn_aborted(p.visibility_txn_id):
        return True
    if hwm is None:
        return True
    top = p.write_id if isinstance(p, ParsedBase) else p.max_write_id
    return top <= hwm


def _doomed(fs: pafs.FileSystem, table: Table, root: str, parts: list[str] | None, wl: ValidWriteIdList,
            txns: ValidTxnList, mode: str, hwm: int | None) -> dict[str, bool]:
    listing = afs.list_table(fs, root, table.spec.partition_names, parts)
    out: dict[str, bool] = {}
    for part, entries in sorted(listing.partitions.items()):
        state = get_acid_state(entries, wl, txns)
        names = list(state.aborted) if mode == "aborted" else list(state.obsolete) + list(state.aborted)
        kinds = {e.name: e.is_dir for e in entries}
        for n in names:
            if _within(n, hwm, txns) and n in kinds:
                out[afs.join(part, n)] = kinds[n]
    return out


def run_clean(spec: JobSpec, r: Clean) -> CleanOutput:
    """Delete what ``r.mode`` says may go and report what is still there.

    ``compaction``: obsolete and aborted directories up to ``r.highest_write_id`` of the given
    partitions, chosen with the cleaner's ValidWriteIdList (``spec.snapshot``).
    ``aborted``: only directories of aborted write ids (and of aborted compactors) in the given
    partitions, or in every partition if ``r.partitions`` is None (a dynamic-partition write
    that never said where it wrote), plus staging left by ``r.aborted_txns``."""
    mode, hwm = r.mode, r.highest_write_id
    table = Table(spec.table)
    parts = r.partitions if table.spec.partition_cols else None
    if mode == "compaction":
        wl: ValidWriteIdList = ValidCleanerWriteIdList.parse(spec.snapshot.valid_write_ids)
    else:
        wl = ValidWriteIdList.parse(spec.snapshot.valid_write_ids)
    txns = ValidTxnList.parse(spec.snapshot.valid_txns)
    fs, root = table.fs_and_root
    doomed = _doomed(fs, table, root, parts, wl, txns, mode, hwm)
    staging = []
    aborted_txns = [int(t) for t in r.aborted_txns]
    if aborted_txns:
        sdir = afs.join(root, afs.STAGING_DIR)
        prefixes = tuple(f"txn_{t}_" for t in aborted_txns)
        for info in fs.get_file_info(pafs.FileSelector(sdir, allow_not_found=True)):
            if info.base_name.startswith(prefixes):
                staging.append(afs.join(afs.STAGING_DIR, info.base_name))
                doomed[staging[-1]] = info.type == pafs.FileType.Directory
    errors: dict[str, str] = {}

    def remove(rel: str) -> None:
        try:
            _delete_path(fs, afs.join(root, rel), doomed[rel])
        except FileNotFoundError:
            pass
        except OSError as exc:
            errors[rel] = str(exc)[:500]

    with ThreadPoolExecutor(max_workers=8) as pool:   # object stores delete one prefix per call
        list(pool.map(remove, sorted(doomed)))
    after = _doomed(fs, table, root, parts, wl, txns, mode, hwm)
    remaining = sorted(set(after) | {s for s in staging if afs.exists(fs, afs.join(root, s))})
    return CleanOutput(mode=mode, highest_write_id=hwm, partitions=parts, to_delete=sorted(doomed),
                       deleted=sorted(set(doomed) - set(remaining)), remaining=remaining, errors=errors)
