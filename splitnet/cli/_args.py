"""Argument parsing shared by the commands: one-line errors, typed values, options derived from
the config dataclasses, and a stdout that survives a closed pipe. Standard library only."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from pathlib import Path

from ..config import FIXED, FREE, cli_fields


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------------------------
# value types (argparse calls them; an ArgumentTypeError becomes a one-line error)


def _fail(what: str, text: str):
    raise argparse.ArgumentTypeError(f"{what}, got {text!r}")


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        _fail("expected a positive integer", text)
    if v < 1:
        _fail("expected a positive integer", text)
    return v


def nonnegative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        _fail("expected an integer >= 0", text)
    if v < 0:
        _fail("expected an integer >= 0", text)
    return v


def finite_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        _fail("expected a number", text)
    if not math.isfinite(v):
        _fail("expected a finite number", text)
    return v


def csv(text: str) -> list[str]:
    """Comma-separated names; empty items dropped; nothing at all is an error."""
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        _fail("expected a comma-separated list", text)
    return items


def scheme_list(text: str) -> list[str]:
    """Schemes on the command line: names, patterns or stage strings separated by ``;``. A
    stage string holds commas itself (``c:0.5,d:1,c:0.5``), so without a ``;`` a text with a
    ``:`` is one stage string and one without is a comma-separated list of names."""
    if ";" in text:
        parts = text.split(";")
    elif ":" in text:
        parts = [text]
    else:
        parts = text.split(",")
    items = [x.strip() for x in parts if x.strip()]
    if not items:
        _fail("expected schemes separated by ';' (names, patterns or stage strings)", text)
    return items


def csv_floats(text: str) -> list[float]:
    return [finite_float(x) for x in csv(text)]


def csv_positive_ints(text: str) -> list[int]:
    return [positive_int(x) for x in csv(text)]


def nonempty(text: str) -> str:
    if not text.strip():
        _fail("expected a non-empty value", text)
    return text


# ---------------------------------------------------------------------------------------------
# options derived from a config dataclass


def _type_of(f: dataclasses.Field):
    parse = f.metadata.get("parse")
    if parse is not None:
        def typed(text, parse=parse):
            try:
                return parse(text)
            except ValueError as e:
                raise argparse.ArgumentTypeError(str(e)) from None
        typed.__name__ = f.name
        return typed
    t = str(f.type)
    if t.startswith("int"):
        return int
    if t.startswith("float"):
        return finite_float
    return nonempty


def _default_text(f: dataclasses.Field, defaults: dict) -> str:
    v = defaults.get(f.name, f.default if f.default is not dataclasses.MISSING else None)
    return "" if v is None else f" (default {v})"


def add_config_options(group, cls, defaults: dict | None = None, skip=()) -> None:
    """One option per command-line field of dataclass ``cls`` (``--d-model`` for ``d_model``),
    with its help text from the field's metadata. Every default is None, so the parsed args tell
    which options were given (for ``--resume``). Booleans: ``--x`` when the default is False,
    ``--no-x`` when it is True."""
    defaults = defaults or {}
    for f in cli_fields(cls):
        if f.name in skip:
            continue
        help_ = f.metadata.get("help", "")
        if f.metadata.get("resume") == FREE:
            help_ += " [may change on --resume]"
        flag = "--" + f.name.replace("_", "-")
        if str(f.type) == "bool":
            on = defaults.get(f.name, f.default)
            flag = "--no-" + f.name.replace("_", "-") if on else flag
            group.add_argument(flag, dest=f.name, action="store_const", const=not on,
                               default=None, help=help_)
            continue
        kw = {"dest": f.name, "default": None, "help": help_ + _default_text(f, defaults)}
        if f.metadata.get("choices"):
            kw["choices"] = list(f.metadata["choices"])
        else:
            kw["type"] = _type_of(f)
        if f.metadata.get("metavar"):
            kw["metavar"] = f.metadata["metavar"]
        if f.metadata.get("const") is not None:     # the flag alone means this value
            kw.update(nargs="?", const=f.metadata["const"])
        group.add_argument(flag, **kw)


def given_options(args, cls, skip=()) -> dict:
    """The options of ``cls`` given on the command line: ``{name: value}``."""
    out = {}
    for f in cli_fields(cls):
        if f.name not in skip and getattr(args, f.name, None) is not None:
            out[f.name] = getattr(args, f.name)
    return out


def fixed_options(cls) -> list[str]:
    """Names of the options of ``cls`` that define a run (fixed on --resume)."""
    return [f.name for f in cli_fields(cls) if f.metadata.get("resume", FIXED) == FIXED]


def check_writable(path, flag: str = "--out") -> None:
    """An output file we can create: not a directory, its folder exists and is writable (tried
    for real, see :func:`splitnet._io.probe_writable`)."""
    from .._io import probe_writable

    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{flag} {p} is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{flag} {p}: directory {parent} does not exist")
    try:
        probe_writable(parent)
    except OSError as e:
        raise ValueError(f"{flag} {p}: cannot write to {parent} ({e.strerror})") from None


# ---------------------------------------------------------------------------------------------
# stdout


class _PipeSafeStdout:
    """Wraps stdout: once the reader has gone (``| head``), writes go to /dev/null instead of
    raising, so a command still finishes and returns its own exit status."""

    def __init__(self, stream):
        self._stream = stream
        self._broken = False

    def _guard(self, fn, *a):
        if self._broken:
            return None
        try:
            return fn(*a)
        except BrokenPipeError:
            self._broken = True
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
            return None

    def write(self, s):
        self._guard(self._stream.write, s)
        return len(s)

    def flush(self):
        self._guard(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def set_stdout_guard() -> None:
    """Install :class:`_PipeSafeStdout` when stdout is a real file (not a test's capture)."""
    if isinstance(sys.stdout, _PipeSafeStdout):
        return
    try:
        sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return
    sys.stdout = _PipeSafeStdout(sys.stdout)


def torch_device(name: str):
    """``--device auto|cpu|cuda`` as a torch device (auto: CUDA when available); asking for CUDA
    where there is none is a one-line error. Imports torch: call it from ``run``, not from a
    parser."""
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


__all__ = ["OneLineParser", "add_config_options", "check_writable", "csv", "csv_floats",
           "csv_positive_ints", "finite_float", "fixed_options", "given_options", "nonempty",
           "nonnegative_int", "positive_int", "scheme_list", "set_stdout_guard", "torch_device"]
