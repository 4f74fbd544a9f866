"""Reversible splitting networks (issue 27): the layer is the scheme's Euler step on the shear
fields, Lie–Trotter is the Reformer block, the inverse holds at depth 64, the global order is
the scheme's with residual sub-layers, the stored-nothing backward equals ordinary autograd,
the bytes saved for backward are flat in depth, exact mode reconstructs bit for bit."""

import itertools
import json
import math

import numpy as np
import pytest
import torch
from torch.autograd.graph import saved_tensors_hooks

import splitnet as sn
from splitnet.reversible import ReversibleLayer, plain_autograd, run_stack, start_pair

V = 61


def _model(scheme="strang", n_layers=2, d=16, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    kw.setdefault("max_len", 16)
    return sn.SplitTransformer(V, d, 2, n_layers, scheme=scheme, reversible=True,
                               **kw).to(dtype)


def _idx(b=3, t=11):
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(1))


def _shear(f, w):
    """The field ``f`` as a shear of the stacked pair X = (x1, x2): writes block ``w`` from the
    other one."""
    def g(t, X):
        out = torch.zeros_like(X)
        out[w] = f(t, X[1 - w])
        return out
    return g


def _shear_fields(layer):
    """The layer's fields as shear fields of the pair (one per stage when per-stage)."""
    out = {}
    for name, w in (("diffusion", 0), ("convection", 1)):
        mods = layer.field_modules(name)
        out[name] = [_shear(m, w) for m in mods] if any(m is not mods[0] for m in mods) else \
            _shear(mods[0], w)
    return out


@pytest.mark.parametrize("scheme,weights", [("lie-trotter", "shared"), ("strang", "shared"),
                                            ("yoshida4", "shared"), ("strang", "per-stage"),
                                            ("c:0.5,d:1,c:0.5", "per-stage")])
def test_layer_is_the_schemes_euler_step_on_the_shear_fields(scheme, weights):
    m = _model(scheme, weights=weights, step_size=0.5)
    layer = m.layers[1]
    g = torch.Generator().manual_seed(2)
    x1, x2 = (torch.randn(2, 7, 16, dtype=torch.float64, generator=g) for _ in range(2))
    y1, y2 = layer(x1, x2, 0.5)
    Y = m.scheme.step(fields=_shear_fields(layer), x=torch.stack([x1, x2]), t=0.5,
                      step_size=0.5, method="euler")
    assert torch.allclose(torch.stack([y1, y2]), Y, rtol=0, atol=1e-13)
    assert (y1 - x1).abs().max() > 1e-3 and (y2 - x2).abs().max() > 1e-3   # both blocks moved


def test_lie_trotter_is_the_reformer_block():
    """RevNet / Reformer: ``y1 = x1 + F(x2)``, ``y2 = x2 + G(y1)``, F attention, G the
    feed-forward network."""
    layer = _model("lie-trotter").layers[0]
    g = torch.Generator().manual_seed(3)
    x1, x2 = (torch.randn(2, 5, 16, dtype=torch.float64, generator=g) for _ in range(2))
    attn, ffn = layer.diffusion, layer.convection
    r1 = x1 + attn(0.0, x2)
    r2 = x2 + ffn(0.0, r1)
    y1, y2 = layer(x1, x2)
    assert torch.equal(y1, r1) and torch.equal(y2, r2)


@pytest.mark.parametrize("scheme", ["lie-trotter", "strang", "yoshida4"])
def test_inverse_at_depth_64_in_float64(scheme):
    m = _model(scheme, n_layers=64)
    for p in m.parameters():                 # fields of order one, so the test can fail
        torch.nn.init.normal_(p, std=0.2)
    g = torch.Generator().manual_seed(4)
    x1, x2 = (torch.randn(2, 6, 16, dtype=torch.float64, generator=g) for _ in range(2))
    y1, y2 = x1, x2
    with torch.no_grad():
        for k, layer in enumerate(m.layers):
            y1, y2 = layer(y1, y2, float(k))
        assert (y1 - x1).norm() > 0.1 * x1.norm()
        for k in reversed(range(64)):
            y1, y2 = m.layers[k].inverse(y1, y2, float(k))
    rel = max((y1 - x1).norm() / x1.norm(), (y2 - x2).norm() / x2.norm())
    assert rel < 1e-11, rel


def _global_error(scheme, n_steps, T=1.0):
    m = _model(scheme, n_layers=1, d=8)
    torch.manual_seed(5)
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.5)
    base = m.layers[0]
    fields = {"diffusion": base.diffusion, "convection": base.convection}
    h = T / n_steps
    layer = ReversibleLayer(m.scheme, step_size=h, fields=fields)
    g = torch.Generator().manual_seed(6)
    x1, x2 = (torch.randn(1, 4, 8, dtype=torch.float64, generator=g) for _ in range(2))
    with torch.no_grad():
        y1, y2 = x1, x2
        for k in range(n_steps):
            y1, y2 = layer(y1, y2, k * h)
        X = torch.stack([x1, x2])
        f = {"diffusion": _shear(base.diffusion, 0), "convection": _shear(base.convection, 1)}
        from torchdiffeq import odeint
        ref = odeint(lambda t, X: f["diffusion"](t, X) + f["convection"](t, X), X,
                     torch.tensor([0.0, T], dtype=torch.float64), rtol=1e-13, atol=1e-13,
                     method="dopri8")[-1]
    return float((torch.stack([y1, y2]) - ref).norm())


@pytest.mark.parametrize("scheme,order,steps", [("lie-trotter", 1, (8, 16, 32, 64)),
                                                ("strang", 2, (8, 16, 32, 64)),
                                                ("yoshida4", 4, (4, 8, 16, 32))])
def test_global_order_with_residual_sub_layers_is_the_schemes(scheme, order, steps):
    """Euler sub-steps on shears are exact flows: the network's step keeps the scheme's order
    (a plain residual network is first order whatever its scheme)."""
    errs = [_global_error(scheme, n) for n in steps]
    assert min(errs) > 1e-12                       # above round-off
    slope = -np.polyfit(np.log(steps), np.log(errs), 1)[0]
    assert abs(slope - order) < 0.2, (scheme, slope, errs)


def _assert_plain_gradients(m, idx, tol=1e-9):
    """The reversible backward's gradients are ordinary autograd's, relative to ``tol``."""
    _, ga = _grads(m, idx, plain=False)
    _, gb = _grads(m, idx, plain=True)
    for a, b in zip(ga, gb):
        assert (a - b).abs().max() <= tol * b.abs().max()


def _grads(m, idx, plain, seed=7):
    m.zero_grad()
    torch.manual_seed(seed)
    ctx = plain_autograd(m) if plain else torch.enable_grad()
    with ctx:
        loss = torch.nn.functional.cross_entropy(m(idx).flatten(0, 1), idx.flatten())
        loss.backward()
    return loss.detach(), [p.grad.clone() for p in m.parameters()]


@pytest.mark.parametrize("scheme,weights", [("lie-trotter", "shared"), ("strang", "per-stage"),
                                            ("yoshida4", "shared")])
@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-9), (torch.float32, 5e-6)])
@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_gradients_equal_ordinary_autograd(scheme, weights, dtype, tol, dropout):
    m = _model(scheme, n_layers=3, weights=weights, dtype=dtype, dropout=dropout)
    idx = _idx()
    la, ga = _grads(m, idx, plain=False)
    lb, gb = _grads(m, idx, plain=True)
    assert torch.allclose(la, lb, rtol=tol, atol=0)
    for a, b in zip(ga, gb):
        scale = b.abs().max().clamp_min(1e-30)
        assert (a - b).abs().max() / scale < tol
    if dropout:                     # the RNG matters: another seed gives other gradients
        _, gc = _grads(m, idx, plain=True, seed=8)
        assert max(float((a - c).abs().max()) for a, c in zip(ga, gc)) > 1e-4


def _saved_bytes(n_layers, reversible, distinct=False):
    """Bytes the saved-tensor hooks see (``distinct``: once per storage)."""
    torch.manual_seed(0)
    m = sn.SplitTransformer(V, 32, 2, n_layers, scheme="strang", reversible=reversible,
                            max_len=32)
    params = {p.data_ptr() for p in m.parameters()}
    total, seen = [0], {}

    def pack(t):
        if t.data_ptr() not in params:
            total[0] += t.numel() * t.element_size()
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with saved_tensors_hooks(pack, lambda t: t):
        m(_idx(4, 32)).sum()
    return sum(seen.values()) if distinct else total[0]


def test_bytes_saved_for_backward_are_flat_in_depth():
    """From 4 to 64 layers: the reversible stack's saved bytes stay put, the plain one's grow
    about 16-fold."""
    rev = [_saved_bytes(n, True) for n in (4, 64)]
    plain = [_saved_bytes(n, False) for n in (4, 64)]
    assert rev[1] <= 1.05 * rev[0], rev
    assert plain[1] > 12 * plain[0], plain
    assert rev[1] < plain[0]


def test_saved_bytes_counts_distinct_storages():
    """The library's counter (describe, the study) against the hook count above: equal to it
    taken once per storage, and to the count of every save when nothing is saved twice, and a
    tensor saved by two operations counted once."""
    from splitnet.reversible import saved_bytes

    torch.manual_seed(0)
    m = sn.SplitTransformer(V, 32, 2, 2, scheme="strang", reversible=True, max_len=32)
    assert saved_bytes(m, _idx(4, 32)) == _saved_bytes(2, True, distinct=True)
    assert saved_bytes(m, _idx(4, 32)) == _saved_bytes(2, True)
    w = torch.nn.Parameter(torch.randn(8, 8))

    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = w

        def forward(self, x):
            return (x * x).sum() + (x @ self.w).sum()      # x saved by both: 64 floats once

    assert saved_bytes(Twice(), torch.randn(8, 8, requires_grad=True)) == 8 * 8 * 4


@pytest.mark.parametrize("autocast", [False, True])
def test_exact_mode_reconstructs_bit_for_bit_at_256_layers(autocast):
    """Increments on a 2^-10 grid: float32 sums are exact, so the inverse is the input bit for
    bit, with float32 or bfloat16 field compute."""
    torch.manual_seed(0)
    m = sn.SplitTransformer(V, 16, 2, 256, scheme="strang", reversible=True,
                            reversible_grid=10, max_len=16)
    x1, x2 = start_pair(torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(9)), 10)
    amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast)
    with torch.no_grad(), amp:
        y1, y2 = run_stack(m.layers, x1, x2, 1.0)
        assert not torch.equal(y1, x1)
        for k in reversed(range(256)):
            y1, y2 = m.layers[k].inverse(y1, y2, float(k))
    assert y1.dtype == torch.float32
    assert torch.equal(y1, x1) and torch.equal(y2, x2)


def test_exact_mode_without_the_grid_drifts():
    """The contrast: the same network in float32 without the grid does not reconstruct bit for
    bit (so the test above can fail)."""
    torch.manual_seed(0)
    m = sn.SplitTransformer(V, 16, 2, 64, scheme="strang", reversible=True, max_len=16)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        y1, y2 = run_stack(m.layers, x, x.clone(), 1.0)
        for k in reversed(range(64)):
            y1, y2 = m.layers[k].inverse(y1, y2, float(k))
    assert not (torch.equal(y1, x) and torch.equal(y2, x))


def test_exact_mode_gradients_equal_ordinary_autograd():
    m = _model("strang", n_layers=4, dtype=torch.float32, reversible_grid=12)
    idx = _idx()
    _, ga = _grads(m, idx, plain=False)
    _, gb = _grads(m, idx, plain=True)
    for a, b in zip(ga, gb):
        assert (a - b).abs().max() / b.abs().max().clamp_min(1e-30) < 5e-6


def test_the_grid_guard_names_the_value():
    m = sn.SplitTransformer(V, 16, 2, 2, scheme="strang", reversible=True, reversible_grid=20,
                            max_len=16)
    x = torch.full((1, 3, 16), 100.0)
    with pytest.raises(FloatingPointError, match=r"reversible_grid=20: \|x\| reached 1\d\d"):
        run_stack(m.layers, x, x, 1.0)


def test_the_mean_readout_is_the_plain_network_when_the_fields_vanish():
    """Why the output is the mean of the pair: with zero fields both blocks stay the embedding
    and the network is the plain one (same parameters, same logits); with fields they part."""
    torch.manual_seed(0)
    plain = sn.SplitTransformer(V, 16, 2, 3, scheme="strang", max_len=16).double()
    rev = _model("strang", n_layers=3)
    rev.load_state_dict(plain.state_dict())                 # the same parameter names
    idx = _idx()
    assert not torch.allclose(rev(idx), plain(idx))
    for layer in list(plain.layers) + list(rev.layers):
        for name in ("diffusion", "convection"):
            for m in layer.field_modules(name):
                out = m.proj if hasattr(m, "proj") else m.fc2
                torch.nn.init.zeros_(out.weight)
                torch.nn.init.zeros_(out.bias)
    assert torch.allclose(rev(idx), plain(idx), rtol=0, atol=1e-12)


@pytest.mark.parametrize("scheme", ["lie-trotter", "yoshida4"])
def test_generation_cached_equals_uncached(scheme):
    m = _model(scheme, n_layers=2, dtype=torch.float32)
    idx = _idx(2, 4)
    a = m.generate(idx, 8, temperature=0, use_cache=True)
    b = m.generate(idx, 8, temperature=0, use_cache=False)
    assert torch.equal(a, b)


def test_states_end_at_the_readout():
    m = _model("strang", n_layers=2)
    idx = _idx()
    logits, states = m(idx, return_states=True)
    assert states.shape[0] == 1 + 2 * len(m.scheme.stages) == len(m.state_times())
    assert torch.allclose(m.head(m.norm(states[-1])), logits)
    assert torch.allclose(logits, m(idx))


@pytest.mark.parametrize("kw,match", [
    ({"scheme": "parallel"}, "write both blocks"),
    ({"method": "midpoint"}, "method='euler'"),
    ({"learn_coefficients": True}, "learned coefficients"),
    ({"reversible_grid": 0}, "reversible_grid"),
    ({"reversible_grid": 21}, "reversible_grid"),
    ({"reversible_grid": 3, "reversible": False}, "needs reversible=True"),
])
def test_bad_reversible_configs_are_one_line_errors(kw, match):
    kw = {"reversible": True, **kw}
    with pytest.raises(ValueError, match=match) as e:
        sn.SplitConfig(**kw)
    assert "\n" not in str(e.value)


def test_plain_autograd_restores_and_refuses_non_modules():
    m = _model()
    with plain_autograd(m):
        with plain_autograd(m):
            pass
        assert m.reversible_plain_autograd
    assert not m.reversible_plain_autograd
    with pytest.raises(TypeError, match="takes a network"):
        with plain_autograd(3):
            pass


def test_parameters_and_state_dict_equal_the_plain_network():
    a = sn.SplitTransformer(V, 16, 2, 2, scheme="yoshida4", max_len=16)
    b = sn.SplitTransformer(V, 16, 2, 2, scheme="yoshida4", reversible=True, max_len=16)
    assert a.n_params() == b.n_params()
    assert list(a.state_dict()) == list(b.state_dict())
    assert math.isclose(sum(p.numel() for p in a.parameters()),
                        sum(p.numel() for p in b.parameters()))


@pytest.mark.heavy
def test_refinement_of_a_reversible_network_converges_to_its_partitioned_ode():
    """rediscretize keeps the shears (its own stages: the model bit for bit), refining with
    Euler substeps converges to the exact flow of the partitioned ODE at the scheme's order,
    and a non-Euler method is refused (on a shear it would be Euler again)."""
    from splitnet.analyses import refine as R

    m = _model("strang", n_layers=2, d=8).eval()
    for p in m.parameters():
        torch.nn.init.normal_(p, std=0.3)
    idx = _idx(2, 6)
    with torch.no_grad():
        assert torch.equal(R.rediscretize(m)(idx), m(idx))
        ode = R.ode_model(m)(idx)
        errs = [float((R.rediscretize(m, substeps=n)(idx) - ode).abs().max()) for n in (2, 4, 8)]
    assert errs[0] > 1e-6 and all(b < a / 3 for a, b in itertools.pairwise(errs)), errs
    with pytest.raises(ValueError, match="method='euler'"):
        R.rediscretize(m, substeps=2, method="rk4")
    logits, states = R.ode_model(m)(idx, return_states=True)
    assert states.shape[0] == 1 + 2 * 2 and torch.allclose(m.head(m.norm(states[-1])), logits)


def _describe_bytes(capsys, n_layers):
    from splitnet.cli import main

    assert main(["describe", "--scheme", "strang", "--weights", "shared", "--activations",
                 "--d-model", "32", "--n-heads", "2", "--n-layers", str(n_layers),
                 "--seq-len", "32"]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("strang ")][-1]
    plain, rev = (int(v.replace(",", "")) for v in row.split()[3:5])
    return plain, rev


def test_describe_reports_activation_bytes_plain_and_reversible(capsys):
    p2, r2 = _describe_bytes(capsys, 2)
    p8, r8 = _describe_bytes(capsys, 8)
    assert r2 == r8 < p2 and p8 > 3.5 * p2


def test_gap_and_trajectories_follow_the_partitioned_ode():
    """The discretization gap of a reversible network is measured on its pair: the local error
    of one layer against the exact flow of its partitioned ODE shrinks at the scheme's local
    order as h does (Strang: h^3), and the trajectories' ODE path from the embedding lands
    where the ODE model of the network lands."""
    from splitnet.analyses.gap import discretization_gap
    from splitnet.analyses.refine import ode_model
    from splitnet.analyses.trajectories import collect

    idx = _idx(1, 6)
    local = []
    for h in (0.2, 0.1):
        m = _model("strang", n_layers=1, d=8, step_size=h)
        g = torch.Generator().manual_seed(1)
        for p in m.parameters():
            torch.nn.init.normal_(p, std=0.3, generator=g)
        local.append(discretization_gap(m, idx, progress=False, rtol=1e-12, atol=1e-12)
                     .local[0])
    assert 2 ** 2.6 < local[0] / local[1] < 2 ** 3.4, local
    tr = collect(m, idx[0], continuous=True, points_per_layer=4)
    with torch.no_grad():
        x = ode_model(m).run_layers(m.embed(idx))[0]
    assert torch.allclose(tr.path[-1].double(), x, atol=1e-6)
    with pytest.raises(ValueError, match="restart=False"):
        collect(m, idx[0], continuous=True, restart=True)


def test_export_keeps_a_reversible_network_reversible(tmp_path):
    """Not a GPT-2 (one residual stream): export writes splitnet's own format, which loads
    back with the same logits."""
    pytest.importorskip("transformers")
    from splitnet.interop import convert, imported

    torch.manual_seed(0)
    m = sn.SplitTransformer(256, 16, 2, 2, scheme="strang", reversible=True, max_len=16).eval()
    assert "reversible" in convert.gpt2_mismatch(m)
    with pytest.raises(ValueError, match="reversible"):
        convert.to_hf(m, tmp_path / "g", format="gpt2")
    assert convert.to_hf(m, tmp_path / "s") == "splitnet"
    back = imported.load_hf_for_analysis(tmp_path / "s").model
    assert back.config.reversible
    idx = _idx()
    with torch.no_grad():
        assert torch.allclose(back(idx), m(idx), atol=1e-6)


def test_train_reversible_resumes_bit_for_bit(tmp_path):
    """splitnet train --reversible with dropout: stop at step 4 of 8 and resume; steps 5..8
    equal an uninterrupted run bit for bit (the dropout seeds come from the restored RNG)."""
    from splitnet import checkpoint as ck
    from splitnet import train as T
    from splitnet.cli import build_parser
    from splitnet.cli.commands.cmd_train import config_from_args

    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"def f{i}(x):\n    return x * {i % 7}\n" for i in range(300)))
    common = ["--text", str(text), "--d-model", "16", "--n-heads", "2", "--n-layers", "2",
              "--context", "16", "--batch-size", "4", "--warmup", "2", "--eval-windows", "8",
              "--threads", "1", "--no-progress", "--no-plot", "--steps", "8", "--dropout", "0.1",
              "--eval-every", "4", "--ckpt-every", "4", "--reversible", "--scheme", "strang"]

    def run(out, *extra):
        return T.train(*config_from_args(build_parser("train").parse_args(
            [*common, "--out", str(out), *extra])))

    run(tmp_path / "full")
    run(tmp_path / "cut", "--stop-at", "4")
    T.train(*config_from_args(build_parser("train").parse_args(
        ["--out", str(tmp_path / "cut"), "--resume", "--no-progress", "--no-plot",
         "--threads", "1"])))
    a, b = (
        {r["step"]: r["loss"] for r in ck.read_metrics(tmp_path / d / ck.METRICS)}
        for d in ("full", "cut"))
    assert sorted(a) == sorted(b) == list(range(1, 9))
    assert all(a[s] == b[s] for s in range(5, 9)), (a, b)
    state = ck.load(tmp_path / "cut")
    assert state["model_config"]["reversible"] is True


@pytest.mark.heavy
def test_bench_reversible_runs(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_reversible.py"
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, str(path), "--quick", "--schemes", "strang",
                        "--json", str(out)],
                       capture_output=True, text=True, timeout=300, check=False,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("| strang")]
    assert len(row) == 1 and row[0].count("MiB") == 3
    res = json.loads(out.read_text())["rows"][0]
    # the three networks ran; what each keeps for backward orders as the theory says
    assert res["reversible_saved"] <= res["checkpointed_saved"] < res["plain_saved"]
    assert res["ratio"] > 0 and res["ratio_ckpt"] > 0


def test_bench_reversible_parts():
    """``--parts``: every part timed at a tiny size, each a positive share of the plain step;
    the walk without products leaves the reversible backward's products in place after."""
    import argparse
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_reversible

    from splitnet.reversible import backprop

    before = backprop._vjp
    a = argparse.Namespace(vocab=64, d_model=16, n_heads=2, n_layers=2, seq_len=8, batch=2,
                           pairs=2, warmup=0)
    r = bench_reversible.parts(a, "strang", torch.device("cpu"))
    assert backprop._vjp is before
    assert all(r[k] > 0 for k in bench_reversible.PARTS)
    assert len(bench_reversible.parts_table([r])) == 3
    # the walk it times is the real backward (gradients), and without products it adds none
    _, rev = bench_reversible._pair(a, "strang", torch.device("cpu"))
    walk = bench_reversible._walk(rev, torch.randint(0, 64, (2, 8)))
    assert any(gp.abs().sum() > 0 for k, gp in walk()[0].items() if k != backprop.MEMORY)
    with bench_reversible._no_products():
        grads = walk()[0]
    assert all(gp.abs().sum() == 0 for gp in grads.values())


_RSS_PROBE = """
import resource, sys, torch
import splitnet as sn
n, rev = int(sys.argv[1]), sys.argv[2] == "1"
torch.set_num_threads(1)
torch.manual_seed(0)
m = sn.SplitTransformer(256, 64, 4, n, scheme="strang", reversible=rev, max_len=512)
for p in m.parameters():
    p.grad = torch.zeros_like(p)          # parameter gradients aside: allocated up front
idx = torch.randint(0, 256, (8, 512))
m(idx[:1, :8]).sum().backward()           # kernels and allocator warmed up
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
torch.nn.functional.cross_entropy(m(idx).flatten(0, 1), idx.flatten()).backward()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(before, after)
"""


@pytest.mark.slow
def test_peak_rss_of_a_training_step_is_flat_in_depth():
    """A fresh process per point: the peak RSS of one training step (8 x 512 tokens, d 64,
    Strang) with 4 and 32 layers. Reversible: the process's peak grows less than 5 % and the
    step's own rise stays put; plain: the step's rise grows more than 4x."""
    import subprocess
    import sys

    def peak(n, rev):
        r = subprocess.run([sys.executable, "-c", _RSS_PROBE, str(n), str(int(rev))],
                           capture_output=True, text=True, timeout=600, check=True)
        before, after = (int(v) for v in r.stdout.split())
        return before, after
    (b4, a4), (b32, a32) = peak(4, True), peak(32, True)
    assert a32 < 1.05 * a4 + (b32 - b4), (a4, a32)     # the parameters' own growth aside
    assert a32 - b32 < 1.3 * (a4 - b4), (a4 - b4, a32 - b32)
    (p4, q4), (p32, q32) = peak(4, False), peak(32, False)
    assert q32 - p32 > 4 * (q4 - p4), (q4 - p4, q32 - p32)


def test_gradients_under_autocast_replay_its_state():
    """bfloat16 autocast: the backward recomputes each field under the forward's autocast
    state (every call of a field, forward and recomputation, computes in bfloat16), and the
    gradients are ordinary autograd's to bfloat16 rounding."""
    m = _model("strang", n_layers=3, dtype=torch.float32)
    idx = _idx()
    seen = []
    m.layers[1].diffusion.qkv.register_forward_hook(lambda mod, i, o: seen.append(o.dtype))

    def grads(plain):
        m.zero_grad()
        ctx = plain_autograd(m) if plain else torch.enable_grad()
        with ctx, torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(idx).flatten(0, 1).float(),
                                                     idx.flatten())
        loss.backward()
        return [p.grad.clone() for p in m.parameters()]
    rev = grads(False)
    assert seen == [torch.bfloat16] * 2                  # the forward and the recomputation
    for a, b in zip(rev, grads(True)):
        assert (a - b).abs().max() <= 1e-2 * b.abs().max() + 1e-8


# -- the lean backward (issue 44) ------------------------------------------------------------

def test_the_backward_reconstructs_the_input_pair_bit_for_bit_on_the_grid():
    """Exact mode: the walk that pulls the gradients back ends on the very pair the stack
    started from (every in-place subtraction undoes its addition exactly), at 32 layers."""
    from splitnet.reversible import backprop

    m = _model("strang", n_layers=32, dtype=torch.float32, reversible_grid=10)
    x1, x2 = start_pair(m.embed(_idx()).detach(), 10)
    run = backprop._Run(m.layers, 1.0, {}, x1.device)
    with torch.no_grad():
        y1, y2 = run.forward(x1, x2)
    params = list(m.parameters())
    _, (r1, r2), _ = backprop._backward(run, [y1, y2], [torch.ones_like(y1)] * 2, None,
                                        params)
    assert torch.equal(r1, x1) and torch.equal(r2, x2)
    assert torch.equal(y1, run.forward(x1, x2)[0])          # the outputs were not written


@pytest.mark.parametrize("engine", ["direct", "public"])
def test_the_engine_call_and_the_public_grad_agree(monkeypatch, engine):
    """The backward calls the autograd engine directly; where torch keeps it elsewhere it
    falls back to torch.autograd.grad: both give ordinary autograd's gradients (float64)."""
    from splitnet.reversible import backprop

    if engine == "public":
        monkeypatch.setattr(backprop, "_ENGINE", None)
    m = _model("strang", n_layers=3, weights="per-stage", dropout=0.1)
    idx = _idx()
    _assert_plain_gradients(m, idx)


def test_a_parameter_a_stage_does_not_use_gets_a_zero_gradient():
    """A field with a parameter that does not reach its output (the engine returns None for
    it) still gets a gradient: zero, like ordinary autograd's unused parameter."""
    class Field(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.lin = torch.nn.Linear(d, d).double()
            self.unused = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))

        def forward(self, t, x):
            return torch.tanh(self.lin(x))

    torch.manual_seed(0)
    layers = torch.nn.ModuleList(
        ReversibleLayer(sn.schemes.get("strang"), diffusion=Field(4), convection=Field(4))
        for _ in range(3))
    x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    grads = []
    for plain in (False, True):
        for p in layers.parameters():
            p.grad = None
        y1, y2 = run_stack(layers, x, x, 1.0, plain=plain)
        (y1.square().sum() + y2.sin().sum()).backward()
        grads.append([p.grad for p in layers.parameters()])
    for a, b in zip(*grads):
        assert b is None or torch.allclose(a, b, rtol=1e-10, atol=1e-12)
        if b is None:
            assert torch.equal(a, torch.zeros_like(a))


def test_no_dropout_module_is_called_when_it_would_do_nothing():
    """Dropout with p = 0, or in eval mode, is not called at all (a module call is host time
    a deep narrow network is bound by); with p > 0 in training it is, forward and
    recomputation alike."""
    for p, train, calls in ((0.0, True, 0), (0.2, False, 0), (0.2, True, 2)):
        m = _model("lie-trotter", n_layers=2, dropout=p).train(train)
        seen = []
        m.layers[0].convection.dropout.register_forward_hook(lambda *a, seen=seen: seen.append(1))
        with torch.set_grad_enabled(train):
            m(_idx()).sum().backward() if train else m(_idx())
        assert len(seen) == calls, (p, train, seen)


def test_a_step_walks_no_module_tree_once_the_stack_is_indexed(monkeypatch):
    """The stack lists its stage modules once (splitnet.reversible.index): a later step's
    forward and backward walk none of its modules' trees (the walk was a tenth of a
    host-bound step), shared fields included (Strang: the feed-forward twice a layer)."""
    m = _model("strang", n_layers=4)
    m(_idx()).sum().backward()
    stack = {id(x) for x in m.layers.modules()}
    walked = []
    for name in ("parameters", "named_parameters", "modules", "named_modules"):
        orig = getattr(torch.nn.Module, name)

        def spy(self, *a, orig=orig, **k):
            walked.append(id(self))
            return orig(self, *a, **k)
        monkeypatch.setattr(torch.nn.Module, name, spy)
    m(_idx()).sum().backward()
    assert not stack & set(walked)


def test_the_index_sees_a_replaced_module_and_a_frozen_parameter():
    """After a step: a sub-module replaced (a new registration: the index is rebuilt) and a
    parameter frozen (read at every use) give ordinary autograd's gradients (float64), the
    new module's included and none for the frozen one."""
    m = _model("strang", n_layers=3, weights="per-stage")
    idx = _idx()
    m(idx).sum().backward()
    torch.manual_seed(5)
    m.layers[1].convection[0].fc1 = torch.nn.Linear(*reversed(
        m.layers[1].convection[0].fc1.weight.shape), dtype=torch.float64)
    frozen = m.layers[0].diffusion[0].qkv.weight.requires_grad_(False)

    def grads(plain):
        m.zero_grad()
        with plain_autograd(m) if plain else torch.enable_grad():
            m(idx).square().sum().backward()
        return [p.grad for p in m.parameters()]
    for a, b in zip(grads(False), grads(True)):
        assert (a is None) == (b is None)
        assert a is None or (a - b).abs().max() <= 1e-9 * b.abs().max()
    assert m.layers[1].convection[0].fc1.weight.grad.abs().max() > 0
    assert frozen.grad is None


def test_a_refined_network_shares_its_modules_across_stages_and_gradients_stay_exact():
    """A re-discretised reversible network (every field module called by several stages of a
    layer, Strang with 3 sub-steps): its index lists each stage's modules, the shared ones
    accumulate, and the gradients are ordinary autograd's (float64, dropout)."""
    from splitnet.analyses import refine as R

    m = R.rediscretize(_model("strang", n_layers=2, dropout=0.1), substeps=3).train()
    idx = _idx()
    _assert_plain_gradients(m, idx)


def test_parameters_tied_after_a_step_get_their_gradient_once():
    """Parameters tied after the index was built (a parameter registered, no new module):
    within one stage (an attention's norm weight and its projection's bias) and across layers
    (two output projections). Each shared parameter is listed once per stage, and its gradient
    is ordinary autograd's, not twice it."""
    m = _model("strang", n_layers=3)
    idx = _idx()
    m(idx).sum().backward()
    att = m.layers[1].diffusion
    att.norm.weight = att.proj.bias
    m.layers[2].diffusion.proj.weight = m.layers[0].diffusion.proj.weight
    _assert_plain_gradients(m, idx)


def test_a_retained_graph_backpropagates_twice():
    """A second backward over a retained graph reconstructs the stack again from the saved
    final pair: twice the gradients of one backward, float64, with dropout."""
    m = _model("strang", n_layers=3, dropout=0.1)
    idx = _idx()
    torch.manual_seed(3)
    loss = m(idx).square().sum()
    loss.backward(retain_graph=True)
    once = [p.grad.clone() for p in m.parameters()]
    loss.backward()
    for a, p in zip(once, m.parameters()):
        assert torch.allclose(p.grad, 2 * a, rtol=1e-12, atol=1e-15)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="two CUDA streams need a GPU")
@pytest.mark.parametrize("scheme,dropout", [("strang", 0.0), ("yoshida4", 0.1)])
def test_two_streams_compute_what_one_stream_does(scheme, dropout):
    """PaReprop's schedule (sn.reversible.two_streams) on a GPU: the same gradients as the
    one-stream walk, bit for bit, under bf16 autocast, at 12 layers; and ordinary autograd's."""
    from splitnet.reversible import two_streams

    m = _model(scheme, n_layers=12, d=64, dtype=torch.float32, dropout=dropout,
               max_len=64).cuda()
    idx = _idx(4, 64).cuda()

    def grads(streams, plain=False):
        m.zero_grad()
        torch.manual_seed(3)
        ctx = plain_autograd(m) if plain else two_streams(m, streams)
        with ctx, torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(idx).flatten(0, 1).float(),
                                                     idx.flatten())
        loss.backward()
        return [p.grad.clone() for p in m.parameters()]
    one, two, ref = grads(False), grads(True), grads(False, plain=True)
    assert all(torch.equal(a, b) for a, b in zip(one, two))
    for a, b in zip(two, ref):
        assert (a - b).abs().max() <= 2e-2 * b.abs().max() + 1e-6


def test_two_streams_is_a_no_op_on_the_cpu_and_restores():
    from splitnet.reversible import two_streams
    from splitnet.reversible.backprop import STREAMS

    m = _model("strang", n_layers=2)
    idx = _idx()
    _, ga = _grads(m, idx, plain=False)
    with two_streams(m):
        assert all(getattr(la, STREAMS) for la in m.layers)
        with two_streams(m, False):
            assert not any(getattr(la, STREAMS) for la in m.layers)
        assert all(getattr(la, STREAMS) for la in m.layers)
        _, gb = _grads(m, idx, plain=False)
    assert not any(getattr(la, STREAMS, False) for la in m.layers)
    assert all(torch.equal(a, b) for a, b in zip(ga, gb))
