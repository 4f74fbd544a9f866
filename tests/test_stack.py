"""One stack per network (issue 42): the kind of a network's layer list says how they run, and
nothing else in the package asks whether a network is reversible."""

import ast
from pathlib import Path

import pytest
import torch

from splitnet.integrators.checkpointed import CheckpointedStack
from splitnet.integrators.stack import Stack
from splitnet.nets.learned import LearnedSplitLayer
from splitnet.nets.models import SplitTransformer
from splitnet.nets.seq2seq import SplitSeq2Seq
from splitnet.reversible.stack import ReversibleStack

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"vocab_size": 97, "d_model": 16, "n_heads": 2, "n_layers": 4, "max_len": 32}


def test_each_network_holds_the_stack_its_config_asks_for():
    assert type(SplitTransformer(**SMALL).layers) is Stack
    rev = SplitTransformer(**SMALL, reversible=True, reversible_grid=12, step_size=0.5)
    assert type(rev.layers) is ReversibleStack
    assert (rev.layers.grid, rev.layers.step_size) == (12, 0.5)
    learned = SplitTransformer(**SMALL, learn_coefficients=True)
    assert type(learned.layers) is Stack
    assert all(isinstance(layer, LearnedSplitLayer) for layer in learned.layers)
    s2s = SplitSeq2Seq(300, 300, 16, 2, n_encoder_layers=2, n_decoder_layers=3, reversible=True)
    assert type(s2s.encoder_layers) is ReversibleStack and len(s2s.decoder_layers) == 3


def test_a_slice_keeps_the_kind_and_its_settings():
    rev = SplitTransformer(**SMALL, reversible=True, reversible_grid=10, step_size=0.25)
    part = rev.layers[1:3]
    assert type(part) is ReversibleStack and len(part) == 2
    assert (part.grid, part.step_size) == (10, 0.25)
    assert part[0] is rev.layers[1]
    other = rev.layers.like(list(rev.layers), step_size=0.125)
    assert other.step_size == 0.125 and other.grid == 10


def test_the_state_dict_keys_are_those_of_a_list():
    m = SplitTransformer(**SMALL, reversible=True)
    assert any(k.startswith("layers.3.") for k in m.state_dict())


def _saved_bytes(model, idx) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(idx).square().mean()
    loss.backward()
    return total


def test_checkpointed_stack_is_the_same_function_and_keeps_less():
    """A stack kind in one file (integrators/checkpointed.py): the same logits and gradients in
    float64, the same weight names, and fewer bytes saved for backward."""
    torch.manual_seed(0)
    plain = SplitTransformer(**{**SMALL, "n_layers": 6}).double()
    ck = SplitTransformer(**{**SMALL, "n_layers": 6}).double()
    ck.load_state_dict(plain.state_dict())
    ck.layers = CheckpointedStack(ck.layers, ck.layers.step_size)
    assert list(ck.state_dict()) == list(plain.state_dict())
    idx = torch.randint(0, 97, (2, 24))
    torch.testing.assert_close(ck(idx), plain(idx), rtol=0, atol=0)
    a, b = _saved_bytes(plain, idx), _saved_bytes(ck, idx)
    for p, q in zip(plain.parameters(), ck.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-12, atol=1e-14)
    assert b < 0.6 * a, (a, b)
    # a stack built from it again by `like` keeps the kind (re-discretisation, depth changes)
    assert type(ck.layers.like(list(ck.layers))) is CheckpointedStack


def _reads_reversible_flag(path: Path) -> bool:
    """Whether code (not a docstring) reads an attribute ``reversible`` or
    ``getattr(x, "reversible", ...)``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "reversible" \
                and isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" \
                and len(node.args) > 1 and getattr(node.args[1], "value", None) == "reversible":
            return True
    return False


def test_only_the_gpt2_export_reads_the_reversible_flag():
    """Issue 42's count: files outside reversible/, configs/, cli/ that branch on the flag
    (issue 59: the stack builder asks the stack kind, configs.stacks, not the flag)."""
    allowed = {"reversible", "configs", "cli"}
    readers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "splitnet").rglob("*.py")
                     if p.relative_to(ROOT / "splitnet").parts[0] not in allowed
                     and _reads_reversible_flag(p))
    assert readers == ["splitnet/interop/convert.py"]


@pytest.mark.parametrize("reversible", [False, True])
def test_refined_models_keep_their_stack_kind(reversible):
    from splitnet.analyses.refine import ode_model, rediscretize

    m = SplitTransformer(**SMALL, reversible=reversible)
    assert type(rediscretize(m, substeps=2).layers) is type(m.layers)
    assert type(ode_model(m).layers) is type(m.layers)


class _Clock(torch.nn.Module):
    """A layer that records the time it is called at (the fields of the built-in kinds do not
    depend on t, so a stack that mis-times its layers would pass every other test)."""

    def __init__(self, seen):
        super().__init__()
        self.seen = seen

    def forward(self, *x, t=None, **kw):
        *state, t = x if t is None else (*x, t)
        self.seen.append(t)
        states = kw.get("states")
        if states is not None:
            states.append(tuple(state))
        return state[0] if len(state) == 1 else tuple(state)


def test_layer_k_of_a_stack_runs_at_time_k_h():
    seen: list = []
    x = torch.zeros(1, 2, 4)
    plain = Stack([_Clock(seen) for _ in range(3)], step_size=0.5)
    plain.run(x)
    assert seen == [0.0, 0.5, 1.0]
    seen.clear()
    with torch.no_grad():                      # ordinary calls: a pair layer of any kind
        ReversibleStack([_Clock(seen) for _ in range(3)], step_size=0.25).run(x)
    assert seen == [0.0, 0.25, 0.5]
    seen.clear()
    ReversibleStack([_Clock(seen) for _ in range(2)], step_size=2.0).states(x)
    assert seen == [0.0, 2.0]


# ------------------------------------------------------------------------------------------
# stack kinds chosen by a config (issue 59)

USER_STACK = '''
import splitnet as sn
from splitnet.integrators.stack import Stack


class Counted(Stack):
    """The plain stack, counting its forward passes (a user's kind, in one file)."""

    runs = 0

    def run(self, x, plain=False, **context):
        type(self).runs += 1
        return super().run(x, plain=plain, **context)


KIND = sn.stacks.register("counted", Counted, replace=True)
'''


@pytest.fixture
def counted(tmp_path, monkeypatch):
    import importlib

    from splitnet.configs import stacks

    (tmp_path / "counted_stack.py").write_text(USER_STACK)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("counted_stack")
    yield mod
    stacks.KINDS.pop("counted", None)
    import sys

    sys.modules.pop("counted_stack", None)


def test_a_config_names_its_stack_kind_and_reversible_is_its_older_spelling():
    from splitnet.configs.config import SplitConfig

    for stack, cls in (("plain", Stack), ("checkpointed", CheckpointedStack),
                       ("reversible", ReversibleStack)):
        cfg = SplitConfig(**SMALL, stack=stack, scheme="strang")
        assert type(SplitTransformer.from_config(cfg).layers) is cls
        assert cfg.reversible == (stack == "reversible")
    assert SplitConfig(**SMALL, reversible=True).stack == "reversible"
    assert SplitConfig(**SMALL, stack="reversible").replace(reversible=False).stack == "plain"
    old = SplitConfig(**SMALL, reversible=True).to_dict()
    del old["stack"]                               # a 0.3 checkpoint's config
    assert SplitConfig.from_dict(old).stack == "reversible"
    ck = SplitTransformer.from_config(SplitConfig(**SMALL, stack="checkpointed"))
    with torch.no_grad():
        x = torch.randint(0, 97, (2, 5))
        plain = SplitTransformer.from_config(SplitConfig(**SMALL))
        plain.load_state_dict(ck.state_dict())       # the same keys, the same function
        torch.testing.assert_close(ck(x), plain(x))


@pytest.mark.parametrize("changes,want", [
    ({"stack": "nope"}, "unknown stack kind 'nope'"),
    ({"stack": 3}, "stack must be a kind's name"),
    ({"stack": "checkpointed", "reversible": True}, "reversible=True means stack='reversible'"),
    ({"stack": "checkpointed", "reversible_grid": 4}, r"reversible_grid needs reversible=True"),
    ({"stack": "reversible", "learn_coefficients": True}, "reversible networks with learned "
                                                          "coefficients are not supported"),
])
def test_a_stack_option_its_kind_does_not_read_is_refused(changes, want):
    from splitnet.configs.config import SplitConfig

    with pytest.raises(ValueError, match=want):
        SplitConfig(**SMALL, **changes)


@pytest.mark.parametrize("name", ["", "my kind", None, "--x", "1a"])
def test_a_stack_kind_needs_a_name_and_a_stack_class(name):
    import splitnet as sn

    with pytest.raises(ValueError, match="stack kind's name must be a non-empty identifier"):
        sn.stacks.register(name, Stack)
    with pytest.raises(TypeError, match=r"subclass of splitnet\.integrators\.stack\.Stack"):
        sn.stacks.register("not-a-stack", dict)
    with pytest.raises(ValueError, match="registered already"):
        sn.stacks.register("plain", CheckpointedStack)


def test_a_users_stack_kind_builds_trains_saves_and_loads(counted, tmp_path):
    """One file of the user's (counted_stack.py) registers a kind; SplitConfig(stack=...)
    chooses it, the trainer trains it and its checkpoint loads it again."""
    from splitnet.train import TrainConfig, train

    from splitnet.configs.config import SplitConfig
    from splitnet.runs.checkpoint import load_model

    text = tmp_path / "corpus.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 400)
    cfg = SplitConfig(d_model=16, n_heads=2, n_layers=2, scheme="strang", stack="counted")
    assert type(SplitTransformer.from_config(cfg).layers) is counted.Counted
    before = counted.Counted.runs
    out = tmp_path / "run"
    train(TrainConfig(model=cfg, text=str(text), context=16, steps=3, batch_size=4, warmup=1,
                      eval_every=3, eval_windows=4, progress=False, plot=False, device="cpu",
                      threads=1, out=str(out)))
    assert counted.Counted.runs > before + 3          # every step and evaluation ran it
    model = load_model(out)
    assert type(model.layers) is counted.Counted and model.config.stack == "counted"
    assert not model.config.reversible
