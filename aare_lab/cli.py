"""The ``aare-lab`` command line: one module per subcommand in `aare_lab.commands`.

Exit codes: 0 success, 1 bad input or data (the message says what to change), 2 usage
errors (argparse's, and the bad option values or combinations a command finds itself:
`aare_lab.commands.options.UsageError`), 3 capacity truncation with ``--on-truncation
error``, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM). An interrupt at any moment,
start-up included, ends with one line, never a traceback.
"""

from __future__ import annotations

import argparse
import signal
import sys
import warnings
from importlib import import_module

from aare_lab._version import __version__

COMMANDS = ("demo", "find", "compare", "dark", "stream-sim", "live", "capture",
            "convert", "campaign", "interpolate", "gainmap")
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_TRUNCATED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 128 + signal.SIGTERM


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="aare-lab",
        description="Photon cluster finding for charge-integrating hybrid pixel detectors.",
    )
    parser.add_argument("--version", action="version", version=f"aare-lab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        import_module(f".commands.{name.replace('-', '_')}", __package__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``aare-lab``; returns the exit code."""
    from aare_lab.runtime import interrupt

    given = sys.argv[1:] if argv is None else argv
    command = f"aare-lab {given[0]}" if given and given[0] in COMMANDS else "aare-lab"
    # From the first statement: an interrupt during the imports of start-up may land in
    # an import lock's callback, where Python drops it; noted, `check` raises it again.
    with interrupt.raising_interrupts():
        try:
            args = build_parser().parse_args(given)
            interrupt.check()
            return _run(args, command)
        except KeyboardInterrupt as err:
            return _stopped(command, err)


def entry() -> None:
    """The ``aare-lab`` program: `main`, then exit with its code. A signal that comes once
    the command has ended changes nothing: the process exits as the command said."""
    code = main()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
    sys.exit(code)


def _stopped(command: str, err: BaseException) -> int:
    from aare_lab.runtime.interrupt import Terminated

    terminated = isinstance(err, Terminated)
    print(f"{command}: {'terminated (SIGTERM)' if terminated else 'interrupted'}",
          file=sys.stderr)
    return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


def _run(args: argparse.Namespace, command: str) -> int:
    from aare_lab.commands.options import UsageError
    from aare_lab.detector.pedestal import PedestalNotReady
    from aare_lab.gpu import GpuError, GpuUnavailable
    from aare_lab.model.capacity import TruncationError
    from aare_lab.storage.result_store import interrupted

    with warnings.catch_warnings():
        warnings.showwarning = _warning_line(args.command)
        try:
            return int(args.run(args) or 0)
        except TruncationError as err:
            print(f"{command}: {err}", file=sys.stderr)
            return EXIT_TRUNCATED
        except UsageError as err:
            print(f"{command}: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except (OSError, ValueError, TypeError, KeyError, ImportError,
                PedestalNotReady, GpuUnavailable, GpuError) as err:
            # OSError: a path that is not what it should be, a full disk
            # (result_store.ResultWriteError), and TimeoutError, a stream that sends
            # nothing (sources.StreamTimeout).
            print(f"{command}: error: {_one_line(err)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except (KeyboardInterrupt, SystemError) as err:
            if not interrupted(err):
                raise
            # What was written is kept; the result file's own warning said where.
            return _stopped(command, _interrupt_of(err))


def _interrupt_of(err: BaseException) -> BaseException:
    """The interrupt behind ``err`` (Numba wraps it in a SystemError)."""
    while not isinstance(err, KeyboardInterrupt):
        err = err.__cause__ or err.__context__
    return err


def _one_line(err: BaseException) -> str:
    """An error's message: ``OSError(errno, text)`` of aare_lab's own reads as its text,
    without the ``[Errno N]`` in front."""
    if isinstance(err, OSError) and type(err).__str__ is OSError.__str__ and err.strerror \
            and err.filename is None:
        return err.strerror
    return str(err)


def _warning_line(command: str):
    """A `warnings.showwarning` that prints one line like the errors: a shell user can act
    on the message, not on the source line Python would quote."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"aare-lab {command}: {category.__name__}: {message}", file=sys.stderr)
    return show


if __name__ == "__main__":
    entry()
