"""Every error the package raises on purpose; the CLI maps them to exit codes."""

from __future__ import annotations


class AstraHeteroError(Exception):
    """Base of all errors meant for the user (exit code 2 for input errors, 1 for run failures)."""

    exit_code = 1


class FieldError(AstraHeteroError):
    """An error about one spec field; `field` is its dotted path ("" for the spec as a whole)."""

    exit_code = 2

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class SpecError(FieldError):
    """A spec field is missing or wrong."""


class InfeasiblePlan(FieldError):
    """The spec is well-formed but cannot run (e.g. a stage does not fit in device memory)."""


class RunDirError(AstraHeteroError):
    """A run directory is missing a file or holds a malformed one; names the file (and node)."""

    exit_code = 2


class BackendUnavailable(AstraHeteroError):
    """The requested backend cannot be used here (no binary, no Docker engine, no image)."""

    exit_code = 1


class BackendFailed(AstraHeteroError):
    """The backend ran but produced no result; carries the tail of its log."""

    exit_code = 1

    def __init__(self, message: str, log_tail: str = "") -> None:
        self.log_tail = log_tail
        super().__init__(message + (f"\n--- log tail ---\n{log_tail}" if log_tail else ""))


class SimulationDeadlock(AstraHeteroError):
    """The embedded engine found ranks waiting on nodes that can never complete."""

    exit_code = 1
