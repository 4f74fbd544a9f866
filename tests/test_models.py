"""SplitTransformer: parameter matching, gates on exactly the listed layers, states, config."""

import pytest
import torch

import splitnet as sn
from splitnet.fields import Attention, FeedForward, Gated
from splitnet.nets.models import SplitTransformer

V, D, H = 50, 32, 4


def _m(scheme="lie-trotter", n_layers=2, **kw):
    torch.manual_seed(0)
    return SplitTransformer(V, D, H, n_layers, scheme=scheme, **kw)


def test_shared_parameters_identical_across_schemes():
    counts = {s: _m(s).n_params() for s in sn.schemes.available() + ["sssfsfsfff"]}
    assert len(set(counts.values())) == 1, counts


def test_per_stage_strang_matches_lie_trotter_within_one_percent():
    lt = _m("lie-trotter", weights="per-stage").n_params(embeddings=False)
    st = _m("strang", weights="per-stage").n_params(embeddings=False)
    assert lt != st                      # two FFNs carry one more LayerNorm and bias each
    assert abs(st - lt) / lt < 0.01
    # and the Macaron FFNs are half width
    assert [f.fc1.out_features for f in _m("strang", weights="per-stage").layers[0].convection] \
        == [2 * D, 2 * D]


@pytest.mark.parametrize("pattern,interleaved", [("sssfsfsfff", "sfsfsfsfsf"),
                                                 ("ssffsf", "sfsfsf")])
def test_sandwich_pattern_parameters_equal_interleaved(pattern, interleaved):
    a = _m(pattern, n_layers=1, weights="per-stage").n_params()
    b = _m(interleaved, n_layers=1, weights="per-stage").n_params()
    assert a == b


def test_per_stage_module_counts_follow_scheme():
    m = _m("yoshida4", weights="per-stage", n_layers=1)
    lay = m.layers[0]
    assert len(lay.diffusion) == 3 and len(lay.convection) == 6
    # FFN width scaled by diffusion stages / convection stages = 3 / 6
    assert {f.fc1.out_features for f in lay.convection} == {2 * D}


def test_gates_exactly_the_listed_layers():
    m = _m("lie-trotter", n_layers=6, gate="sigmoid", gate_layers=[3, 4, 5])
    gated = [k for k, lay in enumerate(m.layers)
             if isinstance(lay.diffusion, Gated) and isinstance(lay.convection, Gated)]
    plain = [k for k, lay in enumerate(m.layers)
             if isinstance(lay.diffusion, Attention) and isinstance(lay.convection, FeedForward)]
    assert gated == [3, 4, 5] and plain == [0, 1, 2]
    assert m.gate_layers == (3, 4, 5)


@pytest.mark.parametrize("fields", ["diffusion", "convection"])
def test_gate_one_field_only(fields):
    m = _m("strang", n_layers=3, weights="per-stage", gate="tanh", gate_layers=[1],
           gate_fields=fields)
    for k, lay in enumerate(m.layers):
        for name in ("diffusion", "convection"):
            want = k == 1 and name == fields
            assert all(isinstance(g, Gated) == want for g in getattr(lay, name))
    assert SplitTransformer.from_config(m.config).gate_fields == fields
    with pytest.raises(ValueError, match="gate_fields"):
        _m(gate="tanh", gate_fields="attention")


def test_gates_change_only_listed_layers_outputs():
    # Same seed, same fields; a gate whose value path is zero is no gate at all. The gated model
    # then equals the ungated one, and un-zeroing one layer's gate changes the output.
    torch.manual_seed(0)
    plain = SplitTransformer(V, D, H, 6, gate=None).double()
    gated = SplitTransformer(V, D, H, 6, gate="tanh", gate_layers=[3, 4, 5]).double()
    sd = plain.state_dict()
    with torch.no_grad():
        for k, lay in enumerate(gated.layers):
            for name in ("diffusion", "convection"):
                g = getattr(lay, name)
                if isinstance(g, Gated):
                    g.field.load_state_dict({n[len(f"layers.{k}.{name}."):]: v
                                             for n, v in sd.items()
                                             if n.startswith(f"layers.{k}.{name}.")})
                    g.sdu.w2.weight.zero_(), g.sdu.w2.bias.zero_()
                else:
                    g.load_state_dict({n[len(f"layers.{k}.{name}."):]: v for n, v in sd.items()
                                       if n.startswith(f"layers.{k}.{name}.")})
        for n in ("tok_emb.weight", "pos_emb.weight", "norm.weight", "norm.bias"):
            gated.state_dict()[n].copy_(sd[n])
    idx = torch.randint(0, V, (2, 7))
    with torch.no_grad():
        assert torch.allclose(gated(idx), plain(idx), atol=1e-12)
        gated.layers[4].convection.sdu.w2.bias.fill_(0.3)
        assert not torch.allclose(gated(idx), plain(idx), atol=1e-6)


def test_gate_argument_errors():
    with pytest.raises(ValueError, match="gate_layers"):
        _m(n_layers=6, gate="sigmoid", gate_layers=[6])
    with pytest.raises(ValueError, match="without gate"):
        _m(n_layers=6, gate_layers=[1])
    with pytest.raises(ValueError, match="gate must be"):
        _m(gate="relu")


@pytest.mark.parametrize("scheme", ["lie-trotter", "strang", "yoshida4", "sffs"])
def test_return_states_shape_and_last_state(scheme):
    m = _m(scheme, n_layers=3).double().eval()
    idx = torch.randint(0, V, (2, 5))
    logits, states = m(idx, return_states=True)
    n = 1 + 3 * len(m.scheme.stages)
    assert states.shape == (n, 2, 5, D)
    assert m.state_times().shape == (n,)
    assert torch.equal(logits, m(idx))
    assert torch.allclose(m.head(m.norm(states[-1])), logits, atol=1e-12)
    assert torch.equal(states[0], m.embed(idx))
    assert m.state_times()[-1].item() == pytest.approx(3 * m.step_size)


def test_config_round_trip_including_scheme_object():
    sch = sn.SplittingScheme.from_stages([("convection", 0.25), ("diffusion", 1.0),
                                          ("convection", 0.75)], name="lopsided")
    for scheme in ("strang", sch, "ssff"):
        m = _m(scheme, weights="per-stage", gate="sigmoid", gate_layers=[1], step_size=0.5)
        m2 = SplitTransformer.from_config(m.config)
        m2.load_state_dict(m.state_dict())
        idx = torch.randint(0, V, (1, 6))
        assert torch.equal(m.eval()(idx), m2.eval()(idx))
        assert m2.scheme == m.scheme


def test_bad_inputs():
    with pytest.raises(ValueError, match="weights"):
        _m(weights="tied")
    with pytest.raises(ValueError, match="unknown scheme"):
        _m("nope")
    with pytest.raises(ValueError, match="step_size"):
        _m(step_size=0.0)
    with pytest.raises(ValueError, match="n_heads"):
        SplitTransformer(V, 30, 4, 1)
    m = _m()
    with pytest.raises(TypeError, match="int64"):
        m(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="max_len"):
        m(torch.zeros(1, 2000, dtype=torch.long))


def test_trains_one_step_reduces_loss_on_repeated_batch():
    m = _m("strang", weights="per-stage")
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    idx = torch.randint(0, V, (4, 12))
    losses = []
    for _ in range(20):
        logits = m(idx[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), idx[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]
