"""The ``aare-lab`` command line: one module per subcommand in `aare_lab.commands`.

Exit codes: 0 success, 1 bad input or data (the message says what to change), 2 usage
errors (argparse's, and the bad option values or combinations a command finds itself:
`aare_lab.commands.options.UsageError`), 3 capacity truncation with ``--on-truncation
error``, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from importlib import import_module

from ._version import __version__

COMMANDS = ("demo", "find", "compare", "dark", "stream-sim", "live", "capture",
            "convert")
EXIT_BAD_INPUT = 1
EXIT_USAGE = 2
EXIT_TRUNCATED = 3
EXIT_INTERRUPTED = 130


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
    from .capacity import TruncationError
    from .commands.options import UsageError
    from .gpu import GpuError, GpuUnavailable
    from .pedestal import PedestalNotReady
    from .interrupt import raising_interrupts
    from .result_store import interrupted

    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():
        warnings.showwarning = _warning_line(args.command)
        try:
            with raising_interrupts():
                return int(args.run(args) or 0)
        except TruncationError as err:
            print(f"aare-lab {args.command}: {err}", file=sys.stderr)
            return EXIT_TRUNCATED
        except UsageError as err:
            print(f"aare-lab {args.command}: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        except (OSError, ValueError, TypeError, KeyError, ImportError,
                PedestalNotReady, GpuUnavailable, GpuError) as err:
            # OSError: a path that is not what it should be, and TimeoutError, a stream
            # that sends nothing (sources.StreamTimeout).
            print(f"aare-lab {args.command}: error: {err}", file=sys.stderr)
            return EXIT_BAD_INPUT
        except (KeyboardInterrupt, SystemError) as err:
            if not interrupted(err):
                raise
            # What was written is kept; the result file's own warning said how much.
            print(f"aare-lab {args.command}: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED


def _warning_line(command: str):
    """A `warnings.showwarning` that prints one line like the errors: a shell user can act
    on the message, not on the source line Python would quote."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"aare-lab {command}: {category.__name__}: {message}", file=sys.stderr)
    return show


if __name__ == "__main__":
    sys.exit(main())
