"""SplitSeq2Seq: equal to torch.nn.Transformer(norm_first=True), causal, padding-invariant,
parameter-matched; decoding cached = uncached, beam 1 = greedy, beam search exhaustive on a
vocabulary small enough to enumerate."""

import itertools
import json
import math
import warnings
from pathlib import Path

import pytest
import torch

from splitnet.configs.seq2seq import Seq2SeqConfig
from splitnet.nets.reference import load_into_torch_transformer
from splitnet.nets.seq2seq import SplitSeq2Seq

V, D, H = 11, 16, 2
SPECIALS = {"pad_id": 0, "bos_id": 1, "eos_id": 2}


def _model(**kw):
    opts = dict(n_encoder_layers=2, n_decoder_layers=2, d_ff=24, max_len=32, **SPECIALS)
    opts.update(kw)
    torch.manual_seed(opts.pop("seed", 0))
    return SplitSeq2Seq(V, V, D, H, **opts).double().eval()


def _ids(b, n, seed, lo=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, V, (b, n), generator=g)


def test_lie_trotter_is_torch_transformer_norm_first():
    m = _model(n_encoder_layers=3, n_decoder_layers=2)
    with warnings.catch_warnings():        # "enable_nested_tensor ... norm_first": expected
        warnings.simplefilter("ignore", UserWarning)
        tt = torch.nn.Transformer(D, H, 3, 2, 24, dropout=0.0, activation="gelu",
                                  norm_first=True, batch_first=True).double().eval()
    load_into_torch_transformer(tt, m)
    src, tgt = _ids(3, 7, 1), _ids(3, 5, 2)
    src[1, 5:] = 0                                    # padded source
    pad = src.eq(0)
    with torch.no_grad():
        e_src, e_tgt = m.embed_source(src), m.embed_target(tgt)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=torch.float64)
        y = tt(e_src, e_tgt, tgt_mask=causal, src_key_padding_mask=pad,
               memory_key_padding_mask=pad, tgt_is_causal=True)
        ref = m.head(y)
        got = m(src, tgt)
    assert got.shape == (3, 5, V)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    # and a wrong mapping is caught: perturb one weight
    with torch.no_grad():
        m.decoder_layers[1].cross.q.weight[0, 0] += 1e-3
        assert (m(src, tgt) - ref).abs().max() > 1e-8


def test_decoder_is_causal_and_encoder_sees_the_whole_source():
    m = _model(decoder_scheme="strang")
    src, tgt = _ids(2, 6, 3), _ids(2, 6, 4)
    with torch.no_grad():
        base = m(src, tgt)
        t2 = tgt.clone()
        t2[:, 4] = 3 + (t2[:, 4] - 2) % (V - 3)             # change target token 4
        out = m(src, t2)
        assert torch.equal(out[:, :4], base[:, :4])          # earlier positions unchanged
        assert (out[:, 4:] - base[:, 4:]).abs().max() > 1e-6
        s2 = src.clone()
        s2[:, -1] = 3 + (s2[:, -1] - 2) % (V - 3)            # the last source token
        assert (m(s2, tgt)[:, 0] - base[:, 0]).abs().max() > 1e-6


@pytest.mark.parametrize("scheme", ["lie-trotter", "c:0.5,d:1,x:1,c:0.5"])
def test_a_padded_target_batch_is_each_sentence_decoded_alone(scheme):
    """A training batch: targets of 6, 3 and 4 tokens right-padded with pad_id, sources padded
    too. On each row's tokens the logits equal the sentence decoded alone, unpadded; no
    position reads a later one (later tokens, real or padding, changed: earlier logits kept)."""
    m = _model(decoder_scheme=scheme, weights="per-stage")
    lengths, src_lengths = (6, 3, 4), (5, 3, 5)
    src, tgt = _ids(3, 5, 11), _ids(3, 6, 12)
    src[torch.arange(5)[None, :] >= torch.tensor(src_lengths)[:, None]] = SPECIALS["pad_id"]
    tgt[torch.arange(6)[None, :] >= torch.tensor(lengths)[:, None]] = SPECIALS["pad_id"]
    with torch.no_grad():
        out = m(src, tgt)
        for i, n in enumerate(lengths):
            alone = m(src[i:i + 1, :src_lengths[i]], tgt[i:i + 1, :n])[0]
            torch.testing.assert_close(out[i, :n], alone, rtol=0, atol=1e-12)
        for j in range(1, 6):
            t2 = tgt.clone()
            t2[:, j:] = _ids(3, 6 - j, 13 + j)
            moved = m(src, t2)
            torch.testing.assert_close(moved[:, :j], out[:, :j], rtol=0, atol=1e-12)
            assert (moved[:, j] - out[:, j]).abs().max() > 1e-6


@pytest.mark.parametrize("scheme", ["lie-trotter", "strang", "c:0.5,d:1,x:1,c:0.5"])
def test_padding_invariance(scheme):
    m = _model(decoder_scheme=scheme, encoder_scheme="strang", weights="per-stage")
    src, tgt = _ids(1, 5, 5), _ids(1, 4, 6)
    padded = torch.cat([src, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        a = m(src, tgt)
        b = m(padded, tgt)                                   # pads found from pad_id
        c = m(padded, tgt, src_key_padding_mask=padded.eq(0))
        unmasked = m(padded, tgt, src_key_padding_mask=torch.zeros_like(padded, dtype=bool))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    torch.testing.assert_close(a, c, rtol=0, atol=1e-12)
    assert (unmasked - a).abs().max() > 1e-6                 # the mask matters


def test_parameter_matching_of_the_macaron_decoder():
    std = _model(weights="per-stage")
    mac = _model(decoder_scheme="c:0.5,d:1,x:1,c:0.5", weights="per-stage")
    sym = _model(decoder_scheme="strang", weights="per-stage")
    # the same matrices; the second feed-forward adds its LayerNorm and output bias (3 d)
    assert mac.n_params() - std.n_params() == 2 * 3 * D
    mats = lambda m: sum(p.numel() for p in m.parameters() if p.dim() == 2)  # noqa: E731
    assert mats(mac) == mats(std)
    ff = mac.decoder_layers[0].convection
    assert len(ff) == 2 and ff[0].fc1.out_features == 12     # two half-width feed-forwards
    # Strang over three fields: two self- and two cross-attentions per layer, one feed-forward
    assert sym.n_params() > std.n_params()
    shared = _model(decoder_scheme="strang")
    assert shared.n_params() == _model().n_params()          # shared weights: equal always


def test_config_round_trip_and_bad_options():
    m = _model(decoder_scheme="c:0.5,d:1,x:1,c:0.5", weights="per-stage", tie_head=False)
    c = Seq2SeqConfig.from_dict(m.config.to_dict())
    assert c == m.config
    assert SplitSeq2Seq.from_config(c).n_params() == m.n_params()
    with pytest.raises(ValueError, match="cross-attention belongs to the decoder"):
        Seq2SeqConfig(encoder_scheme="d:1,x:1,c:1")
    with pytest.raises(ValueError, match="never advances the cross field"):
        Seq2SeqConfig(decoder_scheme="d:1,c:1")
    with pytest.raises(ValueError, match="shared_embeddings needs equal"):
        Seq2SeqConfig(src_vocab=300)
    with pytest.raises(ValueError, match="must differ"):
        Seq2SeqConfig(bos_id=256)
    with pytest.raises(ValueError, match="all padding"):
        m(torch.zeros(1, 3, dtype=torch.long), _ids(1, 2, 0))
    with pytest.raises(ValueError, match="max_len"):
        m(_ids(1, 40, 0), _ids(1, 2, 0))


def _brute_force(m, src, n, alpha):
    """Every output of up to n tokens (eos-terminated, or n tokens), scored as beam search
    scores them; the best."""
    c = m.config
    words = [t for t in range(V) if t not in (c.pad_id, c.bos_id)]
    best, best_seq = -math.inf, None
    with torch.no_grad():
        memory, mask = m.encode(src)
        for length in range(1, n + 1):
            for seq in itertools.product(words, repeat=length):
                if c.eos_id in seq[:-1] or (length < n and seq[-1] != c.eos_id):
                    continue
                inp = torch.tensor([[c.bos_id, *seq[:-1]]])
                logp = torch.log_softmax(m.decode(inp, memory, mask)[0].double(), -1)
                s = sum(float(logp[i, tok]) for i, tok in enumerate(seq)) / length ** alpha
                if s > best:
                    best, best_seq = s, list(seq)
    return best_seq


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_finds_the_best_sequence(alpha):
    global V
    old, V = V, 5                                  # pad, bos, eos and two words
    try:
        greedy_missed = 0
        for seed in (1, 5, 6):                     # sharp distributions: (seed 1) the best
            m = _model(seed=seed, tie_head=False, shared_embeddings=False,   # is 4 4 4 eos,
                       init="gpt2")                # (seeds found under gpt2's weights)
            with torch.no_grad():                  # greedy finds 3 eos, beam 2 misses it
                m.head.weight.mul_(60)
            src, n = _ids(1, 4, 7), 4
            want = _brute_force(m, src, n, alpha)
            got = _strip(m.generate(src, n, beam=V ** n, length_penalty=alpha)[0])
            assert got == want, seed
            greedy_missed += _strip(m.generate(src, n)[0]) != want
        assert greedy_missed                       # the search is not trivially greedy
    finally:
        V = old


def _strip(row):
    row = row.tolist()
    while row and row[-1] == SPECIALS["pad_id"]:
        row.pop()
    return row


@pytest.mark.parametrize("scheme", ["lie-trotter", "c:0.5,d:1,x:1,c:0.5", "strang"])
def test_cached_equals_uncached_and_beam1_equals_greedy(scheme):
    m = _model(decoder_scheme=scheme, weights="per-stage", n_decoder_layers=3)
    src = _ids(4, 6, 8)
    src[2, 4:] = 0
    for beam in (1, 3):
        a = m.generate(src, 12, beam=beam, use_cache=True)
        b = m.generate(src, 12, beam=beam, use_cache=False)
        assert torch.equal(a, b)
    g = m.generate(src, 12)
    assert torch.equal(m.generate(src, 12, beam=1), g)
    # greedy is the argmax of the uncached model at every step
    seq = torch.full((4, 1), m.config.bos_id)
    with torch.no_grad():
        for _ in range(g.shape[1]):
            logits = m(src, seq)[:, -1].clone()
            logits[:, [0, 1]] = -math.inf
            seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], 1)
    for row, want in zip(g.tolist(), seq[:, 1:].tolist()):
        k = want.index(2) + 1 if 2 in want else len(want)
        assert row[:k] == want[:k] and all(t == 0 for t in row[k:])


def _beams(m, src, n, beam):
    """Uncached beam search of ``src``, and the (B K, t) prefixes of every step (what the
    uncached path feeds ``m.decode``)."""
    seen, decode = [], m.decode

    def record(seq, *args, **kw):
        seen.append(seq.clone())
        return decode(seq, *args, **kw)

    m.decode = record
    try:
        return m.generate(src, n, beam=beam, use_cache=False), seen
    finally:
        del m.decode


@pytest.mark.parametrize("scheme", ["lie-trotter", "strang"])
def test_cached_beam_search_of_diverging_beams_is_the_uncached_one(scheme):
    """Beams that hold different prefixes and trade places: a hypothesis continues another row
    than its own, so the caches' reorder must move keys and values together. Cached = uncached
    for beams 2..5, batches of 1, 3 and 4 sources, padded sources among them."""
    m = _model(seed=1, decoder_scheme=scheme, weights="per-stage", tie_head=False,
               shared_embeddings=False)
    for b, beam in itertools.product((1, 3, 4), (2, 3, 4, 5)):
        src = _ids(b, 6, 20 + b)
        src[b // 2, 6 - b:] = SPECIALS["pad_id"]             # one source ends in b pads
        want, seen = _beams(m, src, 10, beam)
        # the beams diverge (a source's rows hold different prefixes) and trade places (a row
        # continues a prefix that another row held): a reorder that is not the identity
        assert any(len(set(map(tuple, s.reshape(b, beam, -1)[i].tolist()))) > 1
                   for s in seen[2:] for i in range(b)), (b, beam)
        moved = ((new[:, :-1] != old).any() for old, new in itertools.pairwise(seen))
        assert any(moved), (b, beam)
        assert torch.equal(m.generate(src, 10, beam=beam, use_cache=True), want), (b, beam)


def test_generate_rows_end_at_eos_and_pad_after():
    m = _model(seed=1)
    out = m.generate(_ids(5, 5, 9), 20, beam=2, length_penalty=0.6)
    for row in out.tolist():
        if 2 in row:
            k = row.index(2)
            assert all(t == 0 for t in row[k + 1:])
        assert 1 not in row
    with pytest.raises(ValueError, match="max_new_tokens"):
        m.generate(_ids(1, 3, 0), 0)
    with pytest.raises(ValueError, match="beam"):
        m.generate(_ids(1, 3, 0), 3, beam=0)


@pytest.mark.heavy
@pytest.mark.parametrize("decoder,weights", [("lie-trotter", "shared"),
                                             ("c:0.5,d:1,x:1,c:0.5", "per-stage")])
def test_rediscretize_both_stacks(decoder, weights):
    from splitnet.analyses.refine import ode_model, rediscretize

    m = _model(decoder_scheme=decoder, weights=weights, step_size=0.4)
    src, tgt = _ids(2, 6, 10), _ids(2, 5, 11)
    src[1, 4:] = 0
    with torch.no_grad():
        base = m(src, tgt)
        assert torch.equal(rediscretize(m)(src, tgt), base)      # own stages: the model
        assert len(rediscretize(m, "strang", 2).decoder_scheme.stages) == 10   # 2 x 5 stages
        limit = ode_model(m)(src, tgt)                           # unsplit, padding and memory
        errs = [float((rediscretize(m, "strang", k, "exact")(src, tgt) - limit).abs().max())
                for k in (1, 2, 4)]
    # Strang over the three fields, exact sub-flows: the error falls as (h/n)^2 per layer
    slopes = [math.log2(a / b) for a, b in itertools.pairwise(errs)]
    assert all(1.7 < s < 2.3 for s in slopes), (errs, slopes)


def test_trajectories_of_decoder_tokens_with_the_memory():
    from splitnet.analyses.trajectories import collect
    from splitnet.translate.batches import ByteTokenizer

    tok = ByteTokenizer()
    torch.manual_seed(0)
    m = SplitSeq2Seq(259, 259, 16, 2, n_encoder_layers=2, n_decoder_layers=2,
                     decoder_scheme="strang", step_size=0.5).double()
    tgt = torch.tensor([tok.bos_id, *tok.encode("Hallo")])
    tr = collect(m, tgt, source="Hello", tokenizer=tok, continuous=True, points_per_layer=4)
    assert tr.states.shape == (1 + 2 * 5, 6, 16) and tr.memory.shape == (5, 16)
    assert tr.labels[0] == "<s>" and tr.memory_labels == tuple("Hello")
    assert tr.fields[1:6] == ("convection", "diffusion", "cross", "diffusion", "convection")
    with torch.no_grad():
        memory, mask = m.encode(torch.tensor([tok.encode("Hello")]))
        _, states = m.decode(tgt[None], memory, mask, return_states=True)
    torch.testing.assert_close(tr.states, states[:, 0], rtol=0, atol=0)
    torch.testing.assert_close(tr.memory, memory[0], rtol=0, atol=0)
    assert tr.gap()[-1] < 0.5 * float((tr.path[-1] - tr.path[0]).norm(dim=-1).mean())
    with pytest.raises(ValueError, match="needs source"):
        collect(m, tgt)


def test_checkpoint_round_trip_by_model_kind(tmp_path):
    from splitnet import checkpoint as ck

    m = _model(decoder_scheme="c:0.5,d:1,x:1,c:0.5", weights="per-stage").float()
    state = {"version": ck.VERSION, "model": m.state_dict(), "model_config":
             m.config.to_dict(), "model_kind": ck.model_kind(m)}
    ck.save(state, ck.checkpoint_file(tmp_path))
    back = ck.load_model(tmp_path)
    assert type(back) is SplitSeq2Seq and back.config == m.config
    src, tgt = _ids(2, 5, 1), _ids(2, 4, 2)
    with torch.no_grad():
        assert torch.equal(back(src, tgt), m.eval()(src, tgt))
    state["model_kind"] = "lm"                     # the weights do not fit a language model
    ck.save(state, ck.checkpoint_file(tmp_path))
    with pytest.raises(ValueError, match=r"model config is not valid|do not fit"):
        ck.load_model(tmp_path)


def test_the_translation_studys_parameter_counts_are_its_models():
    """docs/translation.md (its results table, "1.47M parameters", "it would add 512,000
    parameters" for an untied head) and README ("BPE 4000, 1.5M parameters"): the counts of the
    models built from the configs the study's records hold, at the BPE vocabulary they trained
    with (a record's model config predates its tokenizer: vocabulary 259)."""
    root = Path(__file__).resolve().parents[1]
    study = root / "experiments" / "cache" / "translation" / "v2" / "study"
    recs = {}                                       # one per arrangement: seeds share a model
    for p in sorted(study.glob("*_seed*.json")):
        r = json.loads(p.read_text())
        recs.setdefault(r["arrangement"], r)
    text = (root / "docs" / "translation.md").read_text()
    doc = " ".join(text.split())
    readme = " ".join((root / "README.md").read_text().split())
    # the four Transformer arrangements, and ConvS2S's two once run (issue 47)
    assert {"Transformer", "Macaron", "Strang", "Control"} <= set(recs) <= \
        {"Transformer", "Macaron", "Strang", "Control", "ConvS2S", "ConvS2S-Strang"}, sorted(recs)
    for name, r in recs.items():
        v = r["config"]["bpe"]
        c = Seq2SeqConfig.from_dict(r["config"]["model"]).replace(src_vocab=v, tgt_vocab=v)
        with torch.device("meta"):
            n = SplitSeq2Seq.from_config(c).n_params()
            untied = SplitSeq2Seq.from_config(c.replace(tie_head=False)).n_params()
        assert n == r["n_params"], name
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| {name} | "))
        assert f" | {n:,} | " in row, (name, row)
        if name == "Transformer":
            assert f"(BPE {v}, d_model {c.d_model}, 2 + 2 layers, {n / 1e6:.2f}M parameters)" in doc
            assert f"(BPE {v}, {n / 1e6:.1f}M parameters" in readme
            assert f"with BPE {v} it would add {untied - n:,} parameters" in doc
