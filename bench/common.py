"""Helpers shared by the benchmarks: run a command or function while sampling the resident
memory of its whole process tree, print a table, write results."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent


class TreeMemory:
    """Peak summed RSS of a process and all its descendants, sampled every 100 ms."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._t.start()
        return self

    def __exit__(self, *a: object) -> None:
        self._stop.set()
        self._t.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                p = psutil.Process(self.pid)
                procs = [p] + p.children(recursive=True)
                total = 0
                for q in procs:
                    try:
                        total += q.memory_info().rss
                    except psutil.Error:
                        pass
                self.peak = max(self.peak, total)
            except psutil.Error:
                pass
            self._stop.wait(0.1)


def run_cmd(cmd: list[str], env: dict[str, str] | None = None, check: bool = True) -> dict[str, Any]:
    """Run a command; wall seconds, peak tree RSS (MiB), stdout."""
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    with TreeMemory(proc.pid) as mem:
        out, err = proc.communicate()
    wall = time.time() - t0
    if check and proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{err[-4000:]}")
    return {"wall_s": round(wall, 2), "peak_mib": round(mem.peak / 2**20), "stdout": out, "rc": proc.returncode}


def run_python(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run Python code in a fresh interpreter (so its memory is its own); its last stdout line
    is parsed as JSON and merged into the result."""
    r = run_cmd([sys.executable, "-c", code], env=env)
    last = [line for line in r["stdout"].splitlines() if line.strip()][-1]
    r.update(json.loads(last))
    return r


def dir_bytes(path: str | Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = [max(len(c), *(len(str(r.get(c, "-"))) for r in rows)) for c in columns]
    print(" | ".join(c.rjust(w) for c, w in zip(columns, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(str(r.get(c, "-")).rjust(w) for c, w in zip(columns, widths)))


def write_results(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    payload = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": platform.platform(),
               "cpus": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1), **payload}
    out.write_text(json.dumps(payload, indent=2, default=str))
    return out


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.time()
    v = fn()
    return time.time() - t0, v
