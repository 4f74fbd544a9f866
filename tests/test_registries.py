"""Every set of names is kept once, and every module is served and says what it exports.

Read with ``ast`` from the source: a tuple, list or set literal, or an enumeration in a string
("euler, midpoint or rk4"), that repeats most of a registry outside the registry's own module
is a copy that will drift; so is a hand-written table of a registry. The controls below feed
the detector a copy and check that it fails.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import splitnet
from splitnet import cli, config, kinds, subflows

PKG = Path(splitnet.__file__).resolve().parent
ROOT = PKG.parent


def registries() -> dict[str, tuple[set[str], str]]:
    """name -> (the registry's names, the module that owns the list)."""
    return {
        "sub-flow methods": (set(subflows.METHODS), "splitnet/integrators/subflows.py"),
        "activations": (set(config.ACTIVATIONS), "splitnet/configs/options.py"),
        "commands": (set(cli.COMMANDS), "splitnet/cli/__init__.py"),
        "weights modes": (set(config.WEIGHTS), "splitnet/configs/options.py"),
        "gates": (set(config.GATES), "splitnet/configs/config.py"),
        "compile modes": (set(config.COMPILE_MODES), "splitnet/configs/config.py"),
        "SDPA backends": (set(config.SDPA_BACKENDS), "splitnet/configs/config.py"),
        "field kinds": (set(kinds.KINDS), "splitnet/configs/kinds.py"),
    }


_SEP = r"\s*(?:,\s*or|,|\bor\b|\band\b|/|\|)\s*"


def _enumerations(text: str, names: set[str]):
    alt = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    for m in re.finditer(rf"`*\b(?:{alt})\b`*(?:{_SEP}`*\b(?:{alt})\b`*)+", text):
        yield set(re.findall(rf"\b(?:{alt})\b", m.group(0)))


def copies(source: str, where: str) -> list[str]:
    """Places in ``source`` (a module at path ``where``) that repeat at least three names of a
    registry (all of a smaller one) outside the registry's own module."""
    out = []
    for node in ast.walk(ast.parse(source)):
        for reg, (names, home) in registries().items():
            if where == home:
                continue
            need = min(3, len(names))
            found = []
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and node.elts and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                found = [names & {e.value for e in node.elts}]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                need = 3             # prose: "sigmoid or tanh" is maths, three names a list
                found = list(_enumerations(node.value, names))
            out += [f"{where}:{node.lineno}: {reg} {sorted(f)}" for f in found if len(f) >= need]
    return out


@pytest.mark.heavy
def test_no_module_keeps_a_copy_of_a_registry():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        found += copies(path.read_text(), path.relative_to(ROOT).as_posix())
    assert not found, ("name lists copied instead of read from their registry (use the "
                       "registry, e.g. splitnet.subflows.METHODS):\n" + "\n".join(found))


@pytest.mark.parametrize("source", [
    'DEFAULT = ("euler", "midpoint", "rk4", "exact")\n',
    'HELP = "sub-flow method: euler, midpoint or rk4"\n',
    'CHOICES = ["shared", "per-stage"]\n',
    'ACTS = {"gelu", "relu", "silu"}\n',
    'KINDS = ("attention", "conv", "feedforward")\n',
])
def test_the_copy_detector_finds_a_copy(source):
    assert copies(source, "splitnet/some_new_module.py")


def test_the_copy_detector_leaves_prose_and_selections_alone():
    ok = ('"""With Euler sub-steps a residual network is first order; rk4 restores it."""\n'
          'PAIR = ("euler", "rk4")\n')
    assert not copies(ok, "splitnet/some_new_module.py")


def test_every_command_is_one_module_with_its_own_help():
    for name, help_ in cli.COMMANDS.items():
        mod = importlib.import_module(f"splitnet.cli.commands.cmd_{name}")
        assert help_ == mod.HELP and callable(mod.configure) and callable(mod.run), name
    on_disk = {m.name[4:] for m in pkgutil.iter_modules(cli.commands.__path__)
               if m.name.startswith("cmd_")}
    assert on_disk == set(cli.COMMANDS)


# ---------------------------------------------------------------------------------------------
# The front door serves every public module; every module says what it exports

def _public_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(splitnet.__path__)
                  if not m.name.startswith("_"))


def test_the_front_door_serves_every_public_module():
    assert set(_public_modules()) <= set(splitnet.__all__)
    assert sorted(dir(splitnet)) == sorted(splitnet.__all__)
    for name in splitnet.__all__:
        try:
            value = getattr(splitnet, name)
        except config.MissingDependency:      # an optional extra (splitnet.hf) not installed
            continue
        # the object its table names: the module itself, or the name as its module defines it
        if name == "__version__":
            assert re.fullmatch(r"\d+\.\d+\.\d+", value), value
        elif name in splitnet.PUBLIC_NAMES:
            home = splitnet.PUBLIC_MODULES.get(splitnet.PUBLIC_NAMES[name])
            assert value is getattr(importlib.import_module(f"splitnet.{home}"), name), name
        else:
            target = splitnet.PUBLIC_MODULES.get(name, name)
            assert value is importlib.import_module(f"splitnet.{target}"), name


def _module_files() -> list[Path]:
    return [p for p in sorted(PKG.rglob("*.py"))
            if p.name != "__main__.py" and p != PKG / "__init__.py"]


def _public_top_level(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name) and t.id[:1].isupper()]
    return [n for n in names if not n.startswith("_")]


COMPUTED = "computed"


def _declared_all(tree: ast.Module) -> list[str] | str | None:
    """The literal ``__all__``, :data:`COMPUTED` when it is built by an expression (read from
    the imported module), None when there is none."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return [ast.literal_eval(e) for e in node.value.elts]
            return COMPUTED
    return None


@pytest.mark.parametrize("path", _module_files(), ids=lambda p: p.relative_to(PKG).as_posix())
def test_every_module_declares_all_its_public_names(path):
    """``__all__`` lists exactly the module's public classes, functions and constants (a name
    not meant for others starts with ``_``), and each exists."""
    tree = ast.parse(path.read_text())
    declared = _declared_all(tree)
    assert declared is not None, f"{path.name} has no __all__"
    mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    try:
        module = importlib.import_module(mod)
    except config.MissingDependency:
        pytest.skip(f"{mod} needs an optional extra")
    if declared == COMPUTED:
        declared = list(module.__all__)
    missing = [n for n in _public_top_level(tree) if n not in declared]
    assert not missing, f"{path.name}: public names not in __all__: {missing}"
    absent = [n for n in declared if not hasattr(module, n)]
    assert not absent, f"{mod}.__all__ names what it does not define: {absent}"
