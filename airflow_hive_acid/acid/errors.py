"""Errors of the format layer."""
from ..errors import HiveAcidError, InvalidInputError


class AcidError(HiveAcidError):
    """Base of every error raised by ``airflow_hive_acid.acid``: bad names, strings, files. Only
    ``AcidInputError`` is bad input; the rest (a missing or unreadable file) may pass on retry."""


class AcidInputError(AcidError, InvalidInputError):
    """A name, string, value or schema that breaks the format's rules (bad input)."""
