"""``splitnet train --layer-drop`` and ``--early-exit`` (issue 60): the draw a function of (seed,
step), the views that prune and exit equal to hand computations, the exit loss and its
gradients, FLOPs at the layers run, resume bit-exact, what cannot combine refused, and
``--at-depth`` reading the training rule from the checkpoint."""

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hostile import code_corpus, train_cli

from splitnet.cli import build_parser
from splitnet.cli._depth import at_depth_of
from splitnet.cli.commands.cmd_train import config_from_args
from splitnet.nets.depth import at_depth, kept_layers
from splitnet.nets.models import SplitTransformer
from splitnet.runs import checkpoint as ck
from splitnet.tasks.task import get_task
from splitnet.training.config import TrainConfig
from splitnet.training.elastic import (
    ExitLoss,
    LayerDropLoss,
    drop_probabilities,
    exit_weights,
    kept_at,
    restriction_of,
)
from splitnet.training.setup import flops_per_token

TINY = ["--d-model", "32", "--n-heads", "2", "--n-layers", "4", "--context", "32",
        "--batch-size", "8", "--warmup", "3", "--eval-windows", "16", "--threads", "1",
        "--no-progress", "--no-plot", "--dropout", "0.1", "--steps", "8",
        "--eval-every", "4", "--ckpt-every", "2"]
RULES = {"drop": ["--layer-drop", "0.5"], "exit": ["--early-exit", "1,2,4"]}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    return code_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt")


_train = train_cli


def _records(out):
    return {r["step"]: r for r in ck.read_metrics(Path(out) / ck.METRICS) if "loss" in r}


def _model(n_layers=4, **kw):
    torch.manual_seed(0)
    return SplitTransformer(vocab_size=256, d_model=16, n_heads=2, n_layers=n_layers,
                            max_len=16, **kw).double()


# ---------------------------------------------------------------------------------------------
# the draw


def test_layer_drop_draws_by_seed_and_step_only_at_its_rates():
    probs = drop_probabilities(8, 0.5)
    draws = [kept_at(3, s, probs) for s in range(400)]
    for k in range(3):                           # every global generator ignored: ranks agree
        random.seed(k)
        torch.manual_seed(k)
        assert [kept_at(3, s, probs) for s in range(400)] == draws
    assert all(d and list(d) == sorted(set(d)) for d in draws)      # never empty, in order
    kept = [sum(k in d for d in draws) / 400 for k in range(8)]
    assert all(0.4 < f < 0.6 for f in kept), kept                   # uniform: kept half the time
    assert [kept_at(4, s, probs) for s in range(400)] != draws       # the seed matters
    lin = drop_probabilities(5, 0.4, "linear")
    assert lin == pytest.approx((0.0, 0.1, 0.2, 0.3, 0.4))
    first = [kept_at(0, s, lin) for s in range(400)]
    assert all(0 in d for d in first)                               # p_0 = 0: never dropped
    assert 0.5 < sum(4 in d for d in first) / 400 < 0.7              # the last kept 1 - 0.4
    with pytest.raises(ValueError):
        drop_probabilities(4, 0.5, "exponential")


def test_exit_weights_rise_with_depth_and_sum_to_one():
    w = exit_weights((2, 4, 8))
    assert w == pytest.approx({2: 2 / 14, 4: 4 / 14, 8: 8 / 14})


# ---------------------------------------------------------------------------------------------
# the views: pruning and exits


def test_pruning_keeps_every_other_layer_at_its_own_step():
    m = _model().eval()
    x = torch.randint(0, 256, (2, 8))
    h = m.embed(x)
    for k in (0, 2):                              # L / n = 2: layers 0 and 2, each at step h
        h = m.layers[k](h, 0.0)
    want = m.head(m.norm(h))
    for view in (True, False):
        v = at_depth(m, 2, view=view, restriction="drop")
        assert v.config.n_layers == 2 and v.config.step_size == m.config.step_size
        assert torch.allclose(v(x), want, rtol=0, atol=1e-13)
    one = at_depth(m, 1, restriction="drop")(x)
    assert torch.allclose(one, m.head(m.norm(m.layers[0](m.embed(x), 0.0))), atol=1e-13)
    # coarsening is not pruning: the merged layer takes a step of 2 h
    assert not torch.allclose(at_depth(m, 2, restriction="first")(x), want, atol=1e-3)


def test_an_exit_is_the_first_layers_then_the_final_norm_and_head():
    m = _model().eval()
    x = torch.randint(0, 256, (2, 8))
    h = m.embed(x)
    for n in range(1, 5):
        h = m.layers[n - 1](h, (n - 1) * m.config.step_size)
        assert torch.allclose(at_depth(m, n, restriction="exit")(x), m.head(m.norm(h)),
                              rtol=0, atol=1e-13)
    assert torch.equal(at_depth(m, 4, restriction="exit")(x), m(x))


def test_a_pruned_view_shares_the_layers_and_a_copy_does_not():
    m = _model()
    v, c = kept_layers(m, [1, 3]), kept_layers(m, [1, 3], view=False)
    assert v.layers[0] is m.layers[1] and v.tok_emb is m.tok_emb
    assert c.layers[0] is not m.layers[1]
    assert torch.equal(c.state_dict()["layers.1.diffusion.qkv.weight"],
                       m.state_dict()["layers.3.diffusion.qkv.weight"])


@pytest.mark.parametrize("call, match", [
    (lambda m: at_depth(m, 3, restriction="drop"), "dividing it"),
    (lambda m: at_depth(m, 8, restriction="exit"), r"n in 1\.\.4"),
    (lambda m: at_depth(m, 2, restriction="skip"), "restriction must be one of"),
    (lambda m: kept_layers(m, [2, 1]), "increasing indices"),
    (lambda m: kept_layers(m, []), "one or more"),
])
def test_what_cannot_be_pruned_or_exited_is_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call(_model())


def test_a_basis_is_neither_pruned_nor_exited():
    m = _model(depth_basis="bernstein:2")
    for r in ("drop", "exit", "first"):
        with pytest.raises(ValueError, match="depth_basis"):
            at_depth(m, 2, restriction=r)


# ---------------------------------------------------------------------------------------------
# the losses


def _cfg(m, **kw):
    return TrainConfig(model=m.config.replace(dropout=0.0), context=16, **kw)


def test_the_exit_loss_is_the_weighted_sum_of_each_exits_cross_entropy():
    m = _model()
    loss = ExitLoss(get_task("lm"), m, _cfg(m, early_exit=(1, 2, 4)))
    x = torch.randint(0, 256, (2, 16))
    y = torch.roll(x, -1, 1)
    h, want = m.embed(x), 0.0
    for n in range(1, 5):
        h = m.layers[n - 1](h, 0.0)
        if n in (1, 2, 4):
            ce = F.cross_entropy(F.linear(m.norm(h), m.tok_emb.weight).flatten(0, 1),
                                 y.flatten())
            want = want + {1: 1 / 7, 2: 2 / 7, 4: 4 / 7}[n] * ce
    assert float(loss(x, y).detach()) == pytest.approx(float(want.detach()), rel=1e-12)


def test_every_exit_sends_gradients_to_the_head_and_to_its_layers_only():
    m = _model()
    x = torch.randint(0, 256, (2, 16))
    y = torch.roll(x, -1, 1)
    for n in (1, 2, 4):
        m.zero_grad(set_to_none=True)
        loss = ExitLoss(get_task("lm"), m, _cfg(m, early_exit=(1, 2, 4)))
        loss.weights = {n: 1.0}                       # that exit alone
        loss(x, y).backward()
        assert m.norm.weight.grad.abs().sum() > 0 and m.tok_emb.weight.grad.abs().sum() > 0
        for k, layer in enumerate(m.layers):
            g = [p.grad for p in layer.parameters()]
            if k < n:
                assert all(t is not None and t.abs().sum() > 0 for t in g), (n, k)
            else:
                assert all(t is None for t in g), (n, k)


def test_a_layer_drop_step_runs_and_trains_the_kept_layers_only():
    m = _model()
    loss = LayerDropLoss(get_task("lm"), m, _cfg(m, layer_drop=0.5))
    loss.keep = (0, 3)
    x = torch.randint(0, 256, (2, 16))
    y = torch.roll(x, -1, 1)
    got = loss(x, y)
    ref = F.cross_entropy(kept_layers(m, [0, 3])(x).flatten(0, 1), y.flatten())
    assert float(got.detach()) == pytest.approx(float(ref.detach()), rel=1e-12)
    got.backward()
    for k, layer in enumerate(m.layers):
        grads = [p.grad for p in layer.parameters()]
        assert all((g is not None) == (k in (0, 3)) for g in grads), k


# ---------------------------------------------------------------------------------------------
# training runs


@pytest.fixture(scope="module")
def runs(text, tmp_path_factory):
    out = {}
    for name, extra in RULES.items():
        out[name] = tmp_path_factory.mktemp(name) / "full"
        _train("--text", str(text), "--out", str(out[name]), *TINY, *extra)
    return out


@pytest.mark.heavy
def test_flops_are_counted_at_the_layers_run(runs):
    state = ck.load(runs["drop"])
    cfg = state["train_config"]
    from splitnet.configs.config import SplitConfig

    model = SplitTransformer(config=SplitConfig.from_dict(state["model_config"]))
    fpt = {n: flops_per_token(kept_layers(model, range(n)), 32) for n in range(1, 5)}
    probs = drop_probabilities(4, 0.5)
    tokens = cfg["batch_size"] * cfg["context"]
    seen = set()
    for s, r in _records(runs["drop"]).items():
        n = len(kept_at(cfg["seed"], s - 1, probs))     # record s is step s - 1's update
        seen.add(n)
        assert r["step_flops"] == pytest.approx(fpt[n] * tokens)
    assert len(seen) > 1
    head = 6.0 * 32 * 256                              # 3 x the head's 2 d V per earlier exit
    for r in _records(runs["exit"]).values():
        assert r["step_flops"] == pytest.approx((flops_per_token(model, 32) + 2 * head) * tokens)


@pytest.mark.heavy
def test_at_depth_reads_the_training_rule_from_the_checkpoint(runs):
    x = torch.randint(0, 256, (1, 16))
    for name in RULES:
        state = ck.load(runs[name])
        assert restriction_of(state["train_config"]) == name
        m = ck.model_from_state(state, runs[name]).eval()
        want = at_depth(m, 2, restriction=name)(x)
        assert torch.equal(at_depth_of(m, 2, state["train_config"])(x), want)
        assert not torch.allclose(at_depth_of(m, 2, {})(x), want)      # coarsened otherwise
    assert restriction_of({}) == restriction_of(None) == "mean"


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(RULES))
def test_resume_is_bit_exact(text, runs, tmp_path, name):
    cut = tmp_path / "cut"
    _train("--text", str(text), "--out", str(cut), *TINY, *RULES[name], "--stop-at", "3")
    _train("--out", str(cut), "--resume", "--no-progress", "--no-plot", "--threads", "1")
    a, b = _records(runs[name]), _records(cut)
    assert sorted(b) == list(range(1, 9))
    assert all(a[s]["loss"] == b[s]["loss"] for s in range(1, 9)), (a, b)
    wa, wb = ck.load(runs[name])["model"], ck.load(cut)["model"]
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("argv, match", [
    (["--layer-drop", "0.2", "--early-exit", "2,4"], "one way of training at several depths"),
    (["--layer-drop", "0.2", "--train-depths", "2,4"], "with --train-depths"),
    (["--early-exit", "2,3"], "the last exit must be the network's depth"),
    (["--early-exit", "2,4", "--reversible"], "a plain stack"),
    (["--layer-drop", "0.2", "--depth-basis", "bernstein:2"], "without --depth-basis"),
    (["--layer-drop", "0.2", "--parallel", "fsdp"], "does not take --parallel fsdp"),
    (["--early-exit", "2,2,4"], "names an exit twice"),
    (["--layer-drop", "1"], "layer_drop must be < 1"),
    (["--layer-drop-rule", "linear"], "with --layer-drop > 0"),
])
def test_what_cannot_combine_is_refused(argv, match):
    with pytest.raises(ValueError, match=match):
        cfg, given = config_from_args(build_parser("train").parse_args(["--n-layers", "4",
                                                                         *argv]))
        cfg.check_given(given)


def test_docs_elastic_md_study_table_is_the_cache_and_its_reading_holds():
    """The study table is experiments/elastic_study.py's rendering of its cache (regen
    elastic-study), and the claims its reading makes with three seeds hold for the runs."""
    import json
    import sys

    import numpy as np

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "experiments"))
    try:
        import elastic_study as S
    finally:
        sys.path.pop(0)
    doc = (root / "docs" / "elastic.md").read_text()
    assert S.studied()[0] == 400 and len(S.studied()) > 1      # the 1200-step study is cached
    for steps in S.studied():
        cached = [json.loads(p.read_text()) for p in sorted(S.cache_dir(steps).glob("*.json"))]
        name = S.block(steps)[0]
        assert f"<!-- elastic:{name} -->\n{S.table(cached)}\n<!-- /elastic:{name} -->" in doc
        goals = name.replace("study", "goals")
        assert f"<!-- elastic:{goals} -->\n{S.goals(cached)}\n<!-- /elastic:{goals} -->" in doc
    runs = [json.loads(p.read_text()) for p in sorted(S.CACHE.glob("*.json"))]

    def bpb(arm, n):
        return np.array([r["bpb"][str(n)] for r in sorted(runs, key=lambda r: r["seed"])
                         if r["arm"] == arm])

    strang, drop, exit_ = "strang-train-depths", "layerdrop", "early-exit"
    assert all(len(bpb(a, 4)) == 3 for a in (strang, drop, exit_, "frontier-4"))
    assert abs(bpb(strang, 16) - bpb(strang, 8)).max() < 0.001     # keeps its loss when refined
    assert (bpb(drop, 4) - bpb(exit_, 4)).min() > 0.3                # LayerDrop 0.5 lags the exit
    assert (bpb(exit_, 8) - bpb("frontier-8", 8)).max() < 0          # the exit loss helps at 8
    assert (bpb(strang, 4) - bpb("frontier-4", 4)).min() > 0.02      # goal missed at 4 steps
    long = [json.loads(p.read_text()) for p in sorted(S.cache_dir(1200).glob("*.json"))]

    def bpb12(arm, n):
        return np.array([r["bpb"][str(n)] for r in sorted(long, key=lambda r: r["seed"])
                         if r["arm"] == arm])

    # 1200 steps: the lag grows, early exit stays ahead at half depth, the controls add up
    assert (bpb12(strang, 4) - bpb12("frontier-4", 4)).min() > 0.1
    assert (bpb12(strang, 4) - bpb12(exit_, 4)).min() > 0.05
    assert bpb12("frontier-8", 8)[0] < bpb12("strang-layered", 8)[0] < bpb12(
        "strang-one-depth", 8)[0] < bpb12(strang, 8)[0]


def test_pruning_a_gated_network_keeps_the_gates_of_the_layers_kept():
    m = _model(gate="tanh", gate_layers=(1, 3)).eval()
    v = kept_layers(m, [0, 2, 3])
    assert v.config.gate_layers == (2,) and v.config.n_layers == 3
    x = torch.randint(0, 256, (2, 8))
    h = m.embed(x)
    for k in (0, 2, 3):
        h = m.layers[k](h, 0.0)
    assert torch.allclose(v(x), m.head(m.norm(h)), rtol=0, atol=1e-13)
    c = kept_layers(m, [0, 2, 3], view=False)
    assert torch.allclose(c(x), v(x), rtol=0, atol=1e-13)


def test_the_study_goals_verdicts_follow_the_numbers():
    """elastic_study.goals on made-up runs: a Strang arm inside every bound is met on each
    row, and one pushed past a bound is missed on that row only."""
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "experiments"))
    try:
        import elastic_study as S
    finally:
        sys.path.pop(0)

    def run(arm, seed, bpb, flops=1.0):
        return {"arm": arm, "seed": seed, "bpb": {str(n): v for n, v in bpb.items()},
                "train_flops": flops}

    def runs(strang_at_4):
        out = []
        for s in S.SEEDS:
            e = 1e-3 * s            # seed noise, so the paired t is finite
            for n in (2, 4, 8):
                out.append(run(f"frontier-{n}", s, {n: 3.0 + e}, flops=2.0))
            for arm in ("layerdrop", "layerdrop-0.2", "early-exit"):
                out.append(run(arm, s, {4: 3.2 + 2 * e}))
            # gaps 0.51, 0.03, 0.01, 0.002: the finest pairs' rate 2.3 (>= 1.8); 16 better
            out.append(run("strang-train-depths", s, {1: 3.55, 2: 3.04 + e, 4: strang_at_4 + e,
                                                      8: 3.0 + 1.5 * e, 16: 2.998 + 1.5 * e}))
        return out

    rows = S.goals(runs(3.01)).splitlines()[2:]
    assert [r.split(" | ")[2] for r in rows] == ["met"] * 9, rows
    missed = S.goals(runs(3.05)).splitlines()[2:]
    verdicts = [r.split(" | ")[2] for r in missed]
    assert verdicts[1] == "missed" and verdicts[0] == "met" and verdicts[5:] == ["met"] * 4
