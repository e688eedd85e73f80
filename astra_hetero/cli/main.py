"""`astra-hetero` entry point: parse, dispatch to one subcommand module, map errors to exit codes.

Exit codes: 0 success, 1 a run failed (backend error, deadlock, or a bug), 2 bad input (spec, run
directory, command line), 130 interrupted. Every failure ends as one line on stderr; `--debug` (or
ASTRA_HETERO_DEBUG=1) adds the traceback of an unexpected error. Output piped into a command that
stops reading (`report RUN | head`) is not a failure: exit 0, nothing on stderr.

Only the standard library is imported at module level, and everything else (the subcommands, and with
them pydantic, numpy, ...) inside `main`, so that Ctrl-C during start-up is handled like any other.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from astra_hetero.errors import AstraHeteroError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing alone widens the start-up window
if TYPE_CHECKING:
    import argparse
    from typing import Any

# Each module defines `register(subparsers) -> None`, which sets `func(args) -> int` as a default.
SUBCOMMANDS = (
    "generate",
    "topology",
    "build",
    "import_",
    "run",
    "report",
    "sweep",
    "profile",
    "plan",
    "study",
)
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def build_parser() -> argparse.ArgumentParser:
    import argparse
    from importlib import import_module

    from astra_hetero.version import __version__

    parser = argparse.ArgumentParser(
        prog="astra-hetero",
        description="Heterogeneity-aware LLM-training simulation on ASTRA-sim and ns-3.",
    )
    parser.add_argument("--version", action="version", version=f"astra-hetero {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an unexpected error")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="say on stderr what the tool is doing (-vv: in more detail)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        import_module(f"astra_hetero.cli.{name}").register(subparsers)
    for subparser in subparsers.choices.values():  # --debug and --verbose also after the subcommand
        subparser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        subparser.add_argument(
            "-v", "--verbose", action="count", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return parser


class Terminated(BaseException):
    """SIGTERM, raised like KeyboardInterrupt so that staging directories and child processes are
    cleaned up on the way out."""


def main(argv: list[str] | None = None) -> int:
    """Run one command; return its exit code. Called with `argv=None` it is the process's entry point
    and, after an interrupt, ends the process itself (see `_end_interrupted`)."""
    as_process = argv is None
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv or os.environ.get("ASTRA_HETERO_DEBUG", "") not in ("", "0")
    signals: list[int] = []  # what arrived: a library may wrap the KeyboardInterrupt it raised
    raising = [False]  # while modules are imported, a signal is only noted (see `_run`)

    def on_signal(signum: int, frame: object) -> None:
        signals.append(signum)
        if raising[0]:
            raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    previous = {sig: _install(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _run(argv, debug, signals, raising)
    finally:
        for sig, handler in previous.items():
            _install(sig, handler)
    if as_process and code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        _end_interrupted(code)
    return code


def _run(argv: list[str], debug: bool, signals: list[int], raising: list[bool]) -> int:
    try:
        # Importing the commands loads compiled extensions; one interrupted inside its initialisation
        # can abort noisily (pydantic-core panics), so an interrupt there takes effect right after.
        parser = build_parser()
        raising[0] = True
        if signals:
            raise KeyboardInterrupt
        try:
            args = parser.parse_args(argv)
            with _logging_to_stderr(args.verbose):
                code = int(args.func(args))
        finally:  # what is still buffered goes out now, where a closed pipe is caught below
            sys.stdout.flush()
        return code
    except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
        return exc.code if isinstance(exc.code, int) else 1
    except AstraHeteroError as exc:
        _say(f"error: {exc}")
        return exc.exit_code
    except BaseException as exc:  # noqa: BLE001 - also what extensions raise outside Exception
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            # output piped into a command that stopped reading (`report RUN | head`): not an error;
            # the command's files were already written whole
            _quiet_stdout()
            return 0
        if signals or isinstance(exc, KeyboardInterrupt | Terminated):
            terminated = isinstance(exc, Terminated) or signal.SIGTERM in signals
            _say("terminated" if terminated else "interrupted")
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
        if debug:
            import traceback

            traceback.print_exc()
        hint = "" if debug else "; run with --debug for the traceback"
        _say(f"error: unexpected {type(exc).__name__}: {_one_line(str(exc))} (a bug{hint})")
        return 1


@contextmanager
def _logging_to_stderr(verbosity: int) -> Iterator[None]:
    """The package's log records (`logging.getLogger(__name__)` in each module) on stderr while one
    command runs: INFO with -v, DEBUG with -vv; nothing without. Undone afterwards, so that a library
    caller's own logging set-up is left as it was."""
    if not verbosity:
        yield
        return
    logger = logging.getLogger("astra_hetero")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    level = logger.level
    logger.setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _end_interrupted(code: int) -> None:
    """Exit now with `code`. CPython ends a process whose KeyboardInterrupt passed through certain
    C code by re-raising SIGINT at exit (status -2) even though it was handled, and threads a library
    left behind could hold the exit up; neither should decide how an interrupted run ends."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _install(signum: int, handler: Any) -> Any:
    """Set a signal handler where Python allows it (the main thread); return the previous one."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signum, handler)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500] if lines else "(no message)"


def _say(text: str) -> None:
    try:
        print(text, file=sys.stderr)
    except (OSError, ValueError):
        pass


def _stdout_closed() -> bool:
    """Whether stdout is a pipe that nobody reads any more (poll reports an error on its write end);
    a broken pipe to anything else (a child process, a socket) is a failure like any other."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), no file descriptor
        return False


def _quiet_stdout() -> None:
    # Python would report the broken pipe again when it flushes stdout at exit.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
