"""``torch.compile(fullgraph=True)`` traces every scheme's network without a graph break.

The default run checks the trace (dynamo with a recording backend: a graph break raises under
``fullgraph=True``, and the one graph must hold every stage) for four schemes (the rest of the
core, ``ruth3`` and ``sofroniou-spaletta10`` with 105 stages a layer under ``-m slow``); the slow
run also compiles these (all but the 105-stage one) and a pattern with inductor, runs forward and
backward and compares with eager (about 30-70 s per scheme on 2 CPU cores, hence ``-m slow``).
"""

import pytest
import torch

import splitnet as sn
from splitnet.models import SplitTransformer
from splitnet.reference import RefGPT

# The core seven, a non-symmetric zoo method and the longest one (105 stages a step): zoo
# entries are data that take the same code path. Inductor compiles the longest in ~9 min per
# weights mode (2 cores), so it is traced (7 s) but not compiled.
SCHEMES = sn.schemes.available("core") + ["ruth3", "sofroniou-spaletta10", "sssfsfff"]
COMPILED = [s for s in SCHEMES if s != "sofroniou-spaletta10"]
QUICK = ["lie-trotter", "strang", "yoshida4", "sssfsfff"]


def _model(scheme, weights):
    torch.manual_seed(0)
    return SplitTransformer(17, 16, 2, 2, scheme=scheme, weights=weights, gate="sigmoid",
                            gate_layers=[1], max_len=8)


def _idx():
    return torch.randint(0, 17, (2, 6), generator=torch.Generator().manual_seed(0))


def _recording_backend():
    """A dynamo backend that keeps every graph it is given and runs it as traced."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return backend, graphs


@pytest.mark.parametrize("scheme", [
    s if s in QUICK else pytest.param(s, marks=pytest.mark.slow) for s in SCHEMES])
def test_fullgraph_trace_every_scheme(scheme):
    """One graph holds the whole network: every stage's attention call is in it (a graph break
    would raise under fullgraph=True, a stage left out of the trace would lower the count)."""
    torch._dynamo.reset()
    m = _model(scheme, "per-stage" if scheme in ("strang", "yoshida4") else "shared")
    backend, graphs = _recording_backend()
    cm = torch.compile(m, fullgraph=True, backend=backend)
    out, states = cm(_idx(), return_states=True)
    assert len(graphs) == 1
    sdpa = [n for n in graphs[0].graph.nodes
            if n.op == "call_function" and "scaled_dot_product_attention" in str(n.target)]
    assert len(sdpa) == m.n_layers * m.scheme.n_stages("diffusion")
    ref, ref_states = m(_idx(), return_states=True)
    assert torch.allclose(out, ref, atol=1e-6)
    assert torch.allclose(states, ref_states, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("scheme", COMPILED)
@pytest.mark.parametrize("weights", ["shared", "per-stage"])
def test_inductor_forward_backward_every_scheme(scheme, weights):
    torch._dynamo.reset()
    m = _model(scheme, weights)
    cm = torch.compile(m, fullgraph=True)
    out = cm(_idx())
    out.square().mean().backward()
    g = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    ref = m(_idx())
    ref.square().mean().backward()
    assert torch.allclose(out, ref, atol=1e-5)
    for a, p in zip(g, m.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-5)


def _bench(*argv):
    """Run benchmarks/bench_layers.py as a user does."""
    import pathlib
    import subprocess
    import sys

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "bench_layers.py"
    r = subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True,
                       timeout=600, check=False, env={**__import__("os").environ,
                                                      "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    return r


TINY = ["--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--seq-len", "8", "--batch",
        "2", "--pairs", "1", "--reps", "1", "--warmup", "1", "--scheme-reps", "1"]


@pytest.mark.parametrize("dtype", ["bfloat16", pytest.param("float32", marks=pytest.mark.slow)])
def test_bench_layers_runs_and_reference_matches_size(dtype, tmp_path):
    import json

    out = tmp_path / "b.json"
    _bench(*TINY, "--dtype", dtype, "--schemes", "strang", "--json", str(out))
    r = json.loads(out.read_text())
    assert r["dtype"] == dtype and r["ratio"] > 0 and len(r["ours_all_ms"]) == 1
    assert [(s["scheme"], s["weights"]) for s in r["schemes"]] == [("strang", "shared"),
                                                                  ("strang", "per-stage")]
    assert r["schemes"][0]["evals"] == 3


@pytest.mark.slow
def test_bench_layers_compiled_bf16(tmp_path):
    _bench(*TINY, "--dtype", "bfloat16", "--compile", "--schemes", "none")


def test_reference_gpt_equals_lie_trotter_with_copied_weights():
    # The benchmark's reference is the same function as our model, so the timing compares like
    # with like: copy our weights into it and compare logits in float64.
    torch.manual_seed(0)
    ours = SplitTransformer(17, 16, 2, 2, max_len=8).double()
    ref = RefGPT(17, 16, 2, 2, 8).double()
    with torch.no_grad():
        ref.wte.weight.copy_(ours.tok_emb.weight), ref.wpe.weight.copy_(ours.pos_emb.weight)
        ref.ln_f.load_state_dict(ours.norm.state_dict())
        for blk, lay in zip(ref.h, ours.layers):
            a, f = lay.diffusion, lay.convection
            blk.ln_1.load_state_dict(a.norm.state_dict())
            blk.attn.c_attn.load_state_dict(a.qkv.state_dict())
            blk.attn.c_proj.load_state_dict(a.proj.state_dict())
            blk.ln_2.load_state_dict(f.norm.state_dict())
            blk.mlp.c_fc.load_state_dict(f.fc1.state_dict())
            blk.mlp.c_proj.load_state_dict(f.fc2.state_dict())
    idx = _idx()
    assert sum(p.numel() for p in ref.parameters()) == ours.n_params()
    assert torch.allclose(ref(idx), ours(idx), atol=1e-12)
