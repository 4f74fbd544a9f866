"""``python3 -m splitnet.dev mutate``: mutation testing of the modules where a silent bug
corrupts results, with mutmut (the ``mutation`` extra: ``pip install -e ".[mutation]"``).

    python3 -m splitnet.dev mutate splitnet/order/check.py   # one module, against its tests
    python3 -m splitnet.dev mutate --all                     # every configured module
    python3 -m splitnet.dev mutate --changed [REV]           # the functions a change touched
    python3 -m splitnet.dev mutate --list                    # the modules and their tests

A mutant is the module with one small change (``<`` for ``<=``, ``a + 1`` for ``a``, a
constant altered, a call's argument dropped ...); it is *caught* when a test fails (or runs
past mutmut's time limit) and *survives* when every test passes. The score of a module is
caught / mutants. Each module is mutated against only the test files :data:`MODULES` maps it
to, in a work folder of its own (``mutants/<module>/``, which mutmut fills with a mutated copy
of the package and reuses: a second run re-tests only the functions whose source changed), and
mutmut runs only the tests that call the mutated function. Statements that raise or warn are
not mutated: their messages are the error catalogue's business (docs/errors.md), not a silent
corruption of a result.

``--changed REV`` mutates the functions (mutmut's unit: a function or a method) containing a
line that ``git diff REV`` adds or changes in a configured module, the working tree included.
A full-module run is checked against the ratchet, the score recorded in
``tests/data/mutation_scores.json``: lower is an exit status of 1. ``--record`` writes a
module's new score there (never a lower one) and the table into docs/testing.md.
Standard library only (mutmut runs as a child process).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..names import unknown_name
from .docblocks import write_blocks
from .targets import ROOT

__all__ = ["ALSO_COPY", "CAUGHT", "DOC", "MODULES", "PROG", "SCORES", "SKIP_PATTERNS", "WORK",
           "Score",
           "add_parser", "changed_lines", "config_text", "dotted", "format_list", "load_scores",
           "mutant_globs", "mutate_one", "render_table", "run", "score_of", "select",
           "touched_functions"]

# The one list: each configured module and the test files its mutants are run against (the
# tests that state its behaviour; mutmut then runs, per mutant, those of them that call the
# mutated function).
MODULES: dict[str, tuple[str, ...]] = {
    "splitnet/order/check.py": ("tests/test_check.py", "tests/test_mutation_order.py"),
    "splitnet/order/fit.py": ("tests/test_check.py", "tests/test_mutation_order.py"),
    "splitnet/order/conditions.py": ("tests/test_learned.py", "tests/test_mutation_order.py"),
    "splitnet/integrators/flows.py": ("tests/test_flows.py", "tests/test_mutation_flows.py"),
    "splitnet/integrators/subflows.py": ("tests/test_subflows.py",
                                         "tests/test_mutation_subflows.py"),
    "splitnet/fields/attention.py": ("tests/test_fields.py", "tests/test_mutation_fields.py"),
    "splitnet/fields/cross.py": ("tests/test_parity.py", "tests/test_seq2seq.py",
                                 "tests/test_mutation_cross.py"),
    "splitnet/nets/learned.py": ("tests/test_learned.py", "tests/test_mutation_learned.py"),
    "splitnet/nets/generation.py": ("tests/test_generation.py", "tests/test_kvcache.py",
                                    "tests/test_mutation_generation.py"),
    "splitnet/nets/decoding.py": ("tests/test_seq2seq.py", "tests/test_reversible_seq2seq.py",
                                  "tests/test_mutation_decoding.py"),
    "splitnet/runs/checkpoint.py": ("tests/test_checkpoint_integrity.py",
                                    "tests/test_reliability.py", "tests/test_hostile_files.py",
                                    "tests/test_mutation_checkpoint.py"),
    "splitnet/runs/lock.py": ("tests/test_reliability.py", "tests/test_hostile.py",
                              "tests/test_mutation_checkpoint.py"),
}
# Lines whose statements are not mutated (regular expressions, mutmut's do_not_mutate_patterns).
# what some tests read beside the package (test_parity imports benchmarks/parity.py,
# test_seq2seq checks docs/translation.md and README.md against experiments/)
ALSO_COPY = ("benchmarks", "docs", "experiments", "README.md")
SKIP_PATTERNS = (r"^\s*raise\b", r"^\s*warnings\.warn\(")
SCORES = ROOT / "tests" / "data" / "mutation_scores.json"
DOC = ROOT / "docs" / "testing.md"
WORK = ROOT / "mutants"
PROG = "python3 -m splitnet.dev mutate"
CAUGHT = ("killed", "timeout", "segfault")   # mutmut's statuses that count as caught


def add_parser(sub, help: str) -> None:
    """The ``mutate`` subcommand on ``sub`` (the subparsers of ``python3 -m splitnet.dev``)."""
    m = sub.add_parser("mutate", help=help,
                       description="Mutation-test modules against their mapped tests; "
                                   "'--list' shows the modules.")
    m.add_argument("modules", nargs="*", metavar="MODULE", help="e.g. splitnet/order/check.py")
    m.add_argument("--all", action="store_true", help="every configured module")
    m.add_argument("--changed", nargs="?", const="HEAD", default=None, metavar="REV",
                   help="the functions that 'git diff REV' touches (default REV: HEAD)")
    m.add_argument("--survivors", action="store_true",
                   help="re-test only the mutants the last run of each module did not catch "
                        "(after adding tests; mutmut keeps every other result)")
    m.add_argument("--list", action="store_true", help="print the modules and their tests")
    m.add_argument("--record", action="store_true",
                   help="write the new scores to the ratchet and docs/testing.md")
    m.add_argument("--show", action="store_true", help="print each survivor's diff")
    m.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")


def _module_path(text: str) -> str:
    """``text`` (a path, absolute or from the root, or a dotted name) as its key in MODULES."""
    p = text.strip()
    if not p.endswith(".py") and "/" not in p:
        p = p.replace(".", "/") + ".py"
    path = Path(p)
    if path.is_absolute():
        try:
            path = path.resolve().relative_to(ROOT)
        except ValueError:
            pass
    key = path.as_posix()
    if key not in MODULES:
        raise ValueError(unknown_name("module", key, MODULES,
                                      listed_by=f"{PROG} --list"))
    return key


def changed_lines(diff: str) -> dict[str, set[int]]:
    """``{path: lines}`` of a ``git diff -U0`` text: the new-side lines each hunk adds or
    changes; a pure deletion counts the line after it (the function that lost code)."""
    out: dict[str, set[int]] = {}
    path = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            name = line[4:].strip()
            path = None if name == "/dev/null" else re.sub(r"^b/", "", name)
        elif line.startswith("@@") and path is not None:
            m = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", line)
            if m is None:
                continue
            start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            lines = range(start, start + count) if count else (max(start, 1),)
            out.setdefault(path, set()).update(lines)
    return out


def touched_functions(source: str, lines: set[int]) -> list[str]:
    """mutmut's names (``x_f`` for a function, ``xǁCǁm`` for a method of a top-level class)
    of the outermost functions whose lines (decorators included) contain one of ``lines``, in
    source order; lines outside every function touch nothing mutmut mutates."""
    def hit(node) -> bool:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        return any(first <= n <= node.end_lineno for n in lines)

    funcs = (ast.FunctionDef, ast.AsyncFunctionDef)
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, funcs) and hit(node):
            names.append(f"x_{node.name}")
        elif isinstance(node, ast.ClassDef):
            names += [f"xǁ{node.name}ǁ{f.name}" for f in node.body
                      if isinstance(f, funcs) and hit(f)]
    return names


def dotted(module: str) -> str:
    """``splitnet/order/check.py`` -> ``splitnet.order.check`` (mutmut's prefix of its mutants)."""
    return module[:-len(".py")].replace("/", ".")


def mutant_globs(module: str, functions: list[str]) -> list[str]:
    """The ``mutmut run`` patterns of every mutant of ``functions`` in ``module``."""
    return [f"{dotted(module)}.{f}__mutmut_*" for f in functions]


def select(args, diff: str | None = None) -> list[tuple[str, list[str] | None]]:
    """``[(module, mutant patterns or None for all), ...]`` for parsed ``args``; ``diff``: the
    ``git diff -U0`` text for ``--changed`` (read from git when None). ValueError on bad
    input."""
    if sum(map(bool, (args.modules, args.all, args.changed is not None))) != 1:
        raise ValueError("name MODULE ..., or --all, or --changed [REV] (one of them)")
    if args.all:
        return [(m, None) for m in MODULES]
    if args.modules:
        return [(m, None) for m in dict.fromkeys(_module_path(t) for t in args.modules)]
    if diff is None:
        diff = _git("diff", "-U0", args.changed, "--", *MODULES)
    todo = []
    for module, lines in changed_lines(diff).items():
        if module in MODULES:
            funcs = touched_functions((ROOT / module).read_text(), lines)
            if funcs:
                todo.append((module, mutant_globs(module, funcs)))
    return todo


def _git(*argv: str) -> str:
    r = subprocess.run(["git", *argv], cwd=ROOT, capture_output=True, text=True, check=False)
    if r.returncode:
        raise ValueError(f"git {' '.join(argv[:3])}: {r.stderr.strip().splitlines()[-1]}")
    return r.stdout


def _tests(module: str) -> list[str]:
    """``module``'s mapped test files that exist (a test file is added with the tests that
    kill its survivors; tests/test_mutate.py checks every mapped file exists)."""
    return [t for t in MODULES[module] if (ROOT / t).is_file()]


def _toml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def config_text(module: str, pyproject: str) -> str:
    """The work folder's pyproject.toml: the repository's (its pytest options), less any
    ``[tool.mutmut]`` table, and a ``[tool.mutmut]`` that mutates ``module`` only and selects
    its tests. Each worker is forked from a server that never ran torch (torch is not fork
    safe once its threads have started)."""
    base = re.sub(r"\n\[tool\.mutmut\]\n.*?(?=\n\[|\Z)", "", pyproject, flags=re.DOTALL)
    return base.rstrip("\n") + "\n\n" + "\n".join([
        "[tool.mutmut]   # written by python3 -m splitnet.dev mutate",
        'source_paths = ["splitnet"]',
        f"also_copy = {_toml_list(ALSO_COPY)}",
        f"only_mutate = {_toml_list([module])}",
        f"pytest_add_cli_args_test_selection = {_toml_list(_tests(module))}",
        f"do_not_mutate_patterns = {_toml_list(SKIP_PATTERNS)}",
        'process_isolation = "forkserver"',
    ]) + "\n"


def _workdir(module: str) -> Path:
    """``mutants/<module>/``: links to the package, the tests and :data:`ALSO_COPY`, and the
    configuration."""
    work = WORK / dotted(module)
    work.mkdir(parents=True, exist_ok=True)
    for name in ("splitnet", "tests", *ALSO_COPY):
        if not (work / name).is_symlink():
            (work / name).symlink_to(ROOT / name, target_is_directory=True)
    text = config_text(module, (ROOT / "pyproject.toml").read_text())
    cfg = work / "pyproject.toml"
    if not cfg.exists() or cfg.read_text() != text:
        cfg.write_text(text)
    return work


@dataclass(frozen=True)
class Score:
    """Counts of one module's mutants by mutmut status; ``caught`` = killed + timeout."""

    statuses: dict

    @property
    def mutants(self) -> int:
        return sum(self.statuses.values())

    @property
    def caught(self) -> int:
        return sum(self.statuses.get(s, 0) for s in CAUGHT)

    @property
    def ratio(self) -> float:
        return self.caught / self.mutants if self.mutants else 0.0

    def line(self) -> str:
        rest = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items())
                         if s not in ("killed",) and n)
        return f"{self.caught}/{self.mutants} caught ({100 * self.ratio:.1f} %); {rest or '-'}"


def score_of(results: dict[str, str]) -> Score:
    """The Score of ``{mutant: status}``."""
    counts: dict[str, int] = {}
    for status in results.values():
        counts[status] = counts.get(status, 0) + 1
    return Score(counts)


def _mutmut(work: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "mutmut", *argv], cwd=work, env=env,
                          text=True, capture_output=True, check=False)


def _results(work: Path, module: str, patterns: list[str] | None) -> dict[str, str]:
    """``{mutant: status}`` of ``module``'s mutants in ``work`` (those matching
    ``patterns``)."""
    out = _mutmut(work, "results", "--all", "true").stdout
    found = dict(re.findall(r"^\s+(\S+): (.+)$", out, flags=re.MULTILINE))
    prefix = dotted(module) + "."
    keep = {k: v for k, v in found.items() if k.startswith(prefix)}
    if patterns:
        keep = {k: v for k, v in keep.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
    return keep


def load_scores(path: Path = SCORES) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"modules": {}}


def render_table(scores: dict) -> str:
    """The markdown table of docs/testing.md from the ratchet's JSON."""
    rows = ["| module | tests | before | after | measured at |", "|---|---|---|---|---|"]
    for module, entry in scores["modules"].items():
        cells = []
        for when in ("before", "after"):
            s = Score(entry[when])
            cells.append(f"{s.caught}/{s.mutants} ({100 * s.ratio:.1f} %)")
        tests = ", ".join(f"`{Path(t).name}`" for t in MODULES.get(module, ()))
        rows.append(f"| `{module}` | {tests} | {cells[0]} | {cells[1]} | {entry['commit']} |")
    return "\n".join(rows)


def _commit(module: str) -> str:
    head = _git("rev-parse", "--short", "HEAD").strip()
    dirty = _git("status", "--porcelain", "--", module, *MODULES[module]).strip()
    return head + ("+changes" if dirty else "")


def _record(module: str, score: Score, commit: str) -> int:
    """Write ``score`` as ``module``'s "after" (and "before", when the module is new), measured
    at ``commit``, in the ratchet, and the table into docs/testing.md; 1 and nothing written
    when it is lower."""
    scores = load_scores()
    entry = scores["modules"].get(module)
    if entry is not None and score.ratio < Score(entry["after"]).ratio:
        print(f"{PROG}: not recorded: {module} scores below its recorded "
              f"{100 * Score(entry['after']).ratio:.1f} %", file=sys.stderr)
        return 1
    entry = entry or {"before": dict(score.statuses)}
    entry.update(after=dict(score.statuses), commit=commit)
    scores["modules"][module] = entry
    scores["modules"] = {m: scores["modules"][m] for m in MODULES if m in scores["modules"]}
    SCORES.write_text(json.dumps(scores, indent=1, ensure_ascii=False) + "\n")
    write_blocks(DOC, "mutation", {"scores": render_table(scores)})
    print(f"recorded {module} in {SCORES.relative_to(ROOT)} and {DOC.relative_to(ROOT)}")
    return 0


def _ratchet(module: str, score: Score) -> int:
    """0 when ``score`` is not below the recorded one (or none is recorded), else 1."""
    entry = load_scores()["modules"].get(module)
    if entry is None:
        print(f"  ratchet: none recorded yet ({PROG} {module} --record)")
        return 0
    floor = Score(entry["after"]).ratio
    ok = score.ratio >= floor
    print(f"  ratchet: {100 * score.ratio:.1f} % {'>=' if ok else '<'} recorded "
          f"{100 * floor:.1f} %")
    return 0 if ok else 1


def mutate_one(module: str, patterns: list[str] | None, args) -> int:
    """Run mutmut on ``module`` (all of it, the mutants ``patterns`` name, or with
    ``args.survivors`` those the last run did not catch); print the score and the survivors.
    Returns the exit status."""
    work = _workdir(module)
    commit = _commit(module)          # what is measured: the tree as the run starts
    run_only = patterns
    if args.survivors:
        run_only = [k for k, v in _results(work, module, None).items() if v not in CAUGHT]
    what = ("all functions" if run_only is None else f"{len(run_only)} survivors"
            if args.survivors else f"{len(run_only)} function(s)")
    print(f"{module}: {what}, tests {' '.join(_tests(module))} (in {work.relative_to(ROOT)})",
          flush=True)
    rc, log = 0, ""
    if run_only != []:    # [] (--survivors, all caught): nothing to run
        r = _mutmut(work, "run", "--max-children", str(args.jobs), *(run_only or []))
        rc, log = r.returncode, r.stdout + r.stderr
    results = _results(work, module, patterns)
    if rc or not results:
        print("\n".join(log.strip().splitlines()[-15:]), file=sys.stderr)
        print(f"{PROG}: error: mutmut run failed on {module} (exit status {rc})",
              file=sys.stderr)
        return rc or 1
    score = score_of(results)
    print(f"  {score.line()}")
    for name, status in sorted(results.items()):
        if status not in CAUGHT:
            print(f"  {status}: {name}")
            if args.show:
                print(_mutmut(work, "show", name).stdout.rstrip())
    if patterns is not None:
        return 0
    if args.record:
        return _record(module, score, commit)
    return _ratchet(module, score)


def format_list() -> str:
    lines = [f"modules of '{PROG}' and the tests their mutants run against:"]
    lines += [f"{m}: {' '.join(t)}" for m, t in MODULES.items()]
    return "\n".join(lines)


def run(args) -> int:
    """``mutate``'s main: exit status 2 on bad input (one line), before anything runs."""
    if args.list:
        print(format_list())
        return 0
    try:
        todo = select(args)
        if (args.record or args.survivors) and args.changed is not None:
            raise ValueError("--record and --survivors go with whole modules, not --changed")
        if args.jobs < 1:
            raise ValueError(f"--jobs: expected a positive count, got {args.jobs}")
    except ValueError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    if importlib.util.find_spec("mutmut") is None:
        print(f"{PROG}: error: mutmut is not installed: pip install -e '.[mutation]'",
              file=sys.stderr)
        return 2
    if not todo:
        print(f"no function of a configured module changed since {args.changed}")
        return 0
    status = 0
    for module, patterns in todo:
        status = max(status, mutate_one(module, patterns, args))
    return status
