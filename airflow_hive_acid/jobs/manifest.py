"""What a job reports back: its manifest, with what each statement wrote per partition and each
job kind's typed output. Written by the job (its driver may run on any machine) to the table's
filesystem; read by the client, which records the writes and commits."""
from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from ..acid import fs as afs
from ..acid.stats import WriteCounts
from ..errors import JobFailed
from .joblog import print_progress


@dataclass
class PartitionStats(WriteCounts):
    """What one statement wrote into one partition, and the directories it published there."""

    partition: str = ""
    directories: list[str] = field(default_factory=list)

    @property
    def operation(self) -> str:
        """What the statement did here, for write-write conflicts: ``update`` if it updated a
        row, else ``delete`` if it deleted one, else ``insert``."""
        if self.rows_updated:
            return "update"
        if self.rows_deleted:
            return "delete"
        return "insert"


@dataclass
class ReadOutput:
    rows: int = 0
    output: str | None = None


@dataclass
class CompactOutput:
    """What a compaction job found and wrote (``reason`` when there was nothing to compact)."""

    type: str = ""
    partition: str = ""
    highest_write_id: int = 0
    compacted: bool = False
    input: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    obsolete_before: list[str] = field(default_factory=list)
    aborted_before: list[str] = field(default_factory=list)
    rows: int = 0
    delete_events: int = 0
    bucket_groups: int = 0
    reason: str | None = None


@dataclass
class CleanOutput:
    """What a cleaning job deleted, and what is still there after it listed again."""

    mode: str = ""
    highest_write_id: int | None = None
    partitions: list[str] | None = None
    to_delete: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class IngestOutput:
    """A streaming ingest's query (its id is kept in the checkpoint) and the micro-batches it ran:
    ``{"batch_id", "rows"}`` each, as Spark reported them (what committed is in the metastore)."""

    query_id: str = ""
    batches: list[dict] = field(default_factory=list)
    seconds: float = 0.0


OUTPUTS: dict[str, type] = {"read": ReadOutput, "compact": CompactOutput, "clean": CleanOutput,
                            "ingest": IngestOutput}


@dataclass
class Manifest:
    job: str
    ok: bool = True
    error: str | None = None
    error_type: str | None = None
    bad_input: bool = False          # the job refused its input: no retry can succeed
    write_id: int = 0
    statement_id: int = 0
    spark_app_id: str | None = None
    seconds: float = 0.0
    partitions: list[PartitionStats] = field(default_factory=list)
    output: ReadOutput | CompactOutput | CleanOutput | IngestOutput | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)   # {"stage", "seconds"[, "rows"]}: where the time went

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        """Time one stage of the job (planning, the Spark job that writes, publishing) and print
        its progress line when it ends; the body may set ``rows`` on the record it is given."""
        started = time.perf_counter()
        record: dict[str, Any] = {"stage": name}
        try:
            yield record
        finally:
            record["seconds"] = round(time.perf_counter() - started, 3)
            self.stages.append(record)
            print_progress(self.job, name, record["seconds"], record.get("rows"))

    @property
    def totals(self) -> WriteCounts:
        out = WriteCounts()
        for p in self.partitions:
            out.add(p)
        return out

    @property
    def rows_inserted(self) -> int:
        return self.totals.rows_inserted

    @property
    def rows_updated(self) -> int:
        return self.totals.rows_updated

    @property
    def rows_deleted(self) -> int:
        return self.totals.rows_deleted

    @property
    def bytes_written(self) -> int:
        t = self.totals
        return t.delta_bytes + t.delete_delta_bytes + t.base_bytes

    @property
    def files_written(self) -> int:
        t = self.totals
        return t.delta_files + t.delete_delta_files + t.base_files

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        d = json.loads(text)
        d["partitions"] = [PartitionStats(**p) for p in d.get("partitions", [])]
        out = d.get("output")
        d["output"] = OUTPUTS[d["job"]](**out) if out is not None else None
        return cls(**d)

    def save(self, path: str) -> None:
        """Written to a temporary name and moved: a reader never sees half a manifest."""
        fs, p = afs.filesystem_for(path)
        fs.create_dir(p.rsplit("/", 1)[0], recursive=True)
        afs.write_bytes(fs, f"{p}.tmp", self.to_json().encode())
        fs.move(f"{p}.tmp", p)

    @classmethod
    def load(cls, path: str) -> Manifest | None:
        """The manifest at ``path``, or None if the job wrote none (or half of one)."""
        fs, p = afs.filesystem_for(path)
        try:
            with fs.open_input_stream(p) as f:
                return cls.from_json(f.read().decode())
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return None

    def raise_for_failure(self) -> None:
        if not self.ok:
            raise JobFailed(f"{self.job} job failed: {self.error}", self)
