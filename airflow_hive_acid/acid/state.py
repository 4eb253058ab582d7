"""``AcidState``: from a partition's listing and a snapshot, what to read and what is garbage.

Follows Hive 4's ``AcidUtils.getAcidState`` (see ``docs/format.md`` §3) with the
HIVE-29601 fix: a base is valid only if it is committed in the snapshot (``isWriteIdValid`` for
an INSERT OVERWRITE base, ``isValidBase`` for a compacted one), never by the ``minOpenWriteId``
shortcut that loses data. Every directory not chosen is given a reason, so ``hive-acid dirs`` can
say why it was skipped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import AcidError
from .names import (
    BASE_PREFIX,
    DELETE_DELTA_PREFIX,
    DELTA_PREFIX,
    METADATA_FILE,
    NameError_,
    ParsedBase,
    ParsedDelta,
    is_bucket_file,
    is_hidden,
    parse_base,
    parse_delta,
    parse_original_file,
)
from .writeids import LONG_MIN, RangeResponse, ValidTxnList, ValidWriteIdList


class NotEnoughHistoryError(AcidError):
    """The snapshot is older than the oldest compacted base (Hive's ACID_NOT_ENOUGH_HISTORY)."""


@dataclass(frozen=True)
class DirEntry:
    """One child of a partition directory as a lister saw it.

    ``children`` holds the files of a base/delta directory (and the entries of other
    sub-directories, for originals); ``metadata_format`` is the ``dataFormat`` of a
    ``_metadata_acid`` file inside a base, if one was found.
    """

    name: str
    is_dir: bool
    size: int = 0
    children: tuple[DirEntry, ...] = ()
    metadata_format: str | None = None

    def data_files(self) -> list[DirEntry]:
        """Files a reader opens: bucket files, or any non-hidden file of raw (MM / LOAD) dirs."""
        return [c for c in self.children if not c.is_dir and not c.name.startswith(("_", "."))
                and not c.name.endswith("_flush_length")]


@dataclass
class ChosenBase:
    parsed: ParsedBase
    entry: DirEntry
    compacted: bool


@dataclass
class ChosenDelta:
    parsed: ParsedDelta
    entry: DirEntry


@dataclass
class AcidDirectory:
    """What a reader at one snapshot reads, and what the cleaner may delete."""

    base: ChosenBase | None = None
    deltas: list[ChosenDelta] = field(default_factory=list)          # insert deltas, sorted
    delete_deltas: list[ChosenDelta] = field(default_factory=list)   # delete deltas, sorted
    original_files: list[tuple[str, DirEntry]] = field(default_factory=list)  # (relative path, entry)
    obsolete: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)
    aborted_write_ids: set[int] = field(default_factory=set)
    has_uncompacted_aborts: bool = False
    skipped: dict[str, str] = field(default_factory=dict)   # name -> why it is not read

    @property
    def current_directories(self) -> list[ChosenDelta]:
        return sorted(self.deltas + self.delete_deltas, key=lambda d: d.parsed.sort_key())

    def chosen_names(self) -> list[str]:
        names = [self.base.parsed.name] if self.base else []
        return names + [d.parsed.name for d in self.current_directories]


def _is_dir_usable(visibility_txn: int, txns: ValidTxnList, name: str, out: AcidDirectory) -> bool:
    if visibility_txn == 0 or txns.is_txn_valid(visibility_txn):
        return True
    if txns.is_txn_aborted(visibility_txn):
        out.aborted.append(name)
        out.skipped[name] = f"written by aborted transaction {visibility_txn}"
    else:
        out.skipped[name] = f"written by transaction {visibility_txn}, not committed in this snapshot"
    return False


def get_acid_state(children: list[DirEntry] | tuple[DirEntry, ...], write_ids: ValidWriteIdList,
                   txns: ValidTxnList | None = None) -> AcidDirectory:
    """Choose base, deltas and delete deltas of one partition (or unpartitioned table) directory.

    ``txns`` decides whether compactor output (``_v<txn>``) is visible; without it only
    directories with no visibility suffix (or ``_v0``) are usable.
    """
    txns = txns if txns is not None else ValidTxnList(high_watermark=0)
    out = AcidDirectory()
    best: ChosenBase | None = None
    oldest_base: ChosenBase | None = None
    working: list[ChosenDelta] = []
    originals: list[DirEntry] = []
    original_dirs: list[DirEntry] = []

    for child in sorted(children, key=lambda c: c.name):
        name = child.name
        if is_hidden(name):
            continue
        if not child.is_dir:
            if child.size > 0:
                originals.append(child)
            continue
        try:
            if name.startswith(BASE_PREFIX):
                parsed: ParsedBase | ParsedDelta = parse_base(name)
            elif name.startswith(DELTA_PREFIX) or name.startswith(DELETE_DELTA_PREFIX):
                parsed = parse_delta(name)
            else:
                original_dirs.append(child)
                continue
        except NameError_:
            out.skipped[name] = "not an ACID directory name"
            continue

        if isinstance(parsed, ParsedBase):
            parsed_b = parsed
            if not _is_dir_usable(parsed_b.visibility_txn_id, txns, name, out):
                continue
            compacted = parsed_b.visibility_txn_id > 0 or child.metadata_format == "compacted"
            cand = ChosenBase(parsed_b, child, compacted)
            if oldest_base is None or parsed_b.write_id < oldest_base.parsed.write_id:
                oldest_base = cand
            if write_ids.is_write_id_aborted(parsed_b.write_id) and not compacted:
                out.aborted.append(name)
                out.aborted_write_ids.add(parsed_b.write_id)
                out.skipped[name] = f"INSERT OVERWRITE by aborted write id {parsed_b.write_id}"
                continue
            if best is None or best.parsed.write_id < parsed_b.write_id or (
                    best.parsed.write_id == parsed_b.write_id and compacted and not best.compacted):
                if _is_valid_base(parsed_b.write_id, compacted, write_ids):
                    if best is not None:
                        out.obsolete.append(best.parsed.name)
                        out.skipped[best.parsed.name] = f"superseded by {name}"
                    best = cand
                else:
                    out.skipped[name] = f"base of write id {parsed_b.write_id} is not committed in this snapshot"
            else:
                out.obsolete.append(name)
                out.skipped[name] = f"superseded by {best.parsed.name}"
            continue

        parsed_d = parsed
        if not _is_dir_usable(parsed_d.visibility_txn_id, txns, name, out):
            continue
        aborted = write_ids.is_write_id_range_aborted(parsed_d.min_write_id, parsed_d.max_write_id)
        if aborted is RangeResponse.ALL:
            out.aborted.append(name)
            out.aborted_write_ids.update(range(parsed_d.min_write_id, parsed_d.max_write_id + 1))
            out.skipped[name] = "every write id in it was aborted"
            continue
        if aborted is RangeResponse.SOME:
            out.has_uncompacted_aborts = True
        if write_ids.is_write_id_range_valid(parsed_d.min_write_id, parsed_d.max_write_id) is not RangeResponse.NONE:
            working.append(ChosenDelta(parsed_d, child))
        else:
            out.skipped[name] = "write ids not committed in this snapshot"

    if best is not None:
        for f in originals:
            out.obsolete.append(f.name)
            out.skipped[f.name] = f"original file made obsolete by {best.parsed.name}"
        for d in original_dirs:
            out.obsolete.append(d.name)
            out.skipped[d.name] = f"original directory made obsolete by {best.parsed.name}"
    else:
        out.original_files = sorted(_collect_originals(originals, original_dirs), key=lambda p: p[0])

    current = best.parsed.write_id if best else 0
    last_stmt = -1
    prev: ParsedDelta | None = None
    for chosen in sorted(working, key=lambda w: w.parsed.sort_key()):
        p = chosen.parsed
        if p.max_write_id > current:
            if write_ids.is_write_id_range_valid(current + 1, p.max_write_id) is not RangeResponse.NONE:
                _keep(out, chosen)
                current, last_stmt, prev = p.max_write_id, p.statement_id, p
            else:
                out.skipped[p.name] = "write ids not committed in this snapshot"
        elif p.max_write_id == current and last_stmt >= 0:
            _keep(out, chosen)   # another statement of the same transaction
            prev = p
        elif prev is not None and (p.min_write_id, p.max_write_id, p.statement_id) == (
                prev.min_write_id, prev.max_write_id, prev.statement_id):
            _keep(out, chosen)   # the delta / delete_delta twin
            prev = p
        else:
            out.obsolete.append(p.name)
            covered_by = best.parsed.name if best and p.max_write_id <= best.parsed.write_id else "a wider delta"
            out.skipped[p.name] = f"covered by {covered_by}"

    if oldest_base is not None and best is None and oldest_base.compacted:
        raise NotEnoughHistoryError(
            f"snapshot {write_ids} is too old for compacted base {oldest_base.parsed.name}: "
            "the history it needs was compacted away; take a newer snapshot")
    out.base = best
    return out


def _keep(out: AcidDirectory, d: ChosenDelta) -> None:
    (out.delete_deltas if d.parsed.is_delete else out.deltas).append(d)


def _is_valid_base(write_id: int, compacted: bool, write_ids: ValidWriteIdList) -> bool:
    if write_id == LONG_MIN:
        return True
    if compacted:
        return write_ids.is_valid_base(write_id)
    return write_ids.is_write_id_valid(write_id)


def _collect_originals(files: list[DirEntry], dirs: list[DirEntry], prefix: str = "") -> list[tuple[str, DirEntry]]:
    out = [(prefix + f.name, f) for f in files]
    for d in dirs:
        sub_files = [c for c in d.children if not c.is_dir and c.size > 0 and not is_hidden(c.name)]
        sub_dirs = [c for c in d.children if c.is_dir and not is_hidden(c.name)]
        out.extend(_collect_originals(sub_files, sub_dirs, prefix + d.name + "/"))
    return out


def original_bucket_id(relative_path: str) -> int | None:
    """Bucket id of an original file (``000002_0_copy_1`` -> 2), or None if not so named."""
    parsed = parse_original_file(relative_path.rsplit("/", 1)[-1])
    return parsed.bucket_id if parsed else None


__all__ = [
    "AcidDirectory", "ChosenBase", "ChosenDelta", "DirEntry", "NotEnoughHistoryError",
    "get_acid_state", "original_bucket_id", "is_bucket_file", "METADATA_FILE",
]
