"""The exception a long computation raises on Ctrl-C after saving what it finished."""

__all__ = ["Interrupted", "until_interrupted"]


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped a long run (NUTS, compression, a JDL fit) at a safe point; ``partial`` holds what it finished.

    A subclass of ``KeyboardInterrupt``, so code that does not look for it stops as before.

    Attributes:
        partial: the run's usual result object built from the work done so far (e.g. an ``MCMCResult`` with the
            draws each chain completed), or None when nothing was finished.

    Examples:
        >>> import bayeskern as bk
        >>> try:
        ...     raise bk.Interrupted("draws so far", "stopped")
        ... except KeyboardInterrupt as e:      # still a KeyboardInterrupt
        ...     print(e.partial)
        draws so far
    """

    def __init__(self, partial, message: str = "interrupted"):
        super().__init__(message)
        self.partial = partial


def until_interrupted(run):
    """(run(), True), or (the partial result, False) when ``run`` raised :class:`Interrupted`: for callers that turn
    a partial inner result into their own partial result before raising again."""
    try:
        return run(), True
    except Interrupted as stopped:
        return stopped.partial, False
