"""Particle trajectories: collection, the model's ODE path, PCA, diagnostics, plots and CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import splitnet.analyses.trajectories as tr
from splitnet import checkpoint as ck
from splitnet.cli import main
from splitnet.integrators.schemes import get
from splitnet.nets.models import SplitTransformer
from splitnet.plots import plot_trajectories
from splitnet.runs.checkpoint import load_model

TEXT = "hello world!"
TOL = {"rtol": 1e-9, "atol": 1e-11}   # ODE tolerances: far below every gap tested, and quick
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_model(scheme="lie-trotter", weights="shared", step_size=1.0, n_layers=3, d_model=16,
                seed=0, max_len=64, dtype=torch.float64):
    torch.manual_seed(seed)
    m = SplitTransformer(vocab_size=256, d_model=d_model, n_heads=2, n_layers=n_layers,
                         scheme=scheme, weights=weights, step_size=step_size, max_len=max_len)
    return m.to(dtype).eval()


# --------------------------------------------------------------------------- shapes and times

@pytest.mark.parametrize("scheme", ["lie-trotter", "strang", "yoshida4", "sfsf"])
def test_shapes_times_and_labels(scheme):
    m = small_model(scheme, step_size=0.5)
    n_st = len(m.scheme.stages)
    T = len(TEXT)
    t = tr.collect(m, TEXT, per_stage=True)
    assert t.states.shape == (1 + 3 * n_st, T, 16)
    assert torch.equal(t.times, m.state_times())
    # Layer ends sit at t = k h exactly; the embedding is point 0 at t = 0.
    ends = t.times[torch.as_tensor(t.layer_end)]
    assert torch.allclose(ends, torch.arange(4, dtype=torch.float64) * 0.5, atol=1e-12)
    assert t.layer.tolist() == [-1] + [k for k in range(3) for _ in range(n_st)]
    assert t.stage.tolist() == [-1] + list(range(n_st)) * 3
    assert t.fields[0] == tr.EMBEDDING
    assert t.fields[1:] == tuple(st.field for st in m.scheme.stages) * 3
    assert t.labels[5] == "\u2423" and t.labels[0] == "h" and t.labels[-1] == "!"
    assert t.tokens == tuple(TEXT.encode())

    lay = tr.collect(m, TEXT, per_stage=False)
    assert lay.states.shape == (4, T, 16)
    assert torch.equal(lay.states, t.layer_states())
    assert lay.layer_end.all() and lay.stage.tolist() == [-1] + [n_st - 1] * 3
    # The last state is what the network feeds its head.
    assert torch.allclose(t.states[-1], lay.states[-1])


def test_accepts_ids_and_batch_of_one_and_restores_mode():
    m = small_model()
    m.train()
    ids = tr.encode(TEXT)
    a = tr.collect(m, ids)
    b = tr.collect(m, ids[None])
    assert torch.equal(a.states, b.states)
    assert m.training, "collect must restore the model's training mode"


# --------------------------------------------------------------------------- per-stage = step

@pytest.mark.parametrize("scheme,weights", [("lie-trotter", "shared"), ("strang", "shared"),
                                            ("yoshida4", "shared"), ("strang", "per-stage"),
                                            ("sfsf", "per-stage")])
def test_per_stage_states_match_scheme_step_euler(scheme, weights):
    m = small_model(scheme, weights=weights, step_size=0.7)
    t = tr.collect(m, TEXT, per_stage=True)
    x = t.states[0]
    h = m.step_size
    i = 1
    for k, layer in enumerate(m.layers):
        stages: list[torch.Tensor] = []
        with torch.no_grad():
            x = m.scheme.step(diffusion=layer.diffusion, convection=layer.convection, x=x,
                                  t=k * h, step_size=h, method="euler", states=stages)
        assert len(stages) == len(m.scheme.stages)
        for s in stages:
            torch.testing.assert_close(t.states[i], s, rtol=1e-12, atol=1e-12)
            i += 1
    assert i == t.n_points


# --------------------------------------------------------------------------- the ODE path

def test_path_shape_and_start():
    m = small_model("strang", step_size=0.25)
    t = tr.collect(m, TEXT, continuous=True, points_per_layer=5, **TOL)
    assert t.path.shape == (1 + 3 * 5, len(TEXT), 16)
    assert torch.allclose(t.path_times, torch.linspace(0, 0.75, 16, dtype=torch.float64))
    assert torch.equal(t.path[0], t.states[0])
    assert t.path_at_layers().shape == (4, len(TEXT), 16)
    assert t.gap()[0] == 0.0


def test_ode_path_meets_layers_for_small_h_and_leaves_them_for_large_h():
    """Lie–Trotter + Euler is a first-order integrator of dx/dt = D + C: its distance to the
    ODE at the layer points is O(h) relative to the distance travelled."""
    small = tr.collect(small_model(step_size=0.01), TEXT, continuous=True, points_per_layer=2,
                       **TOL)
    large = tr.collect(small_model(step_size=2.0), TEXT, continuous=True, points_per_layer=2,
                       **TOL)
    g_small = small.gap(relative=True)[-1]
    g_large = large.gap(relative=True)[-1]
    assert g_small < 2e-3
    assert g_large > 0.05
    assert g_large / g_small > 50


@pytest.mark.parametrize("weights", ["shared", "per-stage"])
def test_ode_definition_is_consistent_first_order(weights):
    """The ODE of a layer (sum_i c_i X_i) is the one the network converges to: halving h halves
    the one-layer (restarted) gap for Euler sub-steps, for shared and per-stage weights alike.
    A wrong field (e.g. coefficients dropped) would leave an O(1) relative gap."""
    gaps = []
    for h in (0.02, 0.01):
        t = tr.collect(small_model("yoshida4", weights=weights, step_size=h), TEXT,
                       continuous=True, points_per_layer=1, restart=True, **TOL)
        gaps.append(t.gap()[1:].max() / h)        # local error / h ~ h
    ratio = gaps[1] / gaps[0]
    assert 0.4 < ratio < 0.6, ratio


def test_ode_field_groups_shared_stages():
    m = small_model("yoshida4", weights="shared")
    layer = m.layers[0]
    x = torch.randn(len(TEXT), 16, dtype=torch.float64)
    f = layer.ode_field()
    assert len(f.terms) == 2 and f.coeffs == pytest.approx([1.0, 1.0])   # 9 stages, 2 modules
    want = layer.diffusion(0.0, x) + layer.convection(0.0, x)
    torch.testing.assert_close(f(0.0, x), want, rtol=1e-12, atol=1e-12)


def test_fixed_grid_solver_agrees_with_dopri5():
    m = small_model(step_size=0.5)
    a = tr.collect(m, TEXT, continuous=True, points_per_layer=3)
    b = tr.collect(m, TEXT, continuous=True, points_per_layer=3, solver="rk4")
    torch.testing.assert_close(a.path, b.path, rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------- PCA

def test_pca_deterministic_and_sign_convention():
    m = small_model("strang")
    a = tr.collect(m, TEXT)
    b = tr.collect(m, TEXT)
    pa, pb = tr.pca(a, 3), tr.pca(b, 3)
    assert np.array_equal(pa.components, pb.components)
    assert np.array_equal(pa.transform(a.states), pb.transform(b.states))
    comps = pa.components
    np.testing.assert_allclose(comps @ comps.T, np.eye(3), atol=1e-12)
    for c in comps:                      # largest-magnitude loading is positive
        assert c[np.argmax(np.abs(c))] > 0
    # An SVD's signs are arbitrary; the convention makes them a function of the data: the
    # mirrored cloud has the same axes, and its projection is mirrored.
    x = a.states.double().reshape(-1, 16).numpy()
    pm = tr.pca(-x, 3)
    np.testing.assert_allclose(pm.components, comps, atol=1e-10)
    np.testing.assert_allclose(pm.transform(-x), -pa.transform(x), atol=1e-10)
    assert np.all(np.diff(pa.explained_variance_ratio) <= 0)


def test_pca_rejects_bad_dim():
    with pytest.raises(ValueError, match="dim"):
        tr.pca(np.zeros((5, 3)), 4)


# --------------------------------------------------------------------------- diagnostics

def test_clustering_measures():
    T, D = 6, 8
    same = np.tile(np.arange(1.0, D + 1), (T, 1)) * np.arange(1, T + 1)[:, None]
    assert np.allclose(tr.pairwise_cosines(same), 1.0)
    assert tr.effective_rank(same) == pytest.approx(1.0, abs=1e-9)
    orth = np.eye(T, D) * 3.0
    assert np.allclose(tr.pairwise_cosines(orth), 0.0)
    assert tr.effective_rank(orth) == pytest.approx(T, rel=1e-12)
    m = small_model()
    traj = tr.collect(m, TEXT)
    c = tr.clustering(traj)
    assert c.cosines.shape == (4, len(TEXT) * (len(TEXT) - 1) // 2)
    # against an independent computation on the layer states (torch's cosine similarity, the
    # entropy of the normalised singular values)
    for k, x in enumerate(traj.layer_states().double()):
        cos = torch.nn.functional.cosine_similarity(x[:, None], x[None], dim=-1)
        off = cos[~torch.eye(len(x), dtype=torch.bool)]
        assert c.mean_cosine[k] == pytest.approx(float(off.mean()), abs=1e-12)
        s = torch.linalg.svdvals(x / x.norm(dim=-1, keepdim=True))
        p = s / s.sum()
        assert c.effective_rank[k] == pytest.approx(float(torch.exp(-(p * p.log()).sum())),
                                                    rel=1e-9)


# --------------------------------------------------------------------------- bad input

def test_bad_input_clear_errors(tmp_path):
    m = small_model(max_len=8)
    with pytest.raises(ValueError, match="context is 8"):
        tr.collect(m, "much longer than eight")
    with pytest.raises(ValueError, match="one sequence"):
        tr.collect(m, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(TypeError, match="int64"):
        tr.collect(m, torch.zeros(4))
    with pytest.raises(ValueError, match="empty"):
        tr.collect(m, "")
    with pytest.raises(ValueError, match="no checkpoint"):
        load_model(tmp_path / "missing")
    with pytest.raises(ValueError, match="per-stage"):
        tr.with_scheme(small_model(weights="per-stage"), "strang")


def test_checkpoint_roundtrip_and_scheme_swap(tmp_path):
    m = small_model("lie-trotter", dtype=torch.float32)
    _save_checkpoint(m, tmp_path)
    back = load_model(tmp_path)
    a, b = tr.collect(m, TEXT), tr.collect(back, TEXT)
    assert torch.equal(a.states, b.states)
    s = tr.with_scheme(back, "strang")
    assert s.scheme == get("strang")
    assert torch.equal(s.layers[0].diffusion.qkv.weight, m.layers[0].diffusion.qkv.weight)


# --------------------------------------------------------------------------- plots and CLI

def _save_checkpoint(m, folder):
    ck.save({"version": ck.VERSION, "model_config": m.config.to_dict(),
             "model": m.state_dict()}, folder / ck.CKPT)


def _cli(argv):
    return main(["trajectories", *argv])


SMALL = ["--n-layers", "2", "--d-model", "16", "--n-heads", "2", "--points-per-layer", "2"]


@pytest.mark.heavy
def test_cli_writes_png_diagnostics_compare_and_gif(tmp_path, capsys):
    out = tmp_path / "t.png"
    rc = _cli(["--prompt", "abc de", "--out", str(out), "--diagnostics", str(tmp_path / "d.png"),
               "--compare", "lie-trotter,strang", "--gif", str(tmp_path / "a.gif")] + SMALL)
    assert rc == 0
    for f in (out, tmp_path / "d.png", tmp_path / "t_compare.png"):
        data = f.read_bytes()
        assert len(data) > 5000 and data.startswith(PNG_MAGIC), f
    assert (tmp_path / "a.gif").read_bytes()[:6] in (b"GIF89a", b"GIF87a")
    assert "mean cos" in capsys.readouterr().out


def test_cli_3d_and_checkpoint(tmp_path):
    m = small_model(dtype=torch.float32)
    _save_checkpoint(m, tmp_path)
    out = tmp_path / "t3.png"
    assert _cli(["--checkpoint", str(tmp_path), "--3d", "--out", str(out), "--no-ode"]) == 0
    assert out.read_bytes().startswith(PNG_MAGIC) and out.stat().st_size > 5000


@pytest.mark.parametrize("argv,msg", [
    (["--prompt", "x" * 1100], "context is 1024"),
    (["--checkpoint", "/nonexistent/run"], "no checkpoint"),
    (["--scheme", "runge-kutta"], "unknown scheme"),
])
def test_cli_bad_input(tmp_path, capsys, argv, msg):
    rc = _cli(argv + ["--out", str(tmp_path / "x.png")] + SMALL)
    assert rc == 2
    err = capsys.readouterr().err
    assert msg in err and err.startswith("splitnet trajectories: error:")
    assert not (tmp_path / "x.png").exists()


def test_since_cuts_at_a_layer_boundary_and_restart_path_starts_from_network(tmp_path):
    m = small_model("strang", step_size=0.5)
    t = tr.collect(m, TEXT, continuous=True, points_per_layer=3, restart=True,
                   **TOL)
    late = t.since(1)
    assert late.first_layer == 1 and late.n_layers == 2
    assert torch.equal(late.states[0], t.layer_states()[1])
    assert torch.equal(late.layer_states(), t.layer_states()[1:])
    assert torch.equal(late.path_at_layers(), t.path_at_layers()[1:])
    np.testing.assert_allclose(late.gap(), t.gap()[1:])
    # restart=True: every layer's piece starts from the network, so its first inner point is
    # one small ODE step away from the network state, not from the previous piece's end.
    n = 3
    for k in range(3):
        first = t.path[k * n + 1]
        assert (first - t.layer_states()[k]).norm() < (first - t.layer_states()[k + 1]).norm()
    with pytest.raises(ValueError, match="layer boundary"):
        t.since(3)
    ax = plot_trajectories(late)
    assert "layers 2\u20133 of 3" in ax.get_title()
    import matplotlib.pyplot as plt
    plt.close(ax.figure)


def test_labels_of_a_tokenizer_escape_control_characters():
    """Round five's pass: a translation checkpoint's target labels kept control bytes, and
    matplotlib warned of missing glyphs; every label is printable, as byte labels are."""
    from splitnet.analyses.trajectories import token_labels

    class Tok:
        def decode(self, ids):
            return {1: "a\x07", 2: " b", 3: "\x1b", 4: "\u2028"}[ids[0]]

    labels = token_labels([1, 2, 3, 4], Tok())
    assert labels == ("a\\x07", "␣b", "\\x1b", "\\u2028")
    assert all(s.isprintable() for s in labels)
