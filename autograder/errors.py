"""One exception type for every user-facing error: the CLI prints its message on one line."""


class GraderError(Exception):
    """Bad input or a broken course tree: the message says what was wrong and what to do."""
