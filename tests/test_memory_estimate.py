"""The trainer's memory estimate (splitnet.training.setup.estimate_memory) against what a GPU
measured, and the autocast context of each precision."""

import contextlib

import pytest
import torch

from splitnet.configs.config import SplitConfig
from splitnet.nets.cost import count_params
from splitnet.training.config import TrainConfig
from splitnet.training.setup import autocast, estimate_memory

GIB = 2 ** 30


def _cfg(scheme="strang", n_layers=12, **kw):
    model = SplitConfig(d_model=768, n_heads=12, n_layers=n_layers, max_len=1024, scheme=scheme,
                        reversible=kw.pop("reversible", False))
    kw.setdefault("batch_size", 8)
    return TrainConfig(model=model, context=1024, **kw)


def _per_layer(cfg, device):
    """Bytes per token and layer: the difference of two depths, weights taken out."""
    deep = _cfg(cfg.model.scheme, 2 * cfg.model.n_layers)
    w = 16.0 * (count_params(deep.model)[0] - count_params(cfg.model)[0])
    return (estimate_memory(deep, device=device) - estimate_memory(cfg, device=device)
            - w) / (cfg.batch_size * cfg.context * cfg.model.n_layers)


def test_activation_bytes_match_the_h200_measurement():
    """benchmarks/gpu_reversible.py on an H200 (2026-11-26, bf16 autocast, eager, Strang,
    d_model 768, batch 8 x 1024): the plain network's peak grew 2.13 GiB per 6 layers, 46.4 KB
    per token and layer. The estimate's 42.2 KB is within 15 % of it; the former rule (float32
    floats, the attention matrix charged even under flash attention) said 240 KB."""
    kb = _per_layer(_cfg(), "cuda") / 1e3
    assert kb == pytest.approx(42.24, abs=0.01)
    assert abs(kb - 46.4) / 46.4 < 0.15


def test_float32_on_the_cpu_doubles_and_charges_the_attention_matrix():
    cuda, cpu = _per_layer(_cfg(), "cuda"), _per_layer(_cfg(), "cpu")
    probs = 5 * 2 * 12 * 1024                       # 5 bytes x 2 (float32) x heads x context
    assert cpu == pytest.approx(2 * cuda + probs)


def test_a_reversible_network_is_flat_in_depth():
    """The same measurement: 5.53 GiB at 6, 12, 24 and 48 layers."""
    est = [estimate_memory(_cfg(n_layers=n, reversible=True), device="cuda") for n in (6, 48)]
    plain = [estimate_memory(_cfg(n_layers=n), device="cuda") for n in (6, 48)]
    w = [16.0 * count_params(_cfg(n_layers=n).model)[0] for n in (6, 48)]
    assert est[1] - w[1] == pytest.approx(est[0] - w[0])
    assert plain[1] - w[1] > 5 * (plain[0] - w[0]) / 2


def test_a_chunked_loss_keeps_one_chunk_of_logits():
    full = estimate_memory(_cfg(), device="cuda")
    chunked = estimate_memory(_cfg(loss="chunked", loss_chunk=1024), device="cuda")
    assert full - chunked == pytest.approx((8192 - 1024) * 256 * (2 + 8))


def test_yoshida4_at_gpt2_small_size_is_not_refused_on_an_h200():
    """The H200 run that found the old rule: 132.9 GiB said for what ran in far less."""
    assert estimate_memory(_cfg("yoshida4", batch_size=16), device="cuda") < 40 * GIB


@pytest.mark.filterwarnings("ignore:CUDA is not available")
@pytest.mark.parametrize("param_dtype,amp,on", [("float32", True, True),
                                                ("float32", False, False),
                                                ("bfloat16", True, False)])
def test_autocast_only_for_float32_weights_on_cuda(param_dtype, amp, on):
    cfg = _cfg(param_dtype=param_dtype, amp=amp)
    ctx = autocast(cfg, torch.device("cuda"))
    assert isinstance(ctx, torch.autocast) is on
    assert isinstance(autocast(cfg, torch.device("cpu")), contextlib.nullcontext)


def _seq2seq(**kw):
    from splitnet.configs.seq2seq import Seq2SeqConfig

    model = Seq2SeqConfig(d_model=512, n_heads=8, n_encoder_layers=6, n_decoder_layers=6)
    return TrainConfig(task="translate", model=model, batch_size=256, context=128, **kw)


def test_a_translation_step_on_cuda_keeps_16_bit_floats_and_no_scores():
    """The seed-scale run (benchmarks/gpu_seed_scale.py): 75.9 GiB per process said on the
    CPU rule, so six runs could not share one H200 although their batches are short."""
    cfg = _seq2seq()
    cpu, cuda = estimate_memory(cfg, device="cpu"), estimate_memory(cfg, device="cuda")
    m = cfg.model
    weights = 16.0 * (12 * (8 * 512 ** 2 + 2 * 512 * m.d_ff) + 2 * m.tgt_vocab * 512)
    scores = 4.0 * 2 * 256 * 128 * 12 * 2 * 8 * 128
    assert cpu - weights == pytest.approx(2 * (cuda - weights) + scores)
    assert estimate_memory(_seq2seq(amp=False), device="cuda") == cpu
    assert cuda < 40 * GIB < cpu
