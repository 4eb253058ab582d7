"""What one write put on disk in one table or partition: the counts a job reports in its
manifest and the metastore keeps per write (the initiator decides compactions from them)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar


@dataclass(kw_only=True)
class WriteCounts:
    """Rows by kind of change; files and bytes by kind of directory (``delta_``,
    ``delete_delta_``, ``base_``)."""

    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    delta_files: int = 0
    delta_bytes: int = 0
    delete_delta_files: int = 0
    delete_delta_bytes: int = 0
    base_files: int = 0
    base_bytes: int = 0

    COUNTS: ClassVar[tuple[str, ...]] = ("rows_inserted", "rows_updated", "rows_deleted", "delta_files",
                                        "delta_bytes", "delete_delta_files", "delete_delta_bytes", "base_files",
                                        "base_bytes")

    def counts(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in self.COUNTS}

    def add(self, other: WriteCounts) -> None:
        for k in self.COUNTS:
            setattr(self, k, getattr(self, k) + getattr(other, k))


assert tuple(f.name for f in fields(WriteCounts)) == WriteCounts.COUNTS
