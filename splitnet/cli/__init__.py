"""The command line: ``splitnet COMMAND ...`` (also ``python -m splitnet``).

One module per command (``commands/cmd_<name>.py``), each with ``HELP`` (one line), ``RANK``
(its place in ``splitnet --help``), ``configure(parser)`` and ``run(args) -> int``, and
``VERDICT`` (one line) when it can exit 1; the commands are found by their file names, so
adding one is adding its file (tests/test_fuzz_cli.py fuzzes every option of it, read from its
parser). Options that several
commands take (``--checkpoint``/``--hf``/``--trust-checkpoint``, ``--device``, ``--threads``, a
figure's ``--out``) are declared once in :mod:`._args`. Parsers use only the standard library and
:mod:`splitnet.configs.config`, so ``--help`` starts without importing torch; the work imports what
it
needs.

Errors: bad input is one line on stderr, ``splitnet COMMAND: error: ...``, and exit status 2
(also sizes beyond the machine: MemoryError, OverflowError);
a verdict that fails (the command's ``VERDICT``: ``schemes --check``, ``order --strict``, a
``train`` whose loss is not finite, an ``export`` that does not read back) exits 1; Ctrl-C exits
130 with one line. Output to a closed pipe (``| head``) does not turn into a traceback, and the exit
status stays the command's own.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from ..names import unknown_name
from . import commands
from ._args import OneLineParser, set_stdout_guard


def _commands() -> dict[str, str]:
    """name -> one-line help of every ``commands/cmd_<name>.py``, in ``RANK`` order. Importing
    them costs ~0.1 s and no torch (their parsers use the standard library and the configs)."""
    mods = [importlib.import_module(f"{commands.__name__}.{m.name}")
            for m in pkgutil.iter_modules(commands.__path__) if m.name.startswith("cmd_")]
    mods.sort(key=lambda m: (getattr(m, "RANK", 1000), m.__name__))
    return {m.__name__.rpartition(".cmd_")[2]: m.HELP for m in mods}


COMMANDS = _commands()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("splitnet")
    except PackageNotFoundError:   # run from a source tree that is not installed
        from .. import __version__

        return __version__


def build_parser(command: str | None = None) -> OneLineParser:
    """The top-level parser, or ``command``'s own parser."""
    if command is not None:
        mod = importlib.import_module(f"{commands.__name__}.cmd_{command}")
        p = OneLineParser(prog=f"splitnet {command}", description=mod.HELP)
        mod.configure(p)
        return p
    p = OneLineParser(prog="splitnet", description="Transformer layers as ODE splitting "
                      "integrators. Run 'splitnet COMMAND --help' for a command's options.")
    p.add_argument("--version", action="version", version=f"splitnet {_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_ in COMMANDS.items():
        sub.add_parser(name, help=help_, add_help=False)
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        print(f"splitnet: error: {unknown_name('command', argv[0], COMMANDS)}", file=sys.stderr)
        return 2
    if not argv:                   # no command: a usage error (exit 2), as for any bad input
        print(f"splitnet: error: give a command, one of {', '.join(COMMANDS)} (splitnet "
              f"--help says what each does)", file=sys.stderr)
        return 2
    if argv[0] not in COMMANDS:
        build_parser().parse_args(argv)   # --help, --version, or a usage error
        return 2
    command = argv[0]
    set_stdout_guard()
    try:
        mod = importlib.import_module(f"{commands.__name__}.cmd_{command}")
        if hasattr(mod, "prepare"):          # what the parser needs first (a user's task)
            mod.prepare(argv[1:])
        args = build_parser(command).parse_args(argv[1:])
        return int(mod.run(args) or 0)
    except KeyboardInterrupt:
        print(f"\nsplitnet {command}: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError) as e:   # bad input: one clear line, no traceback
        print(f"splitnet {command}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except (MemoryError, OverflowError) as e:       # sizes beyond this machine or a float
        what = "not enough memory" if isinstance(e, MemoryError) else "a number overflowed"
        print(f"splitnet {command}: error: {what} ({_one_line(e)}); use smaller sizes",
              file=sys.stderr)
        return 2


def _one_line(e: BaseException) -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, OSError) and e.filename and str(e.filename) not in msg:
        msg = f"{msg}: {e.filename}"
    return msg


__all__ = ["COMMANDS", "build_parser", "main"]
