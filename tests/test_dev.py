"""``python3 -m splitnet.dev regen``: the one command behind every generated doc, and the
committed per-method cache docs/zoo.md is rendered from."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import warnings

import pytest

import splitnet as sn
from splitnet.dev import zoocache
from splitnet.dev.targets import DEFAULT, ROOT, TARGETS


def _dev(*argv) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "splitnet.dev", *argv], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env, check=False)


def _get(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sn.schemes.get(name)


def test_regen_list_shows_every_target_without_torch():
    r = _dev("regen", "--list")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for t in TARGETS.values():
        assert f"\n{t.name}" in r.stdout and t.writes in r.stdout, t.name
        assert t.command_lines()[0] in r.stdout
    assert f"(no TARGET: {' '.join(DEFAULT)})" in r.stdout
    code = ("import sys; from splitnet.dev.regen import main; main(['regen', '--list']); "
            "print('HEAVY', [m for m in ('torch', 'numpy') if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=ROOT, check=False)
    assert "HEAVY []" in r.stdout, r.stdout[-300:] + r.stderr[-300:]


@pytest.mark.parametrize("argv,pattern", [
    (["regen", "zo"], "unknown target 'zo'; did you mean zoo?"),
    (["regen", "imports", "nonsense"], "unknown target 'nonsense'; no target has a close name "
                                       "(python3 -m splitnet.dev regen --list lists them all)"),
    (["regen", "zoo", "--only", "yoshda4"], "unknown zoo method 'yoshda4'; did you mean yoshida4"),
    (["regen", "zoo", "--only", ","], "--only: expected method names, got ','"),
    (["regen", "theory", "--only", "strang"], "--only and --refresh go with the zoo target"),
    (["regen", "--refresh"], "--only and --refresh go with the zoo target"),
    (["regen", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["regne"], "unknown command 'regne'; did you mean regen?"),
])
def test_bad_input_is_one_line_and_exit_status_2(argv, pattern):
    """Checked before anything runs: nothing is regenerated."""
    r = _dev(*argv)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("python3 -m splitnet.dev") and pattern in r.stderr, r.stderr


def test_every_target_runs_a_script_that_exists():
    assert set(DEFAULT) <= set(TARGETS)
    for t in TARGETS.values():
        assert t.commands and t.writes and t.takes, t.name
        for argv in [*t.commands, *(a for _, a in t.prepare)]:
            if argv[0] != "-m":
                assert (ROOT / argv[0]).is_file(), (t.name, argv)


# ---------------------------------------------------------------------------------------------
# The zoo cache: one entry per registered method, keyed by the fingerprint of its stages

def test_the_zoo_cache_covers_every_method_with_its_current_fingerprint():
    """A new method, or a changed coefficient set, fails here with the command that measures
    just that method."""
    names = sn.schemes.available("splitting")
    stale = zoocache.stale({n: _get(n) for n in names})
    assert not stale, (f"experiments/cache/zoo/ has no entry for the current stages of "
                       f"{stale}: run {zoocache.regen_command(stale)}")
    cached = sorted(p.stem for p in (zoocache.CACHE / "methods").glob("*.json"))
    extra = sorted(set(cached) - set(names))
    assert not extra, (f"experiments/cache/zoo/ has entries of unregistered methods {extra}: "
                       f"run python3 -m splitnet.dev regen zoo")
    # the peer table's cache: present, and measured from the transcribed sets as they are now
    study = _zoo_study()
    peers = zoocache.load_peers()
    key = zoocache.data_fingerprint([study._peer_key(p) for p in study.peer_sets()])
    assert peers is not None and peers["fingerprint"] == key, (
        "experiments/cache/zoo/peers.json is missing or stale: run python3 -m splitnet.dev "
        "regen zoo")
    assert [r["name"] for r in peers["rows"]] == [p["name"] for p in study.peer_sets()]


def _zoo_study():
    """experiments/zoo.py as a module (the study is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("zoo_study", ROOT / "experiments" / "zoo.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    return study


def test_a_changed_coefficient_changes_only_its_own_fingerprint():
    def scheme(delta):
        return sn.SplittingScheme.from_stages([("convection", 0.5 + delta), ("diffusion", 1.0),
                                               ("convection", 0.5 - delta)], order=1, name="x")

    assert zoocache.fingerprint(scheme(1e-15)) != zoocache.fingerprint(scheme(0.0))
    assert zoocache.fingerprint(scheme(0.0)) == zoocache.fingerprint(scheme(0.0))
    assert zoocache.fingerprint(_get("yoshida4")) == zoocache.fingerprint(_get("yoshida4"))
    assert zoocache.fingerprint(_get("yoshida4")) != zoocache.fingerprint(_get("forest-ruth4"))


def test_docs_zoo_is_what_the_cache_renders():
    """docs/zoo.md comes from the cache alone (no measurement): what regen zoo writes."""
    study = _zoo_study()
    names, restricted = sn.schemes.available(), sn.schemes.available("restricted")
    entries = {n: zoocache.load(n) for n in names + restricted}
    missing = [n for n, e in entries.items() if e is None]
    assert not missing, f"no cache entry for {missing}: run {zoocache.regen_command(missing)}"
    text = study.render(names, restricted, entries, zoocache.load_peers()["rows"])
    assert (ROOT / "docs" / "zoo.md").read_text() == text, (
        "docs/zoo.md is not what experiments/cache/zoo/ renders: run "
        "python3 -m splitnet.dev regen zoo")


def test_zoo_cache_files_are_strict_json(tmp_path):
    path = zoocache.save("x", {"fingerprint": "f", "v": [1.0, float("nan")], "t": (1, 2)},
                         tmp_path)
    assert path == tmp_path / "methods" / "x.json"
    assert zoocache.load("x", tmp_path) == {"name": "x", "fingerprint": "f", "v": [1.0, None],
                                            "t": [1, 2]}
    assert "NaN" not in path.read_text()
    assert zoocache.prune(["y"], tmp_path) == ["x"] and zoocache.load("x", tmp_path) is None
    assert zoocache.regen_command(["a", "b"]) == "python3 -m splitnet.dev regen zoo --only a,b"


def test_extras_mode_knows_which_skips_are_a_missing_extra():
    """tests/conftest.py's --extras: importorskip of an extra's module, 'needs the X extra' and
    'needs an optional extra' are a missing extra; CUDA, catalogues and the Bible (not an extra
    CI installs) are not."""
    from conftest import extra_modules, missing_extra

    mods = extra_modules()
    assert {mods[m] for m in ("transformers", "x_transformers", "tensorboard", "sacrebleu")} \
        == {"hf", "peers", "tensorboard", "translate"}
    assert missing_extra("could not import 'x_transformers': No module", mods) == "peers"
    assert missing_extra("could not import 'transformers.models': No module", mods) == "hf"
    assert missing_extra("export needs the hf extra", mods) == "hf"
    assert missing_extra("splitnet.hf needs an optional extra", mods) is not None
    for other in ("could not import 'pysword': x", "needs the bible extra", "no CUDA device",
                  "no catalogues on this machine", "could not import 'mpmath': x"):
        assert missing_extra(other, mods) is None, other
