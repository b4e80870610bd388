"""Exit codes (R22) and the one error type the commands raise."""

from __future__ import annotations

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_OUTPUT_CLOSED", "EXIT_TASK_NOT_SUCCEEDED", "CliError"]

#: The command did what was asked.
EXIT_OK = 0
#: The command failed: bad arguments, unknown task id or name, unreachable store, ...
EXIT_FAILED = 1
#: The command worked but the task did not succeed (``run`` of a task that ended
#: failed, stopped, lost, cancelled or skipped).
EXIT_TASK_NOT_SUCCEEDED = 3
#: The reader closed stdout (``| head -1``): the command stopped writing, quietly, with
#: the code a shell reports for any program a closed pipe ended (128 + SIGPIPE; D178).
EXIT_OUTPUT_CLOSED = 141


class CliError(Exception):
    """A failure the user can fix: printed as one line on stderr, exit code 1.

    Attributes:
        message: what was wrong and what to do instead.
        code: the exit code (1 unless said otherwise).
    """

    def __init__(self, message: str, *, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return self.message
