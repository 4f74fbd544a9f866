"""``torch.compile(fullgraph=True)`` traces every scheme's network without a graph break.

The default run checks the trace (dynamo with a recording backend: a graph break raises under
``fullgraph=True``, and the one graph must hold every stage) for four schemes (the rest of the
core, ``ruth3`` and ``sofroniou-spaletta10`` with 105 stages a layer under ``-m slow``); the slow
run also compiles these (all but the 105-stage one) and a pattern with inductor, runs forward and
backward and compares with eager (about 30-70 s per scheme on 2 CPU cores, hence ``-m slow``).

The trainer's compiled step (``splitnet.training.setup.wrap_model``) is checked the same way: with
``--compile`` one full graph holds network and loss; with ``--compile-scope regional`` one graph
per kind of field module plus one for head and loss; and (``-m slow``, inductor, fresh processes,
cold caches) Yoshida4's regional compile costs at most twice Lie–Trotter's.
"""

import pytest
import torch

import splitnet as sn
from splitnet.nets.models import SplitTransformer
from splitnet.nets.reference import RefGPT, load_into_gpt

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


@pytest.mark.heavy
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
    load_into_gpt(ref, ours)
    idx = _idx()
    assert sum(p.numel() for p in ref.parameters()) == ours.n_params()
    assert torch.allclose(ref(idx), ours(idx), atol=1e-12)


# ---------------------------------------------------------------------------------------------
# the trainer's compiled step (splitnet.training.setup.wrap_model) and regional compilation


def _trainer_step(monkeypatch, scope, scheme="strang", weights="per-stage", loss="plain"):
    """The trainer's (fwd, step_fn) for a tiny model, every torch.compile recording its graphs
    (and the options it was given) instead of running inductor."""
    from splitnet import train as T
    from splitnet.configs.config import SplitConfig
    from splitnet.runenv import run_env
    from splitnet.training.config import TrainConfig
    from splitnet.training.setup import wrap_model

    torch._dynamo.reset()
    backend, graphs = _recording_backend()
    real, options = torch.compile, []

    def recording_compile(fn, **kw):
        options.append(kw)
        return real(fn, **{**kw, "backend": backend})

    monkeypatch.setattr(torch, "compile", recording_compile)
    cfg = TrainConfig(model=SplitConfig(d_model=16, n_heads=2, n_layers=2, scheme=scheme,
                                        weights=weights), context=8, compile=True,
                      compile_scope=scope, loss=loss, loss_chunk=5)
    torch.manual_seed(0)
    model = SplitTransformer.from_config(cfg.model)
    fwd, step_fn = wrap_model(model, T.build_optimizer(model, cfg), cfg, run_env("cpu"))
    x, y = torch.randint(0, 256, (2, 8)), torch.randint(0, 256, (2, 8))
    loss = step_fn(fwd, x, y)
    from splitnet.tasks.losses import plain_cross_entropy

    assert torch.allclose(loss, plain_cross_entropy(model(x), y), atol=1e-5)
    return model, graphs, options


def _calls(graph, name):
    """Calls of ``name`` in a traced graph and its sub-graphs (an autograd.Function's body)."""
    return [n for gm in graph.modules() if isinstance(gm, torch.fx.GraphModule)
            for n in gm.graph.nodes if n.op == "call_function" and name in str(n.target)]


@pytest.mark.parametrize("loss", ["plain", "chunked"])
def test_trainer_compiles_network_and_loss_as_one_full_graph(monkeypatch, loss):
    """--compile: one graph holds every stage of the network and the cross-entropy (so the
    float32 upcast of the logits fuses in), traced with fullgraph=True (a graph break raises)."""
    model, graphs, options = _trainer_step(monkeypatch, "model+loss", loss=loss)
    assert len(options) == 1 and options[0]["fullgraph"] is True
    assert len(graphs) == 1
    g = graphs[0]
    assert len(_calls(g, "scaled_dot_product_attention")) == model.n_layers * 1
    assert _calls(g, "cross_entropy") or _calls(g, "logsumexp")


def test_trainer_regional_compile_graphs(monkeypatch):
    """--compile-scope regional: one graph per kind of field module (here attention and the
    half-width feed-forward, shared by 2 layers x 3 stages) and one for head + loss."""
    _, graphs, options = _trainer_step(monkeypatch, "regional")
    assert len(graphs) == 3
    assert sum(len(_calls(g, "scaled_dot_product_attention")) for g in graphs) == 1
    assert sum(len(_calls(g, "cross_entropy")) for g in graphs) == 1
    assert all(o.get("dynamic") is False for o in options)


_COMPILE_TIME = """
import sys, time, torch
from splitnet import train as T
from splitnet.configs.config import SplitConfig
from splitnet.training.config import TrainConfig
from splitnet.nets.models import SplitTransformer
from splitnet.runenv import run_env
from splitnet.training.setup import wrap_model
torch.set_num_threads(1)
cfg = TrainConfig(model=SplitConfig(d_model=64, n_heads=4, n_layers=4, scheme=sys.argv[1]),
                  context=32, compile=True, compile_scope="regional")
model = SplitTransformer.from_config(cfg.model)
fwd, step_fn = wrap_model(model, T.build_optimizer(model, cfg), cfg, run_env("cpu"))
x = torch.randint(0, 256, (4, 32))
times = []
for _ in range(3):
    t0 = time.perf_counter()
    step_fn(fwd, x, x).backward()
    times.append(time.perf_counter() - t0)
print(times[0] - min(times[1:]))
"""


@pytest.mark.slow
def test_regional_compile_time_does_not_grow_with_stages(tmp_path):
    """Inductor, cold caches, each in a fresh process: compiling a Yoshida4 model (9 stages a
    layer) regionally costs at most 2x the Lie–Trotter model's (2 stages)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    secs = {}
    for scheme in ("lie-trotter", "yoshida4"):
        r = subprocess.run([sys.executable, "-c", _COMPILE_TIME, scheme], capture_output=True,
                           text=True, timeout=900, env=env, check=False)
        assert r.returncode == 0, r.stderr[-2000:]
        secs[scheme] = float(r.stdout.split()[-1])
    assert secs["yoshida4"] <= 2 * secs["lie-trotter"], secs
