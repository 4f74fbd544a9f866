"""``python3 -m splitnet.dev regen``: one command regenerates every generated document.

    python3 -m splitnet.dev regen                        # the fast, deterministic ones
    python3 -m splitnet.dev regen --list                 # every target: what it writes, how long
    python3 -m splitnet.dev regen theory costs           # the named ones
    python3 -m splitnet.dev regen zoo --only yoshida4    # re-measure one zoo method (minutes)

Each target runs its generator (a script under ``experiments/`` or a doc-sync test file) as a
child process from the repository root, with this checkout first on ``PYTHONPATH``; long ones
show their own progress bars. Bad input (an unknown target or zoo method) is one line on
stderr and exit status 2, before anything runs; a generator that fails stops the run with its
exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ..cli._args import OneLineParser
from ..names import unknown_name
from . import mutate
from .targets import DEFAULT, ROOT, TARGETS, Target

__all__ = ["COMMANDS", "PROG", "build_parser", "format_list", "main", "plan", "run_target"]

PROG = "python3 -m splitnet.dev"
COMMANDS = {"regen": "regenerate the generated documents (docs/*.md and their figures)",
            "mutate": "mutation-test the modules where a silent bug corrupts results"}


def build_parser() -> OneLineParser:
    p = OneLineParser(prog=PROG, description="Developer tools of the splitnet repository.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    r = sub.add_parser("regen", help=COMMANDS["regen"], description=(
        f"Regenerate generated documents. No TARGET: the fast, deterministic ones "
        f"({', '.join(DEFAULT)}). '--list' shows every target."))
    r.add_argument("targets", nargs="*", metavar="TARGET", help="targets to run (see --list)")
    r.add_argument("--list", action="store_true", help="print every target and stop")
    r.add_argument("--only", default=None, metavar="NAME[,NAME]",
                   help="zoo: re-measure these methods; the rest of docs/zoo.md from the cache")
    r.add_argument("--refresh", action="store_true",
                   help="zoo: re-measure every method (about an hour on 2 CPU cores)")
    mutate.add_parser(sub, COMMANDS["mutate"])
    return p


def format_list() -> str:
    """Every target, one block each: name (default or not), how long, what it writes, and
    the commands it runs."""
    lines = [f"targets of '{PROG} regen TARGET ...' (no TARGET: {' '.join(DEFAULT)}):", ""]
    for t in TARGETS.values():
        mark = " (default)" if t.name in DEFAULT else ""
        lines.append(f"{t.name}{mark}: {t.takes}")
        lines.append(f"    writes {t.writes}")
        for path, argv in t.prepare:
            lines.append(f"    first, if {path} is missing: python3 {' '.join(argv)}")
        lines += [f"    runs   {c}" for c in t.command_lines()]
    return "\n".join(lines)


def _zoo_names(text: str) -> list[str]:
    """The --only names, each a registered scheme (ValueError naming the first that is not)."""
    from ..integrators.schemes import available

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--only: expected method names, got {text!r}")
    every = available("splitting")
    for n in names:
        if n not in every:
            raise ValueError(unknown_name("zoo method", n, every))
    return names


def plan(args) -> list[tuple[Target, list[str]]]:
    """``[(target, extra arguments), ...]`` for parsed ``args``; ValueError on bad input."""
    names = list(dict.fromkeys(args.targets)) or list(DEFAULT)
    for n in names:
        if n not in TARGETS:
            raise ValueError(unknown_name("target", n, TARGETS))
    extra = []
    if args.only is not None or args.refresh:
        if "zoo" not in args.targets:
            raise ValueError("--only and --refresh go with the zoo target: "
                             f"{PROG} regen zoo --only NAME")
        if args.only is not None:
            extra = ["--only", ",".join(_zoo_names(args.only))]
        if args.refresh:
            extra.append("--refresh")
    return [(TARGETS[n], extra if n == "zoo" else []) for n in names]


def _run(argv: list[str]) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, check=False).returncode


def run_target(target: Target, extra: list[str], step: str = "") -> int:
    """Run ``target``'s preparation (what is missing) and commands; the first nonzero exit
    status, or 0. ``step``: e.g. ``[2/3] `` before its lines."""
    for path, argv in target.prepare:
        if not (ROOT / path).exists():
            print(f"{step}regen {target.name}: {path} is missing: python3 {' '.join(argv)}",
                  file=sys.stderr)
            rc = _run(list(argv))
            if rc:
                return rc
    for argv in target.commands:
        cmd = [*argv, *extra]
        print(f"{step}regen {target.name}: python3 {' '.join(cmd)}  ({target.takes})",
              file=sys.stderr)
        rc = _run(cmd)
        if rc:
            print(f"{PROG} regen: error: target {target.name}: 'python3 {' '.join(cmd)}' "
                  f"exited with status {rc}", file=sys.stderr)
            return rc
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and argv[0] not in COMMANDS:
        msg = unknown_name("command", argv[0], COMMANDS, listed_by=f"{PROG} --help")
        print(f"{PROG}: error: {msg}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    if args.command == "mutate":
        return mutate.run(args)
    if args.list:
        print(format_list())
        return 0
    try:
        todo = plan(args)
    except ValueError as e:
        print(f"{PROG} regen: error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    for i, (target, extra) in enumerate(todo, 1):
        rc = run_target(target, extra, f"[{i}/{len(todo)}] " if len(todo) > 1 else "")
        if rc:
            return rc
    print(f"regen: {', '.join(t.name for t, _ in todo)} done "
          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0
