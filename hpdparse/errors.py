"""Exceptions that end up as one-line messages for the user."""


class HpdparseError(Exception):
    """Base class. str(error) is a complete one-line message for the user."""


class InputError(HpdparseError):
    """An input file cannot be read, opened, decrypted or rendered."""


class EngineError(HpdparseError):
    """The engine cannot start or cannot go on (model missing, server down for good...)."""


class OutputError(HpdparseError):
    """An output folder or file cannot be written."""
