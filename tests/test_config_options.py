"""An option is spelled once: adding a field to SplitConfig is the whole change.

The test adds a field to a copy of the config class (a subclass with one more field), puts
that copy everywhere the package names ``SplitConfig``, and then builds a model with the new
option, reads it back, trains a step from the command line, checkpoints and resumes, and
describes the model -- touching no other code. Before the config was passed whole, the same
experiment failed in ``from_config`` with an unexpected-keyword error.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import sys

import pytest

import splitnet
from splitnet import config as C

NEW = "probe_option"


def _extended():
    field = C.option(0, "an option added by a test", parse=int)
    return dataclasses.make_dataclass("SplitConfig", [(NEW, int, field)], bases=(C.SplitConfig,),
                                      frozen=True, namespace={"__module__": C.__name__})


@pytest.fixture
def extended(monkeypatch):
    """Every splitnet module that names SplitConfig gets the extended copy."""
    for m in pkgutil.walk_packages(splitnet.__path__, "splitnet."):
        if m.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(m.name)
        except ImportError:         # an optional extra (transformers) that is not installed
            continue
    cls, original = _extended(), C.SplitConfig
    for name, mod in list(sys.modules.items()):
        if name.startswith("splitnet") and getattr(mod, "SplitConfig", None) is original:
            monkeypatch.setattr(mod, "SplitConfig", cls)
    return cls


def test_a_new_field_reaches_the_model_its_signature_and_its_attributes(extended):
    from splitnet.nets.models import SplitTransformer

    m = SplitTransformer(256, 16, 2, 1, **{NEW: 7})
    assert isinstance(m.config, extended) and getattr(m.config, NEW) == 7
    assert getattr(m, NEW) == 7                       # read through the config, never copied
    again = SplitTransformer.from_config(m.config.to_dict())
    assert getattr(again.config, NEW) == 7
    sig = inspect.signature(SplitTransformer)         # the documented keyword form
    assert list(sig.parameters)[:4] == ["vocab_size", "d_model", "n_heads", "n_layers"]
    with pytest.raises(TypeError, match="unknown option"):
        SplitTransformer(256, 16, 2, 1, no_such_option=1)


def test_a_new_field_trains_checkpoints_resumes_and_describes(extended, tmp_path, capsys):
    from splitnet import checkpoint, cost
    from splitnet.cli import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("def f(x):\n    return x + 1\n" * 400)
    run = tmp_path / "run"
    base = ["train", "--text", str(corpus), "--d-model", "16", "--n-heads", "2", "--n-layers",
            "1", "--context", "16", "--batch-size", "4", "--eval-windows", "4", "--threads", "1",
            "--no-progress", "--no-plot", "--out", str(run)]
    flag = "--" + NEW.replace("_", "-")               # the command line derives the flag
    assert main([*base, "--steps", "1", flag, "5"]) == 0
    state = checkpoint.load(run / "checkpoint.pt")
    assert state["model_config"][NEW] == 5
    assert main([*base, "--steps", "2", "--resume"]) == 0     # restored from the checkpoint
    state = checkpoint.load(run / "checkpoint.pt")
    assert state["step"] == 2 and state["model_config"][NEW] == 5
    row = cost.describe(extended(d_model=16, n_heads=2, n_layers=1, **{NEW: 3}), seq_len=8)
    assert row.params > 0
    capsys.readouterr()
    assert main(["describe", "--d-model", "16", "--n-heads", "2", "--n-layers", "1",
                 "--seq-len", "8", flag, "3", "--weights", "shared"]) == 0
    assert "lie-trotter" in capsys.readouterr().out
