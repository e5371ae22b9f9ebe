"""Errors meant for the user: the CLI and the console show their message, never a traceback.

Each class carries the exit code `befair` ends with when it reaches the command line:

    0    ok
    1    the work failed (a session that failed, a runner that would not stop): WorkError
    2    usage: a bad flag value, an unknown session, a missing --yes: UsageError (and a plain
         BefairError, which predates the split)
    3    bad input data: a malformed CSV, a missing or oversized image, a database that is not
         SQLite, corrupt, read-only or from a newer befair, an unreadable journal: DataError
    130  interrupted (Ctrl-C, SIGTERM)
    141  stdout was closed early (`befair sessions | head`): quiet, like a command killed by SIGPIPE
"""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DATA = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class BefairError(Exception):
    """A problem the user can act on (bad input, missing file, misconfiguration)."""

    exit_code = EXIT_USAGE


class UsageError(BefairError):
    """The command was called wrongly: a bad flag value, an unknown session, a missing --yes."""

    exit_code = EXIT_USAGE


class WorkError(BefairError):
    """The command was right and its input fine, but the work could not be done."""

    exit_code = EXIT_FAILED


class DataError(BefairError):
    """Malformed or incomplete data: a CSV, an image, a workspace, a session database."""

    exit_code = EXIT_DATA


class DatabaseError(DataError):
    """A session database that cannot be used: not SQLite, corrupt, read-only, someone else's
    database, or written by a newer befair. The message names the file."""


class SchemaTooNew(DatabaseError):
    """The database's schema is newer than this version of befair knows."""
