"""Where the example DAGs stage their input files: ``$HIVE_ACID_DEMO_DATA``, else ``incoming/``
beside the embedded metastore (``$HIVE_ACID_HOME``, default ``~/.hive-acid``). In a real pipeline
these files come from an extract job or a landing bucket."""
from __future__ import annotations

import os
from pathlib import Path


def data_dir(*parts: str) -> str:
    root = os.environ.get("HIVE_ACID_DEMO_DATA") or str(
        Path(os.environ.get("HIVE_ACID_HOME") or Path.home() / ".hive-acid") / "incoming")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return str(path)
