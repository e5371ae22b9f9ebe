"""Errors meant for the user: the CLI and the console show their message, never a traceback."""


class BefairError(Exception):
    """A problem the user can act on (bad input, missing file, misconfiguration)."""


class DataError(BefairError):
    """Malformed or incomplete data: a CSV, an image, a workspace."""
