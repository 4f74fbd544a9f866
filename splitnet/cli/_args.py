"""Argument parsing shared by the commands: one-line errors, typed values, options derived from
the config dataclasses, and a stdout that survives a closed pipe. Standard library only."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys

from ..configs.config import DEVICES, MAX_BEAM, cli_fields
from ..configs.options import FIXED, FREE, MAX_SEED, type_name
from ..configs.run import SECTIONS

MAX_COUNT = 2**31 - 1   # the largest count an option takes (tokens, layers, windows, ...)


# What argparse takes for a negative number rather than an option: its own pattern knows only
# -1 and -0.5, so "--length-penalty -1e308" read -1e308 as an unknown option. Scientific
# notation, -inf / -nan (refused by the value's type with its own message), and a comma list
# that starts with one ("--step-sizes -0.1,0.1" was "expected one argument") are values.
_NUMBER = r"((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)"
NEGATIVE_NUMBER = re.compile(rf"^-{_NUMBER}(,[-+]?{_NUMBER})*$", re.IGNORECASE)


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage dump) and exit status 2, and
    whose negative numbers (``-1e308``, ``-inf``) are values (:data:`NEGATIVE_NUMBER`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------------------------------------
# value types (argparse calls them; an ArgumentTypeError becomes a one-line error)


def _fail(what: str, text: str):
    raise argparse.ArgumentTypeError(f"{what}, got {text!r}")


def _bounded_int(text: str, lo: int, hi: int, what: str, says_hi: bool = False) -> int:
    try:
        v = int(text)
    except ValueError:
        _fail(what, text)
    if v < lo:
        _fail(what, text)
    if v > hi:
        _fail(what if says_hi else f"{what} <= {hi:,}", text)
    return v


def positive_int(text: str) -> int:
    return _bounded_int(text, 1, MAX_COUNT, "expected a positive integer")


def beam_width(text: str) -> int:
    """A beam width: an integer in [1, :data:`~splitnet.configs.config.MAX_BEAM`]."""
    return _bounded_int(text, 1, MAX_BEAM, "expected a beam width, a positive integer")


def nonnegative_int(text: str) -> int:
    return _bounded_int(text, 0, MAX_COUNT, "expected an integer >= 0")


def seed(text: str) -> int:
    """A random seed: an integer in [0, 2**63 - 1] (what every generator of torch, numpy and
    Python takes)."""
    return _bounded_int(text, 0, MAX_SEED,
                        f"expected a seed, an integer >= 0 and <= {MAX_SEED:,}", says_hi=True)


def float_in(lo: float, hi: float, zero: bool = False):
    """The option type of a finite number in [lo, hi] (and 0 itself when ``zero``)."""
    what = (f"expected a number >= 0: 0 or one in [{lo:g}, {hi:g}]" if zero else
            f"expected a number in [{lo:g}, {hi:g}]")

    def parse(text: str) -> float:
        v = finite_float(text)
        if (zero and v == 0) or lo <= v <= hi:
            return v + 0.0        # -0.0 -> 0.0
        _fail(what, text)

    parse.__name__ = "number"
    return parse


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
    """Schemes on the command line: names and s/f/x patterns separated by commas, and stage
    strings (``c:0.5,d:1,c:0.5``), whose commas separate stages: consecutive items with ':' are
    one stage string. ``;`` separates schemes outright, so two stage strings in a row are
    ``c:1,d:1;c:0.5,d:1,c:0.5`` (or give the option twice: the values add up)."""
    out = []
    for group in text.split(";"):
        stages = []
        for item in (x.strip() for x in group.split(",")):
            if not item:
                continue
            if ":" in item:
                stages.append(item)
                continue
            if stages:
                out.append(",".join(stages))
                stages = []
            out.append(item)
        if stages:
            out.append(",".join(stages))
    if not out:
        _fail("expected schemes: names, patterns or stage strings separated by ',' or ';'", text)
    return out


SCHEME_LIST_HELP = ("names and s/f patterns separated by commas; a stage string such as "
                    "c:0.5,d:1,c:0.5 counts as one scheme; ';' separates two stage strings in a "
                    "row (or repeat the option)")


def csv_floats(text: str) -> list[float]:
    return [finite_float(x) for x in csv(text)]


def csv_positive_ints(text: str) -> list[int]:
    return [positive_int(x) for x in csv(text)]


def csv_seeds(text: str) -> str:
    """Comma-separated seeds, checked and given back as one string (``'0, 1'`` -> ``'0,1'``),
    for scripts that split it themselves."""
    return ",".join(str(seed(x)) for x in csv(text))


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
    t = type_name(f)
    if t.startswith("int"):
        return int
    if t.startswith("float"):
        return finite_float
    return nonempty


def _default_text(f: dataclasses.Field, defaults: dict) -> str:
    v = defaults.get(f.name, f.default if f.default is not dataclasses.MISSING else None)
    if isinstance(v, tuple):          # as it is typed: K,K,... (an empty one: none)
        v = ",".join(map(str, v)) or None
    return "" if v is None else f" (default {v})"


def add_config_options(group, cls, defaults: dict | None = None, skip=()) -> None:
    """One option per command-line field of dataclass ``cls`` (``--d-model`` for ``d_model``),
    with its help text from the field's metadata. Every default is None, so the parsed args tell
    which options were given (for ``--resume``). Booleans: ``--x`` and ``--no-x`` (one option
    serves configs whose defaults differ: a language model's head is tied, a translation
    model's is not)."""
    defaults = defaults or {}
    for f in cli_fields(cls):
        if f.name in skip:
            continue
        help_ = f.metadata.get("help", "")
        if f.metadata.get("resume") == FREE:
            help_ += " [may change on --resume]"
        flag = "--" + f.name.replace("_", "-")
        if type_name(f) == "bool":
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction,
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


def given_args(args) -> set[str]:
    """The options the command line gave: every destination whose parsed value is neither None
    nor False. An option that a table of :func:`check_only_with` names declares ``default=None``
    (its default applied after the check), so that typing it at its default counts as given."""
    return {k for k, v in vars(args).items() if v is not None and v is not False}


def check_only_with(args, table) -> None:
    """A command's options that only apply alongside others, the one check
    (:func:`splitnet.configs.options.check_applicable`): ``table`` maps a destination to
    ``(needs, applies(args))``; one typed where it does not apply is refused, one line,
    before any work."""
    from ..configs.options import check_applicable

    check_applicable(args, given_args(args), table)


def fixed_options(cls) -> list[str]:
    """Names of the options of ``cls`` that define a run (fixed on --resume)."""
    return [f.name for f in cli_fields(cls) if f.metadata.get("resume", FIXED) == FIXED]


def check_writable(path, flag: str = "--out") -> None:
    """An output file we can create or replace (:func:`splitnet._io.check_output_file`: a new
    name or a regular file, never a directory, device or FIFO, in a writable folder)."""
    from .._io import check_output_file

    check_output_file(path, flag)


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


# ---------------------------------------------------------------------------------------------
# options several commands share, each declared here once


def _train_help(name: str) -> str:
    """The help text of the run option ``name`` (:mod:`splitnet.configs.run`): a command that
    takes the same option says what ``splitnet train`` says."""
    return next(f for cls in SECTIONS.values() for f in cli_fields(cls)
                if f.name == name).metadata["help"]


def add_model_source(p, *, required: bool = True, task: str = "", what: str = "",
                     hf: str | None = None) -> None:
    """The model a command loads: ``--checkpoint DIR`` (a ``splitnet train`` run directory or
    its checkpoint.pt), with ``hf`` also ``--hf DIR`` (a Hugging Face directory), then
    ``--trust-checkpoint`` (help from :class:`TrainConfig`).

    ``task``: the train option that writes such a checkpoint (``" --task translate"``); ``what``:
    appended to --checkpoint's help (what the command does with it); ``hf``: appended to --hf's
    help. With ``hf`` and ``required``, exactly one of the two is required (argparse refuses
    both); with ``hf`` and not ``required``, the command refuses both itself."""
    src = p.add_mutually_exclusive_group(required=True) if hf is not None and required else p
    src.add_argument("--checkpoint", metavar="DIR", type=nonempty, required=required and src is p,
                     help=f"directory holding checkpoint.pt from 'splitnet train{task}' (or the "
                          f"file){what}")
    if hf is not None:
        src.add_argument("--hf", metavar="DIR", type=nonempty,
                         help=f"a Hugging Face model directory (GPT-2, GPT-NeoX, Llama, Qwen2, "
                              f"Mistral, or one written by 'splitnet export'){hf} (needs: pip "
                              f"install 'splitnet[hf]')")
    p.add_argument("--trust-checkpoint", action="store_true",
                   help=_train_help("trust_checkpoint"))


def add_device_option(p) -> None:
    """``--device auto|cpu|cuda`` (help from :class:`TrainConfig`); :func:`torch_device` turns
    it into a torch device."""
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help=f"{_train_help('device')} (default auto)")


def add_output_option(p, flag: str, help: str, default: str | None = None,
                      metavar: str | None = "PATH", **kw):
    """An option naming a file the command writes, the one way every command declares one: an
    empty value is refused by the parser (:func:`nonempty`: ``expected a non-empty value``),
    one line before any work, never skipped as "not given" nor resolved to the current folder;
    the command checks the path itself before any work (:func:`splitnet._io.check_outputs`).
    The action is marked ``output = True`` (tests/test_only_with.py finds every one)."""
    action = p.add_argument(flag, type=nonempty, default=default, metavar=metavar, help=help,
                            **kw)
    action.output = True
    return action


class _Replaced(argparse.Action):
    """The old spelling of an option whose meaning it no longer has in this command: any use,
    with or without a value, is a one-line error naming the new spelling (hidden from
    --help). One flag name, one meaning, across every command: a script that used the old
    spelling is told, never silently reinterpreted."""

    replaced = True          # not an option of this command (tests/test_only_with.py)

    def __init__(self, option_strings, dest, message: str = "", **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs="?",
                         default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.message = message

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(self.message)


def add_replaced_option(p, flag: str, message: str) -> None:
    """``flag`` refused in this command with ``message`` (what it is called here now, or what
    it means elsewhere): :class:`_Replaced`."""
    p.add_argument(flag, action=_Replaced, message=message)


def one_scheme(text: str) -> str:
    """One scheme (a name, a pattern or one stage string), as ``splitnet train --scheme``
    takes it; a list of them, or ``all``, is the plural option's."""
    items = scheme_list(text)
    if len(items) > 1 or items == ["all"]:
        _fail("expected one scheme, as splitnet train takes it (several, or all: --schemes)",
              text)
    return items[0]


def one_method(text: str) -> str:
    """One sub-flow method, as ``splitnet train --method`` takes it; several are --methods."""
    items = csv(text)
    if len(items) > 1:
        _fail("expected one sub-flow method, as splitnet train takes it (several: --methods)",
              text)
    return items[0]


class _Singular(argparse.Action):
    """The singular spelling of a list option (``--scheme`` beside ``--schemes``): one value,
    stored as a list of one in the plural's destination."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, [values])


def add_singular(group, flag: str, plural_dest: str, one, what: str) -> None:
    """``flag`` (``--scheme``, ``--method``) taking ONE value as every command's singular
    spelling does (``one``: :func:`one_scheme`, :func:`one_method`), into the destination of
    the plural list option ``plural_dest``; put both in one mutually exclusive ``group``."""
    group.add_argument(flag, dest=plural_dest, type=one, action=_Singular, default=None,
                       metavar=flag.strip("-").upper(),
                       help=f"one {what} (the same as --{plural_dest} with one)")


def add_progress_option(p) -> None:
    """``--progress`` / ``--no-progress``: a progress bar on stderr, drawn even when stderr is
    not a terminal / never; default: when stderr is a terminal (:func:`shows_progress`)."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")


def shows_progress(asked: bool | None) -> bool:
    """What :func:`add_progress_option` asked for: True, False, or None (stderr a terminal or
    a notebook, :func:`splitnet.runenv.draws_progress`)."""
    from ..runenv import draws_progress

    return draws_progress() if asked is None else bool(asked)


def add_png_option(p, default: str) -> None:
    """``--out`` of a command that draws one figure: the PNG to write (checked by
    :func:`check_writable` before any work)."""
    add_output_option(p, "--out", f"PNG to write (default {default})", default=default,
                      metavar=None)


def add_threads_option(p) -> None:
    """``--threads N`` (CPU threads of the work; default:
    :func:`splitnet.runenv.default_threads`,
    which leaves cores that other processes keep busy)."""
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="CPU threads (default: the cores not busy with other processes, at "
                        "least 1; see splitnet.runenv.default_threads)")


def set_threads(n: int | None) -> int:
    """Set torch's CPU threads to ``n`` (None: :func:`splitnet.runenv.default_threads`);
    returns the number set. Imports torch: call it from ``run``."""
    import torch

    from ..runenv import default_threads

    n = n or default_threads()
    if n != torch.get_num_threads():
        torch.set_num_threads(n)
    return n


def torch_device(name: str):
    """``--device auto|cpu|cuda[:k]`` as a torch device (auto: CUDA when available); asking for
    CUDA where there is none, or a name torch does not know, is a one-line ValueError. Imports
    torch: call it from ``run``, not from a parser."""
    import torch

    if name.split(":")[0] == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {name}: no CUDA device is available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return torch.device(name)
    except RuntimeError as e:
        raise ValueError(f"--device {name!r}: {e}") from None


__all__ = ["MAX_COUNT", "NEGATIVE_NUMBER", "SCHEME_LIST_HELP", "OneLineParser",
           "add_config_options", "add_device_option", "add_model_source", "add_output_option",
           "add_png_option", "add_progress_option", "add_replaced_option", "add_singular",
           "add_threads_option", "beam_width", "check_only_with", "check_writable", "csv",
           "csv_floats", "csv_positive_ints", "csv_seeds", "finite_float", "fixed_options",
           "float_in",
           "given_args", "given_options", "nonempty", "nonnegative_int", "one_method", "one_scheme",
           "positive_int", "scheme_list", "seed", "set_stdout_guard", "set_threads",
           "shows_progress", "torch_device"]
