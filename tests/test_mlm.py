"""Masked language models (splitnet train --task mlm, splitnet.mlm): BERT's masking on bytes,
the bidirectional network against torch.nn.TransformerEncoder, the trainer's guarantees."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from splitnet.configs.config import SplitConfig
from splitnet.mlm import IGNORE, MASK_ID, MLM_VOCAB, mask_tokens
from splitnet.mlm import masking as M
from splitnet.nets.models import SplitTransformer
from splitnet.nets.reference import load_into_torch_encoder
from splitnet.runs import checkpoint as ck
from splitnet.training.config import TrainConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import parity_mlm


def _bytes(n_rows=100, T=1000, seed=0):
    return torch.randint(0, 256, (n_rows, T), generator=torch.Generator().manual_seed(seed))


def test_masking_statistics_on_1e5_bytes():
    """15 % chosen, exactly 150 of each row of 1000, uniformly over the positions; of those
    80 % the mask token, 10 % a random byte, 10 % kept (binomial standard errors on 15,000
    chosen bytes: under 0.4 points)."""
    x = _bytes()
    inp, lab = mask_tokens(x, torch.Generator().manual_seed(1))
    chosen = lab != IGNORE
    n = chosen.sum().item()
    assert (chosen.sum(1) == 150).all() and n == 15_000
    per_tenth = chosen.reshape(100, 10, 100).sum((0, 2)).float() / n    # position uniform
    assert (per_tenth - 0.1).abs().max() < 0.01
    masked = (inp == MASK_ID) & chosen
    kept = (inp == x) & chosen            # kept, or a random byte that drew its own value
    swapped = chosen & ~masked & ~kept
    assert abs(masked.sum().item() / n - 0.8) < 0.01
    assert abs(swapped.sum().item() / n - 0.1 * 255 / 256) < 0.01
    assert abs(kept.sum().item() / n - (0.1 + 0.1 / 256)) < 0.01
    assert torch.equal(lab[chosen], x[chosen])
    assert torch.equal(inp[~chosen], x[~chosen])      # nothing else touched
    assert inp.max() <= MASK_ID and MLM_VOCAB == MASK_ID + 1


def test_no_leakage_the_hidden_bytes_never_reach_the_input():
    """Change the bytes behind the mask tokens: the inputs stay the same bit for bit, the
    labels follow the change (the network cannot read what it must restore)."""
    x = _bytes(8, 256)
    inp, lab = mask_tokens(x, torch.Generator().manual_seed(3))
    hidden = inp == MASK_ID
    y = x.clone()
    y[hidden] = (y[hidden] + 1) % 256
    inp2, lab2 = mask_tokens(y, torch.Generator().manual_seed(3))
    assert torch.equal(inp, inp2)
    assert not torch.equal(lab, lab2) and torch.equal(lab2[hidden], y[hidden])


def test_every_row_has_a_target():
    """A window of 4 bytes still has one (round(0.6) = 1; at least 1 for any length), so no
    batch is without a target and a NaN loss."""
    for T in (1, 2, 4, 10):
        _, lab = mask_tokens(_bytes(50, T), torch.Generator().manual_seed(0))
        assert ((lab != IGNORE).sum(1) == max(1, round(0.15 * T))).all()


def test_the_global_batch_is_the_same_at_any_world_size():
    from splitnet.runs import data as D
    corpus = D.Corpus.__new__(D.Corpus)
    corpus.train = _bytes(1, 5000)[0].numpy().astype("uint8")
    one = M.train_batch(corpus, 7, 8, 32, seed=0)
    two = [M.train_batch(corpus, 7, 8, 32, seed=0, rank=r, world=2) for r in range(2)]
    for k in range(2):
        assert torch.equal(one[k], torch.cat([two[0][k], two[1][k]]))


def _reference(ours):
    c = ours.config
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # nested tensors off with norm_first
        layer = torch.nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.d_ff, dropout=0.0,
                                                 activation="gelu", norm_first=True,
                                                 batch_first=True)
        enc = torch.nn.TransformerEncoder(layer, c.n_layers, norm=torch.nn.LayerNorm(c.d_model),
                                          enable_nested_tensor=False)
    return enc.to(next(ours.parameters()).dtype)


@pytest.mark.parametrize("weights", ["shared", "per-stage"])
def test_lie_trotter_encoder_equals_torch_transformer_encoder_in_float64(weights):
    torch.manual_seed(0)
    ours = SplitTransformer(MLM_VOCAB, 32, 4, 3, scheme="lie-trotter", weights=weights,
                            max_len=24, causal=False).double().eval()
    enc = _reference(ours)
    load_into_torch_encoder(enc, ours)
    enc.eval()
    idx, _ = mask_tokens(_bytes(3, 24), torch.Generator().manual_seed(5))
    with torch.no_grad():
        mine = ours(idx)
        theirs = ours.head(enc(ours.embed(idx)))
    assert mine.dtype == torch.float64
    assert (mine - theirs).abs().max().item() < 1e-12
    causal = SplitTransformer(MLM_VOCAB, 32, 4, 3, scheme="lie-trotter", weights=weights,
                              max_len=24).double().eval()
    causal.load_state_dict(ours.state_dict())
    with torch.no_grad():                     # the same weights, causal: not the encoder
        assert (causal(idx) - theirs).abs().max().item() > 1e-3


def test_the_key_bias_gradient_is_round_off():
    """Why DDP's check leaves the key bias out: softmax(q.k + q.b) = softmax(q.k) over a
    query's keys, so the loss's gradient in the key bias vanishes; float64 shows 1e-16 of the
    query bias's."""
    torch.manual_seed(0)
    m = SplitTransformer(MLM_VOCAB, 32, 4, 2, max_len=24, causal=False).double()
    x, y = mask_tokens(_bytes(4, 24), torch.Generator().manual_seed(2))
    F.cross_entropy(m(x).reshape(-1, MLM_VOCAB), y.reshape(-1)).backward()
    g = m.layers[0].diffusion.qkv.bias.grad
    assert g[32:64].abs().max() < 1e-14 * g[:32].abs().max()
    assert g[:32].abs().max() > 1e-6 and g[64:].abs().max() > 1e-6


def test_the_config_makes_a_bidirectional_network_over_bytes_and_the_mask():
    cfg = TrainConfig(task="mlm", model=SplitConfig(d_model=16, n_heads=2, n_layers=1),
                      context=16)
    assert cfg.model.vocab_size == MLM_VOCAB and cfg.model.causal is False
    with pytest.raises(ValueError, match="--task mlm does not take --loss chunked"):
        TrainConfig(task="mlm", loss="chunked")
    with pytest.raises(ValueError, match=r"--pairs: encoder–decoder option .*masked language"):
        TrainConfig(task="mlm", pairs="copy")


def _train(out, steps, *extra):
    cmd = [sys.executable, "-m", "splitnet", "train", "--task", "mlm", "--d-model", "32",
           "--n-heads", "4", "--n-layers", "2", "--context", "32", "--batch-size", "8",
           "--eval-every", "10", "--eval-windows", "64", "--threads", "1", "--no-plot",
           "--no-progress", "--steps", str(steps), "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.mark.heavy
def test_resume_is_bit_exact(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert _train(a, 20).returncode == 0
    r = _train(b, 10)
    assert r.returncode == 0, r.stderr
    r = _train(b, 20, "--resume")
    assert r.returncode == 0, r.stderr
    sa, sb = ck.load(a), ck.load(b)
    for k, v in sa["model"].items():
        assert torch.equal(v, sb["model"][k]), k
    ra = [json.loads(x) for x in (a / ck.METRICS).read_text().splitlines()]
    rb = [json.loads(x) for x in (b / ck.METRICS).read_text().splitlines()]
    assert [x["loss"] for x in ra] == [x["loss"] for x in rb]
    assert ra[-1]["val_acc"] == rb[-1]["val_acc"] and "val_acc" in ra[9]
    assert sa["model_config"]["causal"] is False and sa["train_config"]["task"] == "mlm"


@pytest.mark.heavy
def test_a_short_run_reads_its_context(tmp_path):
    """After 300 steps the held-out masked bytes cost clearly less than their unigram
    cross-entropy (what a network blind to its context reaches) and more are restored than by
    always guessing the commonest byte (a space)."""
    out = tmp_path / "run"
    r = _train(out, 300, "--lr", "3e-3", "--d-model", "64", "--context", "64",
               "--batch-size", "32", "--eval-every", "100")
    assert r.returncode == 0, r.stderr
    last = [json.loads(x) for x in (out / ck.METRICS).read_text().splitlines()][-1]
    from splitnet.runs import data as D
    corpus = D.load_corpus(None, 0.05)
    _, lab = M.masked_windows(corpus, D.val_starts(corpus, 64, 64), 64, 0)
    majority = torch.bincount(lab[lab != IGNORE]).max().item() / (lab != IGNORE).sum().item()
    unigram = parity_mlm.unigram(corpus, lab)
    assert last["val_loss"] < unigram - 0.3, (last["val_loss"], unigram)
    assert last["val_acc"] > majority + 0.02, (last["val_acc"], majority)


@pytest.mark.heavy
def test_trains_as_fast_as_torch_transformer_encoder():
    """benchmarks/parity_mlm.py: each from its own default initialisation (ours: xavier, the
    masked LM's default), the same masked batches; the held-out masked loss after 300 steps
    within 2 % of the reference's (measured: 2.814 against 2.781), both far below unigram."""
    a = parity_mlm.parser().parse_args(["--steps", "300", "--eval-every", "300"])
    r = parity_mlm.run(a)
    ours, ref = r["curves"]["ours"][-1][1], r["curves"]["reference"][-1][1]
    assert abs(ours - ref) / ref < 0.02, (ours, ref)
    assert ref < r["unigram"] - 0.3


@pytest.mark.heavy
def test_bad_options_are_one_line(tmp_path):
    r = _train(tmp_path / "x", 5, "--loss", "chunked")
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--loss chunked" in r.stderr


@pytest.mark.heavy
def test_other_commands_on_a_masked_lm_checkpoint(tmp_path):
    """sample refuses it in one line; refine's source scores the trainer's own held-out masked
    bytes (its loss equals the last val_loss); trajectories draw it."""
    from splitnet.analyses.sources import checkpoint_source

    out = tmp_path / "run"
    assert _train(out, 10).returncode == 0
    r = subprocess.run([sys.executable, "-m", "splitnet", "sample", "--checkpoint", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "masked language model" in r.stderr
    assert r.stderr.strip().count("\n") == 0
    model, evaluate, _ = checkpoint_source(out, windows=64)
    last = [json.loads(x) for x in (out / ck.METRICS).read_text().splitlines()][-1]
    assert evaluate(model) == pytest.approx(last["val_loss"], rel=1e-6)   # float32 sums
    r = subprocess.run([sys.executable, "-m", "splitnet", "trajectories", "--checkpoint",
                        str(out), "--out", str(tmp_path / "t.png")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
