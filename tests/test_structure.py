"""The shape of the package: no import cycle, short functions and modules, one room per
concern.

Read with ``ast`` from the source files (imports inside functions count), so these tests fail
on a change that breaks the layering, before anything runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "splitnet"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500     # issue 42: the largest module at most 500 lines (style cap 600)


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (``splitnet.cli`` for a package)."""
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, path: Path, mods: dict) -> set[str]:
    """The package modules ``module`` imports, at any depth of its code."""
    deps = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node, is_package)
            # `from . import x` / `from .pkg import mod` name modules; `from .m import f` names m
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                     for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in mods:      # a.b.c.x -> a.b.c
                n = n.rpartition(".")[0]
            if n and n != module and n != "splitnet":
                deps.add(n)
    return deps


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    cycles, state = [], {}

    def visit(u, stack):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v, stack)
        stack.pop()
        state[u] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return cycles


def test_the_cycle_finder_finds_a_cycle():
    """The check itself can fail: a made-up graph with a circle through three modules."""
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(g) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.heavy
def test_the_graph_sees_function_level_and_relative_imports():
    g = import_graph()
    assert "splitnet.integrators.flows" in g["splitnet.integrators.splitting"]   # inside step
    assert "splitnet.training.train" in g["splitnet.cli.commands.cmd_train"]  # relative, in a def
    assert "splitnet.stagelists.stages" in g["splitnet.integrators.flows"]


def test_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles: " + " | ".join(" -> ".join(c) for c in cycles)


def test_machinery_never_imports_the_schemes():
    """flows, layers, check and algebra work on stage tuples; the scheme classes call them,
    never the reverse."""
    g = import_graph()
    for m in ("integrators.flows", "integrators.layers", "order.check", "stagelists.stages",
              "integrators.validate", "order.algebra", "integrators.subflows"):
        scheme_classes = {f"splitnet.integrators.{s}" for s in ("schemes", "splitting", "core")}
        assert not scheme_classes & g[f"splitnet.{m}"], m


def test_no_function_longer_than_80_lines():
    long = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PKG.parent)}:{node.name} ({n} lines)")
    assert not long, long


def test_plotting_lives_in_plots_only():
    """matplotlib is imported in the ``splitnet/plots/`` package and nowhere else."""
    offenders = []
    for path in PKG.rglob("*.py"):
        if PKG / "plots" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.startswith("matplotlib") for n in names):
                offenders.append(str(path.relative_to(PKG.parent)))
    assert not offenders, offenders


def test_no_private_names_across_modules():
    """``from .x import _name`` reaches into another module's privates."""
    bad = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                bad += [f"{path.name}: {a.name}" for a in node.names
                        if a.name.startswith("_") and a.name != "__version__"]
    assert not bad, bad


# Modules over the limit whose split is under way in another task; an entry must go as soon as
# its module fits (the test below fails on a stale entry).
BEING_SPLIT: set[str] = set()


def test_no_module_longer_than_500_lines():
    """A module over 500 lines holds more than one concern: split it into rooms."""
    sizes = {str(path.relative_to(PKG.parent)): len(path.read_text().splitlines())
             for path in sorted(PKG.rglob("*.py"))}
    long = [f"{m} ({n} lines)" for m, n in sizes.items()
            if n > MAX_MODULE_LINES and m not in BEING_SPLIT]
    assert not long, long
    stale = [m for m in BEING_SPLIT if sizes.get(m, 0) <= MAX_MODULE_LINES]
    assert not stale, f"{stale} fit(s) in {MAX_MODULE_LINES} lines now: drop from BEING_SPLIT"


def test_front_door_lists_what_it_serves():
    """``__all__`` (and ``dir``) is what ``from splitnet import *`` gives on a bare install;
    the modules of the optional extras are served too, but only work with their extra."""
    import importlib.util

    import splitnet as sn
    from splitnet.configs.config import MissingDependency

    assert sorted(dir(sn)) == sorted(sn.__all__)
    assert not set(sn.__all__) & set(sn.OPTIONAL_MODULES)
    for name in sn.__all__:
        assert getattr(sn, name) is not None, name
    has_hf = all(importlib.util.find_spec(m) for m in ("transformers", "safetensors"))
    if has_hf:
        assert sn.hf.MODEL_TYPE == "splitnet"
    else:
        with pytest.raises(MissingDependency, match=r"pip install 'splitnet\[hf\]'"):
            _ = sn.hf


@pytest.mark.heavy
def test_star_import_needs_no_extra():
    """README's promise on a fresh ``.[dev]`` install: ``from splitnet import *`` works with
    every optional extra missing (here hidden from a fresh interpreter)."""
    hide = ("transformers", "safetensors", "tokenizers", "sacrebleu", "tensorboard", "pysword",
            "x_transformers")
    code = ("import sys\n"
            f"for m in {hide!r}: sys.modules[m] = None\n"
            "from splitnet import *\n"
            "import splitnet\n"
            "missing = [n for n in splitnet.__all__ if n not in globals()]\n"
            "assert not missing, missing\n"
            "print('ok', len(splitnet.__all__))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=PKG.parent, timeout=300, check=False)
    assert r.returncode == 0 and r.stdout.startswith("ok "), r.stderr[-2000:]


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["--version"]])
def test_command_line_starts_without_torch(argv):
    """--help and --version import neither torch nor numpy (they answer in well under a
    second)."""
    code = ("import sys; from splitnet.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'numpy', 'matplotlib') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    r = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                       timeout=60, check=False)
    assert "HEAVY []" in r.stdout, r.stdout[-500:] + r.stderr[-500:]


# The package's layers, lowest first: a unit is a module directly in splitnet/ or a sub-package
# (a folder counts as one). A unit imports only units listed before it; the front door
# (splitnet/__init__.py) serves them all and imports none of them at import time.
LAYERS = ("names", "_io", "runenv", "stagelists", "geometry", "order", "integrators",
          "configs", "fields", "reversible", "nets", "runs", "translate", "mlm", "tasks", "interop",
          "plots", "analyses", "training", "cli", "__main__", "dev")
MAX_TOP_LEVEL_MODULES = 6       # modules directly in splitnet/, __init__ and __main__ included
MAX_PACKAGE_MODULES = 12        # modules of one sub-package, its __init__ included
MAX_LEVELS = 11                 # the longest chain of unit imports, in units (issue 59: was 13)


def unit(module: str) -> str:
    """``splitnet.integrators.flows`` -> ``integrators``; ``splitnet._io`` -> ``_io``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def unit_graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for m, deps in import_graph().items():
        if unit(m):
            g.setdefault(unit(m), set()).update(unit(d) for d in deps if unit(d) != unit(m))
    return g


def levels(g: dict[str, set[str]]) -> dict[str, int]:
    """A unit's level: 1 + the highest level it imports (1 for a unit that imports none)."""
    out: dict[str, int] = {}

    def level(u):
        if u not in out:
            out[u] = 1 + max((level(d) for d in g.get(u, ())), default=0)
        return out[u]

    for u in g:
        level(u)
    return out


def test_every_unit_has_its_layer_and_imports_only_lower_ones():
    g = unit_graph()
    assert sorted(g) == sorted(LAYERS), "a new unit needs its place in LAYERS (and in the docs)"
    rank = {u: i for i, u in enumerate(LAYERS)}
    upward = sorted(f"{u} -> {d}" for u, ds in g.items() for d in ds if rank[d] > rank[u])
    assert not upward, f"imports upward: {upward}"


def test_the_layering_check_can_fail():
    assert levels({"a": {"b"}, "b": {"c"}, "c": set()}) == {"a": 3, "b": 2, "c": 1}
    assert unit("splitnet.integrators.flows") == "integrators" and unit("splitnet") == ""


def test_the_tree_is_shallow_and_narrow():
    top = [p.name for p in PKG.glob("*.py")]
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    for pkg in (p.parent for p in PKG.glob("*/__init__.py")):
        n = len(list(pkg.glob("*.py")))
        assert n <= MAX_PACKAGE_MODULES, f"{pkg.name}: {n} modules"
    lv = levels(unit_graph())
    assert max(lv.values()) <= MAX_LEVELS, lv


def test_old_module_names_are_the_new_modules():
    """``import splitnet.schemes`` (the flat layout of 0.2) gives the module itself."""
    import importlib

    import splitnet as sn

    for old, new in sn.PUBLIC_MODULES.items():
        if old == "hf":
            continue                      # needs the hf extra; tests/test_interop covers it
        assert importlib.import_module(f"splitnet.{old}") is \
            importlib.import_module(f"splitnet.{new}"), old
        assert getattr(sn, old) is importlib.import_module(f"splitnet.{new}")
    from splitnet.train import TrainConfig, train  # the contract's path

    assert train.__module__ == "splitnet.training.train" and TrainConfig.__name__ == "TrainConfig"


DOC = PKG.parent / "docs" / "architecture.md"
START, END = "<!-- BEGIN IMPORT MAP -->", "<!-- END IMPORT MAP -->"


def render_import_map() -> str:
    """One row per unit, lowest layer first: its level, its modules, the units it imports."""
    g, mods = unit_graph(), import_graph()
    lv = levels(g)
    edges = sum(len(d) for d in g.values())
    rows = [f"{len(g)} units on {max(lv.values())} levels, {edges} imports between units, "
            "none upward.", "", "| unit | level | modules | imports (units) |", "|---|---|---|---|"]
    for u in LAYERS:
        inside = sorted(m.split(".", 2)[2] for m in mods if unit(m) == u and m.count(".") == 2)
        rows.append(f"| `{u}` | {lv[u]} | {', '.join(inside) or '—'} | "
                    f"{', '.join(sorted(g[u], key=LAYERS.index)) or '—'} |")
    return "\n".join(rows)


def with_current_map(text: str) -> str:
    a, b = text.index(START) + len(START), text.index(END)
    return text[:a] + "\n" + render_import_map() + "\n" + text[b:]


@pytest.mark.heavy
def test_architecture_import_map_is_current():
    """docs/architecture.md's import map is generated from the graph these tests check."""
    text = DOC.read_text()
    new = with_current_map(text)
    changed = sorted(set(new.splitlines()) ^ set(text.splitlines()))
    assert new == text, ("docs/architecture.md's import map is out of date (rows "
                         f"{changed[:6]}): run python3 -m splitnet.dev regen imports")


if __name__ == "__main__":      # what `python3 -m splitnet.dev regen imports` runs
    DOC.write_text(with_current_map(DOC.read_text()))
    print(f"wrote the import map of {DOC}", file=sys.stderr)


MAX_MODULE_LEVELS = 17          # issue 59: the longest chain of module imports (was 21)


def module_levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """A module's level: 1 + the highest level of the package modules it imports."""
    return levels(graph)


def test_the_module_graph_is_shallow():
    lv = module_levels(import_graph())
    deepest = max(lv, key=lv.get)
    assert lv[deepest] <= MAX_MODULE_LEVELS, (deepest, lv[deepest])


def served_again(path: Path) -> list[str]:
    """The names a module imports only to list them in ``__all__`` again (not used in its own
    code): a second path to a name that another module defines."""
    tree = ast.parse(path.read_text())
    imported, listed = set(), []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            listed = ast.literal_eval(node.value)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return [n for n in listed if n in imported and n not in used]


def test_no_module_serves_a_name_it_only_imports():
    """Issue 59, one path per name: callers import a name from the module that defines it;
    package faces (``__init__.py``) may list names, and the public modules of the contract
    serve the others by ``splitnet.ALSO_SERVED``, never by importing them."""
    bad = {str(p.relative_to(PKG.parent)): served_again(p) for p in PKG.rglob("*.py")
           if p.name != "__init__.py"}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def test_the_served_names_check_can_fail(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from x import a, b\n\nc = b\n__all__ = ['a', 'b', 'c']\n")
    assert served_again(p) == ["a"]


def test_every_name_the_public_modules_also_serve_is_defined_where_they_say():
    import importlib

    import splitnet as sn

    for module, table in sn.ALSO_SERVED.items():
        mod = importlib.import_module(f"splitnet.{module}")
        for name, home in table.items():
            assert getattr(mod, name) is getattr(importlib.import_module(f"splitnet.{home}"),
                                                 name), (module, name)
            assert name not in vars(mod), (module, name)      # served, not imported
