"""A reversible encoder–decoder (issue 27): both stacks of SplitSeq2Seq on a partitioned state.
The stored-nothing backward equals ordinary autograd through both stacks (the memory's gradient
reaches the encoder) with padded sources and targets and with dropout; the layers are the
hand-written reversible blocks; the decoder's inverse reconstructs its input given the memory;
cached decoding equals uncached; the config refuses what cannot be reversible; the command line
trains and resumes one."""

import pytest
import torch
import torch.nn.functional as F

import splitnet as sn
from splitnet import checkpoint as ck
from splitnet.cli import main
from splitnet.reversible import plain_autograd

V, PAD, BOS, EOS = 23, 0, 1, 2
D = 16


def _model(enc="lie-trotter", dec="lie-trotter", n_layers=2, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    kw.setdefault("max_len", 16)
    return sn.SplitSeq2Seq(V, V, D, 2, n_encoder_layers=n_layers, n_decoder_layers=n_layers,
                           encoder_scheme=enc, decoder_scheme=dec, reversible=True,
                           pad_id=PAD, bos_id=BOS, eos_id=EOS, **kw).to(dtype)


def _batch(b=3, s=7, t=6):
    """Sources with padding in two rows, targets with padding in one (ignored by the loss; the
    decoder's causal self-attention takes no target mask)."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(3, V, (b, s), generator=g)
    tgt = torch.randint(3, V, (b, t), generator=g)
    src[0, 4:] = PAD
    src[2, 6:] = PAD
    tgt[1, 3:] = PAD
    return src, tgt


def _grads(m, src, tgt, plain, seed=5):
    m.zero_grad()
    torch.manual_seed(seed)
    with plain_autograd(m) if plain else torch.enable_grad():
        logits = m(src, tgt)
        loss = F.cross_entropy(logits.flatten(0, 1).double(), tgt.flatten(), ignore_index=PAD)
        loss.backward()
    # a parameter left without a gradient counts as zero (and fails the comparison)
    return loss.detach(), {n: torch.zeros_like(p) if p.grad is None else p.grad.clone()
                           for n, p in m.named_parameters()}


F64, F32 = (torch.float64, 1e-9), (torch.float32, 5e-6)
SCHEMES = [("lie-trotter", "lie-trotter", "shared"), ("strang", "strang", "per-stage"),
           ("yoshida4", "c:0.5,d:1,x:1,c:0.5", "per-stage")]   # the last: Macaron decoder


@pytest.mark.parametrize("enc,dec,weights,dtype,tol,dropout", [
    *((*s, *F64, p) for s in SCHEMES for p in (0.0, 0.2)), (*SCHEMES[1], *F32, 0.2)])
def test_gradients_equal_ordinary_autograd(enc, dec, weights, dtype, tol, dropout):
    m = _model(enc, dec, weights=weights, dtype=dtype, dropout=dropout)
    src, tgt = _batch()
    la, ga = _grads(m, src, tgt, plain=False)
    lb, gb = _grads(m, src, tgt, plain=True)
    assert torch.allclose(la, lb, rtol=tol, atol=0)
    assert set(ga) == set(gb)
    for part in ("encoder_layers.", "decoder_layers.", "src_emb.", "src_pos.", "tgt_pos."):
        names = [n for n in gb if n.startswith(part)]
        assert names, part
        # the encoder's gradient arrives through the decoder's memory: it must not vanish
        assert sum(float(gb[n].abs().sum()) for n in names) > 0, part
    for n in gb:
        scale = gb[n].abs().max().clamp_min(1e-30)
        assert (ga[n] - gb[n]).abs().max() / scale < tol, n
    if dropout:                     # the RNG matters: another seed gives other gradients
        _, gc = _grads(m, src, tgt, plain=True, seed=8)
        assert max(float((ga[n] - gc[n]).abs().max()) for n in gb) > 1e-4


def _saved_bytes(n_layers, reversible):
    torch.manual_seed(0)
    m = sn.SplitSeq2Seq(V, V, 32, 2, n_encoder_layers=n_layers, n_decoder_layers=n_layers,
                        encoder_scheme="strang", decoder_scheme="strang", reversible=reversible,
                        pad_id=PAD, bos_id=BOS, eos_id=EOS, max_len=16)
    src, tgt = _batch(4, 16, 16)
    return sn.reversible.saved_bytes(m, src, tgt)     # its count: tests/test_reversible.py


def test_bytes_saved_for_backward_are_flat_in_depth():
    """Training really takes the stored-nothing path in both stacks (the gradient test alone
    would pass on ordinary autograd)."""
    rev = [_saved_bytes(n, True) for n in (1, 6)]
    plain = [_saved_bytes(n, False) for n in (1, 6)]
    assert rev[1] <= 1.05 * rev[0], rev
    assert plain[1] > 3 * plain[0], plain


def _memory(m, src):
    with torch.no_grad():
        return m.encode(src)


def test_decoder_inverse_reconstructs_its_input_given_the_memory():
    m = _model("strang", "strang", n_layers=16)
    src, _ = _batch()
    memory, mask = _memory(m, src)
    assert mask is not None
    g = torch.Generator().manual_seed(3)
    x1, x2 = (torch.randn(3, 6, D, dtype=torch.float64, generator=g) for _ in range(2))
    h, ctx = m.config.step_size, {"memory": memory, "memory_mask": mask}
    with torch.no_grad():
        y1, y2 = x1, x2
        for k, layer in enumerate(m.decoder_layers):
            y1, y2 = layer(y1, y2, k * h, **ctx)
        assert (y1 - x1).abs().max() > 1.0          # the stack moved the pair
        z1, z2 = y1, y2
        for k in reversed(range(16)):
            z1, z2 = m.decoder_layers[k].inverse(z1, z2, k * h, **ctx)
        err = max(float((z1 - x1).abs().max()), float((z2 - x2).abs().max()))
        assert err / float(x1.abs().max()) < 1e-11, err
        # the memory is part of the step: inverting with another one does not reconstruct
        other = {"memory": memory.flip(0), "memory_mask": mask.flip(0)}
        w1, w2 = y1, y2
        for k in reversed(range(16)):
            w1, w2 = m.decoder_layers[k].inverse(w1, w2, k * h, **other)
        assert (w1 - x1).abs().max() > 1e-3


def _fields(layer):
    """The layer's modules per field (one per stage), and the stage list."""
    names = [st.field for st in layer.stages]
    return names, {f: iter(layer.field_modules(f)) for f in set(names)}


def test_lie_trotter_decoder_layer_is_the_hand_written_block():
    """Stages ``d x c``: self-attention writes x1 from x2, then cross-attention writes x1 from
    the same x2 and the memory, then the feed-forward writes x2 from the new x1::

        y1 = x1 + h SA(x2);  y1 = y1 + h CA(x2; m);  y2 = x2 + h FF(y1)"""
    m = _model(step_size=0.5)
    src, _ = _batch()
    memory, mask = _memory(m, src)
    layer = m.decoder_layers[1]
    names, mods = _fields(layer)
    assert names == ["diffusion", "cross", "convection"]
    sa, ca, ff = (next(mods[f]) for f in names)
    g = torch.Generator().manual_seed(4)
    x1, x2 = (torch.randn(3, 6, D, dtype=torch.float64, generator=g) for _ in range(2))
    h, t = 0.5, 0.5
    with torch.no_grad():
        y1 = x1 + h * sa(t, x2)
        y1 = y1 + h * ca(t, x2, memory=memory, memory_mask=mask)
        y2 = x2 + h * ff(t, y1)
        got = layer(x1, x2, t, memory=memory, memory_mask=mask)
    assert torch.allclose(got[0], y1, rtol=0, atol=1e-13)
    assert torch.allclose(got[1], y2, rtol=0, atol=1e-13)


def test_strang_decoder_and_lie_trotter_encoder_layers_are_the_hand_written_blocks():
    """Decoder Strang ``c/2 d/2 x d/2 c/2`` (per-stage: a module per stage); encoder
    Lie–Trotter ``d c`` with the source padding mask."""
    m = _model("lie-trotter", "strang", weights="per-stage")
    src, _ = _batch()
    memory, mask = _memory(m, src)
    g = torch.Generator().manual_seed(5)
    x1, x2 = (torch.randn(3, 6, D, dtype=torch.float64, generator=g) for _ in range(2))
    layer = m.decoder_layers[0]
    names, mods = _fields(layer)
    assert names == ["convection", "diffusion", "cross", "diffusion", "convection"]
    ff1, sa1, ca, sa2, ff2 = (next(mods[f]) for f in names)
    with torch.no_grad():
        a2 = x2 + 0.5 * ff1(0.0, x1)
        a1 = x1 + 0.5 * sa1(0.0, a2)
        a1 = a1 + ca(0.0, a2, memory=memory, memory_mask=mask)
        a1 = a1 + 0.5 * sa2(0.0, a2)
        a2 = a2 + 0.5 * ff2(0.0, a1)
        got = layer(x1, x2, 0.0, memory=memory, memory_mask=mask)
    assert torch.allclose(got[0], a1, rtol=0, atol=1e-13)
    assert torch.allclose(got[1], a2, rtol=0, atol=1e-13)
    enc = m.encoder_layers[1]
    names, mods = _fields(enc)
    assert names == ["diffusion", "convection"]
    sa, ff = (next(mods[f]) for f in names)
    e1, e2 = x1[:, :5], x2[:, :5]
    pad = src[:, :5].eq(PAD)
    assert bool(pad.any())
    with torch.no_grad():
        b1 = e1 + sa(1.0, e2, padding_mask=pad)
        b2 = e2 + ff(1.0, b1)
        got = enc(e1, e2, 1.0, padding_mask=pad)
    assert torch.allclose(got[0], b1, rtol=0, atol=1e-13)
    assert torch.allclose(got[1], b2, rtol=0, atol=1e-13)


@pytest.mark.parametrize("enc,dec,grid", [("lie-trotter", "lie-trotter", None),
                                          ("strang", "strang", None),
                                          ("strang", "strang", 12)])
@pytest.mark.parametrize("beam", [1, 3])
def test_generate_cached_equals_uncached(enc, dec, grid, beam):
    m = _model(enc, dec, dtype=torch.float32, reversible_grid=grid)
    src, _ = _batch()
    a = m.generate(src, 10, beam=beam, use_cache=True)
    b = m.generate(src, 10, beam=beam, use_cache=False)
    assert torch.equal(a, b)
    assert a.shape[1] > 1 and bool((a != PAD).any())


def test_a_padded_source_batch_is_each_sentence_alone():
    """The padding masks reach both stacks (the encoder's self-attention, the decoder's
    cross-attention): each row of a padded batch, run through the stored-nothing path, equals
    its sentence alone without padding."""
    m = _model("strang", "strang")
    src, tgt = _batch()
    logits = m(src, tgt)
    assert logits.requires_grad
    for i in range(src.shape[0]):
        n = int(src[i].ne(PAD).sum())
        alone = m(src[i:i + 1, :n], tgt[i:i + 1])
        assert torch.allclose(logits[i:i + 1], alone, rtol=0, atol=1e-12), i


def test_states_end_at_the_readout():
    m = _model("strang", "strang")
    src, tgt = _batch()
    memory, mask, enc_states = m.encode(src, return_states=True)
    assert enc_states.shape[0] == 1 + 2 * len(m.encoder_scheme.stages)
    assert torch.allclose(m.encoder_norm(enc_states[-1]), memory)
    logits, states = m.decode(tgt, memory, mask, return_states=True)
    assert states.shape[0] == 1 + 2 * len(m.decoder_scheme.stages)
    assert torch.allclose(m.head(m.decoder_norm(states[-1])), logits)
    assert torch.allclose(logits, m(src, tgt))


@pytest.mark.parametrize("kw,match", [
    ({"reversible_grid": 4}, "reversible_grid needs reversible=True"),
    ({"reversible": True, "encoder_scheme": "parallel"}, "encoder_scheme .*write both blocks"),
    ({"reversible": True, "decoder_scheme": "d+x+c:1"}, "decoder_scheme .*write both blocks"),
    ({"reversible": True, "method": "midpoint"}, "method='euler'"),
    ({"reversible": True, "reversible_grid": 0}, "reversible_grid"),
    ({"reversible": True, "reversible_grid": 21}, "reversible_grid"),
])
def test_bad_reversible_configs_are_one_line_errors(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        sn.models.Seq2SeqConfig(**kw)
    assert "\n" not in str(e.value)


def test_a_sum_stage_writing_one_block_is_a_shear():
    """``d+x``: self- and cross-attention both write x1 from x2, so their sum is a shear too:
    ``y1 = x1 + SA(x2) + CA(x2; m)``, ``y2 = x2 + FF(y1)``; the inverse reconstructs."""
    torch.manual_seed(0)
    m = sn.models.SplitSeq2Seq(259, 259, 16, 2, n_encoder_layers=1, n_decoder_layers=1,
                               decoder_scheme="d+x:1,c:1", reversible=True,
                               max_len=16).double()
    layer = m.decoder_layers[0]
    g = torch.Generator().manual_seed(1)
    x1, x2, mem = (torch.randn(2, 5, 16, dtype=torch.float64, generator=g) for _ in range(3))
    sa, ca, ff = (layer.field_modules(f)[0] for f in ("diffusion", "cross", "convection"))
    r1 = x1 + sa(0.0, x2) + ca(0.0, x2, memory=mem)
    r2 = x2 + ff(0.0, r1)
    y1, y2 = layer(x1, x2, memory=mem)
    assert torch.allclose(y1, r1, atol=1e-14) and torch.allclose(y2, r2, atol=1e-14)
    z1, z2 = layer.inverse(y1, y2, memory=mem)
    assert torch.allclose(z1, x1, atol=1e-13) and torch.allclose(z2, x2, atol=1e-13)
    src, tgt = (torch.randint(3, 259, (2, 6), generator=g) for _ in range(2))

    def grads(plain):
        m.zero_grad()
        with sn.reversible.plain_autograd(m) if plain else torch.enable_grad():
            m(src, tgt).logsumexp(-1).sum().backward()
        return [p.grad.clone() for p in m.parameters()]
    for a, b in zip(grads(False), grads(True)):        # the sum stage's modules get theirs
        assert b.abs().max() > 0 and (a - b).abs().max() <= 1e-9 * b.abs().max()


def test_config_round_trip_and_the_plain_networks_parameters():
    c = sn.models.Seq2SeqConfig(reversible=True, reversible_grid=10, d_model=16, n_heads=2)
    assert sn.models.Seq2SeqConfig.from_dict(c.to_dict()) == c
    a = _model("strang", "strang")
    torch.manual_seed(0)
    b = sn.SplitSeq2Seq(V, V, D, 2, n_encoder_layers=2, n_decoder_layers=2,
                        encoder_scheme="strang", decoder_scheme="strang", pad_id=PAD,
                        bos_id=BOS, eos_id=EOS, max_len=16)
    assert list(a.state_dict()) == list(b.state_dict())
    assert a.n_params() == b.n_params()


TINY = ["--task", "translate", "--pairs", "copy", "--d-model", "32", "--n-heads", "2",
        "--n-encoder-layers", "1", "--n-decoder-layers", "2", "--context", "24",
        "--batch-size", "8", "--warmup", "2", "--dropout", "0.1", "--threads", "1",
        "--no-progress", "--no-plot", "--bleu-sentences", "4", "--reversible"]


def test_train_translate_reversible_and_resume(tmp_path):
    """``splitnet train --task translate --reversible``: 3 steps straight equal 2 steps, stopped,
    then resumed to 3 (dropout on: the stack's random numbers come back with the checkpoint)."""
    pytest.importorskip("sacrebleu")
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["train", "--out", str(a), *TINY, "--steps", "3", "--eval-every", "3"]) == 0
    assert main(["train", "--out", str(b), *TINY, "--steps", "3", "--eval-every", "3",
                 "--ckpt-every", "2", "--stop-at", "2"]) == 0
    assert ck.load(b)["step"] == 2
    assert main(["train", "--resume", "--out", str(b), "--no-progress", "--threads", "1"]) == 0
    sa, sb = ck.load(a), ck.load(b)
    assert sa["step"] == sb["step"] == 3
    assert sa["model_config"]["reversible"] is True
    for k, v in sa["model"].items():
        assert torch.equal(v, sb["model"][k]), k


def test_describe_a_reversible_translation_checkpoint_reports_its_activation_bytes(tmp_path,
                                                                                     capsys):
    """describe --checkpoint of a reversible translation run: the bytes kept for backward per
    target token, plain and reversible (the reversible one smaller, whatever the depth)."""
    from splitnet.cli import main

    out = tmp_path / "t"
    assert main(["train", "--task", "translate", "--pairs", "copy", "--d-model", "16",
                 "--n-heads", "2", "--n-encoder-layers", "2", "--n-decoder-layers", "2",
                 "--context", "16", "--batch-size", "4", "--steps", "1", "--no-progress",
                 "--no-plot", "--reversible", "--bleu-sentences", "0", "--threads", "1",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["describe", "--checkpoint", str(out)]) == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[2] == "2+2"
    plain, rev = (int(v.replace(",", "")) for v in row[3:5])
    assert 0 < rev < plain / 3
