"""Sensors: wait for a compaction to reach a state (poke, reschedule or deferrable)."""
from .compaction import CompactionSensor

__all__ = ["CompactionSensor"]
