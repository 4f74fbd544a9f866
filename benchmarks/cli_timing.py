"""Shared by the benchmarks that time a `splitnet` command end to end, in a fresh process each
run, as a user runs it: the parser (``--runs`` and the command's own arguments after ``--``),
the timed runs, and the markdown row for docs/benchmarks.md."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time

from splitnet.cli._args import positive_int


def parser(command: str, runs: int) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=f"Median wall time of `splitnet {command}`.")
    ap.add_argument("--runs", type=positive_int, default=runs,
                    help=f"number of runs (default {runs})")
    ap.add_argument("extra", nargs=argparse.REMAINDER,
                    help=f"arguments passed to `splitnet {command}` after `--`")
    return ap


def parse(ap: argparse.ArgumentParser, argv) -> tuple[argparse.Namespace, list[str]]:
    """The arguments, and the command's own ones (after ``--``)."""
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
    return args, [a for a in args.extra if a != "--"]


def splitnet() -> list[str]:
    """The installed console script, or ``python -m splitnet`` from a source tree."""
    exe = shutil.which("splitnet")
    return [exe] if exe else [sys.executable, "-m", "splitnet"]


def time_runs(cmd: list[str], runs: int, progress=None):
    """``(wall times, last completed process)``; stops at the first failing run (its process
    is returned: check ``returncode``)."""
    times, r = [], None
    for _ in (progress(range(runs)) if progress else range(runs)):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            break
    return times, r


def machine_row(cells: list[str]) -> str:
    """``| cells... | cores, processor, load | date |``: a row of docs/benchmarks.md."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"| {' | '.join(cells)} | {os.cpu_count()} cores, "
            f"{platform.processor() or platform.machine()}, load {load:.1f} | "
            f"{time.strftime('%Y-%m-%d')} |")


__all__ = ["machine_row", "parse", "parser", "splitnet", "time_runs"]
