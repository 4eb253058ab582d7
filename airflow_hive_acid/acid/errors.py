"""Errors of the format layer."""


class AcidError(ValueError):
    """Base of every error raised by ``airflow_hive_acid.acid``: bad names, strings, files."""
