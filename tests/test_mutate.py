"""``python3 -m splitnet.dev mutate`` (splitnet.dev.mutate): which modules and which functions a
run mutates, the configuration mutmut is given, and the ratchet (tests/data/mutation_scores.json)
that docs/testing.md's table is written from. No mutation run here (minutes each): these check
the selection logic and the recorded scores only."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import pytest

from splitnet.dev import mutate
from splitnet.dev.targets import ROOT

DIFF = """\
diff --git a/splitnet/order/check.py b/splitnet/order/check.py
index 1111111..2222222 100644
--- a/splitnet/order/check.py
+++ b/splitnet/order/check.py
@@ -10 +10 @@ FLOOR = 1e-13
-a
+b
@@ -40,0 +41,2 @@ def f():
+    x = 1
+    y = 2
@@ -70,3 +72,0 @@ def g():
-    gone
-    gone
-    gone
diff --git a/notes.txt b/notes.txt
deleted file mode 100644
--- a/notes.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-x
-y
"""

SOURCE = """\
LIMIT = 3


def f(a):
    return a + 1


@decorate
def g(a):
    def inner():
        return a
    return inner


class C:
    scale = 2

    def m(self):
        return self.scale

    @property
    def p(self):
        return 1
"""


def _args(modules=(), all=False, changed=None):
    return argparse.Namespace(modules=list(modules), all=all, changed=changed)


def test_changed_lines_are_the_new_side_of_each_hunk():
    """A one-line change (count omitted) is its line; an addition its new lines; a pure
    deletion the line after it; a deleted file nothing."""
    assert mutate.changed_lines(DIFF) == {"splitnet/order/check.py": {10, 41, 42, 72}}


@pytest.mark.parametrize("lines,names", [
    ({1}, []),                                    # a module-level constant: not a function
    ({5}, ["x_f"]),
    ({4, 5}, ["x_f"]),
    ({8}, ["x_g"]),                               # the decorator line belongs to g
    ({11}, ["x_g"]),                              # a nested function: its outer function
    ({16}, []),                                   # a class attribute
    ({19, 5}, ["x_f", "xǁCǁm"]),                  # source order
    ({22, 23}, ["xǁCǁp"]),
    ({6, 7}, []),                                 # blank lines between functions
])
def test_touched_functions_are_the_outermost_functions_around_the_lines(lines, names):
    assert mutate.touched_functions(SOURCE, lines) == names


def test_changed_selects_the_mutants_of_the_touched_functions_of_configured_modules():
    src = (ROOT / "splitnet/order/check.py").read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if s.startswith("def _verdict("))
    diff = (f"+++ b/splitnet/order/check.py\n@@ -{line + 1} +{line + 1} @@\n"
            "+++ b/splitnet/geometry.py\n@@ -5 +5 @@\n")
    assert mutate.select(_args(changed="HEAD"), diff) == [
        ("splitnet/order/check.py", ["splitnet.order.check.x__verdict__mutmut_*"])]
    assert mutate.select(_args(changed="HEAD"), "") == []


def test_modules_are_named_by_path_or_dotted_name_and_all_means_every_one():
    assert mutate.select(_args(["splitnet.order.check", str(ROOT / "splitnet/order/check.py"),
                                "splitnet/nets/learned.py"])) == [
        ("splitnet/order/check.py", None), ("splitnet/nets/learned.py", None)]
    assert [m for m, _ in mutate.select(_args(all=True))] == list(mutate.MODULES)


@pytest.mark.parametrize("args,message", [
    (_args(["splitnet/order/chek.py"]), "unknown module 'splitnet/order/chek.py'; did you mean "
                                        "splitnet/order/check.py"),
    (_args(), "one of them"),
    (_args(["splitnet/order/check.py"], all=True), "one of them"),
    (_args(all=True, changed="HEAD"), "one of them"),
])
def test_bad_selection_is_refused(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        mutate.select(args, "")


def test_every_configured_module_and_mapped_test_file_exists():
    for module, tests in mutate.MODULES.items():
        assert (ROOT / module).is_file(), module
        assert tests and all((ROOT / t).is_file() for t in tests), (module, tests)


def test_config_mutates_one_module_against_its_tests_and_keeps_pytest_options():
    tomllib = pytest.importorskip("tomllib")
    module = "splitnet/nets/learned.py"
    pyproject = (ROOT / "pyproject.toml").read_text()
    stale = pyproject + '\n[tool.mutmut]\nonly_mutate = ["x.py"]\n'
    for base in (pyproject, stale):
        cfg = tomllib.loads(mutate.config_text(module, base))
        mm = cfg["tool"]["mutmut"]
        assert mm["only_mutate"] == [module]
        assert mm["pytest_add_cli_args_test_selection"] == list(mutate.MODULES[module])
        assert mm["do_not_mutate_patterns"] == list(mutate.SKIP_PATTERNS)
        assert cfg["tool"]["pytest"] == tomllib.loads(pyproject)["tool"]["pytest"]


@pytest.mark.parametrize("line,skipped", [
    ("        raise ValueError(f'bad {x}')", True),
    ("    warnings.warn('slow', stacklevel=2)", True),
    ("    error = raise_to(x)", False),
    ("    return a <= b", False),
])
def test_only_raise_and_warn_statements_are_left_unmutated(line, skipped):
    assert any(re.search(p, line) for p in mutate.SKIP_PATTERNS) == skipped


def test_score_counts_killed_and_timeout_as_caught():
    s = mutate.score_of({"a": "killed", "b": "survived", "c": "timeout", "d": "no tests"})
    assert (s.caught, s.mutants, s.ratio) == (2, 4, 0.5)
    assert s.line() == "2/4 caught (50.0 %); 1 no tests, 1 survived, 1 timeout"


def test_the_ratchet_never_went_down_and_docs_testing_shows_it():
    """Every recorded module's score after the review is at least its score before; the table
    in docs/testing.md is the one rendered from the JSON (``--record`` writes both)."""
    scores = mutate.load_scores()
    assert set(scores["modules"]) <= set(mutate.MODULES)
    for module, entry in scores["modules"].items():
        before, after = mutate.Score(entry["before"]), mutate.Score(entry["after"])
        assert after.ratio >= before.ratio, module
        assert after.mutants > 0, module
    doc = (ROOT / "docs/testing.md").read_text()
    block = re.search(r"<!-- mutation:scores -->\n(.*?)\n<!-- /mutation:scores -->", doc,
                      re.DOTALL)
    assert block is not None, "docs/testing.md lost its <!-- mutation:scores --> markers"
    assert block.group(1) == mutate.render_table(scores), (
        "docs/testing.md's table differs from tests/data/mutation_scores.json: "
        "python3 -m splitnet.dev mutate MODULE --record writes both")


def test_bad_input_is_one_line_and_exit_status_2_before_mutmut_runs():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    r = subprocess.run([sys.executable, "-m", "splitnet.dev", "mutate", "splitnet/order/chek.py"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert r.stderr.count("\n") == 1 and "did you mean splitnet/order/check.py" in r.stderr
