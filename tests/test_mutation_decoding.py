"""What the mutation run of ``nets/decoding.py`` showed unstated (issue 33): the beam's
bookkeeping (which extensions finish, which finished hypotheses are kept, when a source is
done), that a search stops once every source is, that padded sources decode as if alone, that
the caches are used (the decoder is not re-run on the whole prefix; the memory's keys and values
are projected once), the memory estimate's closed form and the arguments' bounds.
"""

from __future__ import annotations

import pytest
import torch

from splitnet.configs.config import MAX_BEAM
from splitnet.fields.cross import CrossAttention
from splitnet.nets import decoding as Dg
from splitnet.nets.seq2seq import SplitSeq2Seq

V, D, H = 11, 16, 2
PAD, BOS, EOS = 0, 1, 2


def _model(seed=0, **kw):
    opts = {"n_encoder_layers": 1, "n_decoder_layers": 2, "d_ff": 24, "max_len": 32, "pad_id": PAD,
                "bos_id": BOS, "eos_id": EOS, "tie_head": False, "shared_embeddings": False}
    opts.update(kw)
    torch.manual_seed(seed)
    return SplitSeq2Seq(V, V, D, H, **opts).double().eval()


def _ids(b, n, seed):
    return torch.randint(3, V, (b, n), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------------------------------------
# the beam's bookkeeping, one source at a time

def test_only_eos_extensions_among_the_best_k_finish():
    """K = 2, V = 4: the candidates ranked 0..3; eos at ranks 1 and 2. Rank 1 finishes (score
    over t ** alpha), rank 2 is neither finished (not among the best K) nor live."""
    seq = torch.tensor([[BOS, 5], [BOS, 6]])
    V_ = 4
    top = [-1.0, -2.0, -3.0, -4.0]
    idx = [0 * V_ + 3, 1 * V_ + EOS, 0 * V_ + EOS, 1 * V_ + 3]
    finished: list = []
    live = Dg._extend(0, 2, V_, 2, top, idx, seq, finished, 1.0, EOS, last=False, skip=False)
    assert finished == [(-2.0 / 2, [6, EOS])]
    assert live == [(0, 3, -1.0), (1, 3, -4.0)]


def test_the_best_k_finished_hypotheses_are_kept_best_first():
    seq = torch.tensor([[BOS, 5], [BOS, 6]])
    finished = [(-0.5, [9]), (-3.0, [8])]
    Dg._extend(0, 2, 4, 2, [-2.0], [EOS], seq, finished, 1.0, EOS, last=False, skip=False)
    assert finished == [(-0.5, [9]), (-1.0, [5, EOS])]
    assert Dg._extend(0, 2, 4, 2, [-0.1], [EOS], seq, finished, 1.0, EOS, last=False,
                      skip=True) == [] and len(finished) == 2        # a done source: untouched


@pytest.mark.parametrize("finished,live,t,alpha,done", [
    ([-1.0], [(0, 3, -9.0)], 2, 1.0, False),                 # fewer than K finished
    ([-1.0, -2.0], [], 2, 1.0, True),                        # nothing live
    ([-1.0, -2.0], [(0, 3, -3.0)], 2, 1.0, False),           # -1.5 beats the worst, -2
    ([-1.0, -2.0], [(0, 3, -5.0)], 2, 1.0, True),            # -2.5 does not
    ([-1.0, -2.0], [(0, 3, -4.0)], 2, 1.0, True),            # a tie does not beat it
    ([-1.0, -2.0], [(0, 3, -3.0)], 4, 0.5, False),           # -3 / 4 ** 0.5 = -1.5 beats it
    ([-1.0, -2.0], [(0, 3, -7.0)], 4, 0.5, True),            # -7 / 4 ** 0.5 = -3.5 does not
    ([-1.0, -2.0, -3.0], [(0, 3, -5.0)], 2, 1.0, False),     # K = 3: -2.5 beats -3
])
def test_a_source_is_done_when_no_live_hypothesis_can_beat_the_worst_kept(finished, live, t,
                                                                          alpha, done):
    kept = [(s, [EOS]) for s in finished]
    K = 2 if len(finished) < 3 else 3
    assert Dg._done(kept, live, K, t, alpha) is done


# ---------------------------------------------------------------------------------------------
# searches on a real network

def _count_steps(monkeypatch):
    calls = []
    real = Dg.step_function

    def counting(*a, **kw):
        nxt = real(*a, **kw)

        def step(*b, **kb):
            calls.append(1)
            return nxt(*b, **kb)
        return step
    monkeypatch.setattr(Dg, "step_function", counting)
    return calls


def _eos_first(m):
    """The decoder's output is its final norm's bias: every position's most likely token is
    eos, whatever came before."""
    with torch.no_grad():
        m.decoder_norm.weight.zero_()
        m.decoder_norm.bias.copy_(m.head.weight[EOS] * 50)
    return m


@pytest.mark.parametrize("beam", [1, 3])
def test_a_search_stops_once_every_source_is_done(beam, monkeypatch):
    """Every row ends at once with eos: one step, one column, for greedy and beam search."""
    m = _eos_first(_model())
    calls = _count_steps(monkeypatch)
    out = m.generate(_ids(3, 5, 1), 12, beam=beam)
    assert out.tolist() == [[EOS]] * 3 and len(calls) <= 2


@pytest.mark.parametrize("beam", [1, 3])
def test_padded_sources_decode_as_if_alone(beam):
    """A batch of sources of lengths 6 and 3 (padded) decodes each as that source alone: the
    source padding mask reaches the encoder and every cross-attention of the search (a sharp
    head without eos: eight source-dependent tokens each)."""
    m = _model(seed=3)
    with torch.no_grad():
        m.head.weight.mul_(30)
        m.head.weight[EOS].zero_()
    long, short = _ids(1, 6, 4), _ids(1, 3, 5)
    batch = torch.cat([long, torch.cat([short, torch.full((1, 3), PAD)], 1)])
    pad = batch.eq(PAD)
    together = m.generate(batch, 8, beam=beam, src_key_padding_mask=pad)
    alone = [m.generate(s, 8, beam=beam)[0] for s in (long, short)]
    for row, want in zip(together, alone):
        n = len(want)
        assert row[:n].tolist() == want.tolist() and set(row[n:].tolist()) <= {PAD}
    unmasked = m.generate(batch, 8, beam=beam, src_key_padding_mask=torch.zeros_like(pad))
    assert not torch.equal(unmasked[1, :len(alone[1])], alone[1])   # the mask mattered


def test_beam_search_defaults_to_length_penalty_one():
    m = _model(seed=1)
    src = _ids(4, 5, 9)
    assert torch.equal(m.generate(src, 10, beam=3), m.generate(src, 10, beam=3,
                                                                length_penalty=1.0))
    memory, mask = m.encode(src, None)
    with torch.no_grad():
        assert torch.equal(Dg.beam_search(m, memory, mask, 10, 3),
                           Dg.beam_search(m, memory, mask, 10, 3, length_penalty=1.0))
    assert not all(torch.equal(m.generate(src, 10, beam=3, length_penalty=a),
                               m.generate(src, 10, beam=3)) for a in (0.0, 2.0))


@pytest.mark.parametrize("beam", [1, 3])
def test_decoding_uses_the_caches_by_default(beam, monkeypatch):
    """Cached (the default): the decoder is never run on a whole prefix, and each
    cross-attention module projects the memory once per search. Uncached: the opposite."""
    m = _model(seed=2)
    src = _ids(2, 5, 3)
    projections = []
    real = CrossAttention.memory_keys_values
    monkeypatch.setattr(CrossAttention, "memory_keys_values",
                        lambda self, mem: projections.append(self) or real(self, mem))
    whole = []
    real_decode = SplitSeq2Seq.decode
    monkeypatch.setattr(SplitSeq2Seq, "decode",
                        lambda self, *a, **k: whole.append(1) or real_decode(self, *a, **k))
    want = m.generate(src, 6, beam=beam, use_cache=False)
    assert whole and len(projections) > 2
    whole.clear()
    projections.clear()
    assert torch.equal(m.generate(src, 6, beam=beam), want)
    assert not whole
    assert len(projections) == len(set(map(id, projections))) == 2    # one per decoder layer
    memory, mask = m.encode(src, None)
    whole.clear()
    with torch.no_grad():
        (Dg.greedy if beam == 1 else lambda *a: Dg.beam_search(*a, beam))(m, memory, mask, 6)
    assert not whole


@pytest.mark.heavy
def test_the_exact_method_decodes_uncached():
    """method exact: its evaluations vary, so no cache; asking for one is one line."""
    m = _model(seed=2, method="exact")
    src = _ids(1, 4, 3)
    assert torch.equal(m.generate(src, 3), m.generate(src, 3, use_cache=False))
    with pytest.raises(ValueError, match=r"cannot use a key/value cache: .*exact"):
        m.generate(src, 3, use_cache=True)


def test_the_memory_estimate_is_its_closed_form(monkeypatch):
    """decode_memory for a midpoint (2 evaluations) decoder of 3 layers of the Macaron stage
    string (self-attention once, cross-attention once, two half feed-forwards): R rows x
    (4 d (4 A n + S (1 + 2 X)) + 32 V + 8 n), A = 3 x 2 x 1 cached attentions, X = 3
    cross-attention modules; and generate asks require_memory for it, naming the search."""
    m = _model(n_decoder_layers=3, decoder_scheme="c:0.5,d:1,x:1,c:0.5", method="midpoint")
    n, S, B, K = 7, 5, 2, 3
    per_row = 4.0 * D * (4 * 6 * n + S * (1 + 2 * 3)) + 32.0 * V + 8.0 * n
    assert Dg.decode_memory(m.config, B, S, n, K) == B * K * per_row
    asked = []
    monkeypatch.setattr(Dg, "require_memory", lambda *a: asked.append(a))
    m.generate(_ids(B, S, 1), n, beam=K)
    assert asked == [(B * K * per_row, f"decoding {B} source(s) with beam {K}",
                      "lower the beam or the sources decoded at once", torch.device("cpu"))]
    euler = _model(n_decoder_layers=3, decoder_scheme="c:0.5,d:1,x:1,c:0.5")
    per_row = 4.0 * D * (4 * 3 * n + S * (1 + 2 * 3)) + 32.0 * V + 8.0 * n
    assert Dg.decode_memory(euler.config, B, S, n, K) == B * K * per_row


def test_result_rows_are_padded_to_the_longest_only():
    assert Dg._pad_rows([[5], [6]], PAD, None).tolist() == [[5], [6]]
    assert Dg._pad_rows([[5, EOS], [6]], PAD, None).tolist() == [[5, EOS], [6, PAD]]
    assert Dg._pad_rows([[], []], PAD, None).shape == (2, 1)


@pytest.mark.parametrize("kw,ok", [
    ({"max_new_tokens": 1}, True), ({"max_new_tokens": 32}, True),
    ({"max_new_tokens": 33}, False), ({"max_new_tokens": 2.0}, False),
    ({"beam": MAX_BEAM}, True), ({"beam": 2.0}, False), ({"beam": True}, False),
    ({"length_penalty": -10.0}, True), ({"length_penalty": 10.0}, True),
    ({"length_penalty": -10.5}, False), ({"length_penalty": 10.5}, False),
    ({"length_penalty": "1.0"}, False), ({"length_penalty": True}, False),
])
def test_argument_bounds(kw, ok):
    m = _model()
    args = {"max_new_tokens": 2, "beam": 1, "length_penalty": 1.0} | kw
    if ok:
        Dg._check(m, _ids(1, 3, 0), **args)
    else:
        with pytest.raises(ValueError, match=next(iter(kw))):
            Dg._check(m, _ids(1, 3, 0), **args)


# ---------------------------------------------------------------------------------------------
# a scripted scorer: the beam's stopping rule and a done source's freeze, exactly

# log p(next | source, prefix) for tokens eos, a = 3, b = 4 (unlisted: -20; pad, bos: -inf)
SCRIPT = {
    # source 0: eos at once (-1.0); a, eos gives -2.4 / 2 = -1.2: two finished; the best live,
    # a a (-2.5 / 2 = -1.25), cannot beat -1.2 now: done at step 2, answer [eos]. Were it
    # extended, a a eos (-2.51 / 3 = -0.84) would win.
    (0, ()): {EOS: -1.0, 3: -2.0, 4: -2.4},
    (0, (3,)): {EOS: -0.4, 3: -0.5},
    (0, (3, 3)): {EOS: -0.01},
    # source 1: eos at once (-1.0); a, eos -3.1 / 2 = -1.55: two finished, but the live a a
    # (-1.15 / 2 = -0.575) beats -1.55: not done; a a eos (-1.2 / 3 = -0.4) wins at step 3.
    (1, ()): {EOS: -1.0, 3: -1.1, 4: -3.0},
    (1, (3,)): {EOS: -2.0, 3: -0.05},
    (1, (3, 3)): {EOS: -0.05, 3: -3.0},
}


def _scripted(monkeypatch, K, V_=5):
    def factory(model, memory, mask, use_cache, capacity):
        def nxt(seq, reorder=None):
            out = torch.full((seq.shape[0], V_), -20.0, dtype=torch.float64)
            out[:, [PAD, BOS]] = float("-inf")
            for r, row in enumerate(seq.tolist()):
                for tok, lp in SCRIPT.get((r // K, tuple(row[1:])), {}).items():
                    out[r, tok] = lp
            return out
        return nxt
    monkeypatch.setattr(Dg, "step_function", factory)


def test_the_beam_stops_by_the_criterion_and_a_done_source_stays_done(monkeypatch):
    """Beam 2, length penalty 1: source 0 is done after step 2 (no live hypothesis beats its
    worst finished one) and keeps its answer although the search goes on for source 1, which
    has two finished hypotheses at step 2 but a live one that beats them, and ends with it."""
    from types import SimpleNamespace

    _scripted(monkeypatch, K=2)
    model = SimpleNamespace(config=SimpleNamespace(pad_id=PAD, bos_id=BOS, eos_id=EOS))
    out = Dg.beam_search(model, torch.zeros(2, 3, 4), None, 4, 2, length_penalty=1.0)
    assert out.tolist() == [[EOS, PAD, PAD], [3, 3, EOS]]


@pytest.mark.heavy
def test_generate_defaults_are_greedy_and_length_penalty_one():
    """beam 1 and length penalty 1 unless told: on these sources beam 2 differs from greedy and
    length penalty 2 from 1, so a changed default would show."""
    m = _model(seed=1)
    src = _ids(4, 5, 9)
    assert torch.equal(m.generate(src, 10), m.generate(src, 10, beam=1))
    assert not torch.equal(m.generate(src, 10), m.generate(src, 10, beam=2))
    assert torch.equal(m.generate(src, 10, beam=3), m.generate(src, 10, beam=3,
                                                                length_penalty=1.0))
    assert not torch.equal(m.generate(src, 10, beam=3),
                           m.generate(src, 10, beam=3, length_penalty=2.0))
    # the function's own defaults (the method passes its own)
    assert torch.equal(Dg.generate(m, src, 10), m.generate(src, 10, beam=1))
    assert torch.equal(Dg.generate(m, src, 10, beam=3), m.generate(src, 10, beam=3))


def test_use_cache_true_uses_it(monkeypatch):
    m = _model(seed=2)
    whole = []
    real_decode = SplitSeq2Seq.decode
    monkeypatch.setattr(SplitSeq2Seq, "decode",
                        lambda self, *a, **k: whole.append(1) or real_decode(self, *a, **k))
    for beam in (1, 2):
        m.generate(_ids(2, 5, 3), 4, beam=beam, use_cache=True)
    assert not whole


def test_the_memory_estimate_counts_every_call_and_module():
    """Per-stage weights of ``d:0.5,x:0.5,c:1,x:0.5,d:0.5`` over 2 layers: 2 self-attention
    calls and 2 cross-attention modules per layer (A = 2 x 1 x 2 = 4, X = 2 x 2 = 4); the exact
    method counts one evaluation per call."""
    n, S, B, K = 5, 4, 3, 2
    for method in ("euler", "exact"):
        m = _model(decoder_scheme="d:0.5,x:0.5,c:1,x:0.5,d:0.5", weights="per-stage",
                   method=method)
        per_row = 4.0 * D * (4 * 4 * n + S * (1 + 2 * 4)) + 32.0 * V + 8.0 * n
        assert Dg.decode_memory(m.config, B, S, n, K) == B * K * per_row, method


def test_a_reversible_decoders_cached_step_is_the_uncached_one_on_its_grid():
    """With an exact-arithmetic grid (reversible_grid 12) the cached step starts its pair on
    the grid as the uncached forward does: its final states lie on the readout's grid (the
    mean of two grid points, multiples of 2^-13) and equal the uncached ones there. Not bit for
    bit everywhere: the two paths evaluate the fields on differently shaped batches, whose
    sums can differ below the grid, and an increment at a near-tie then rounds to the next
    multiple (an AMD EPYC: one coordinate of 48 by 2^-13). Log-probabilities to match."""
    m = _model(decoder_scheme="strang", encoder_scheme="strang", reversible=True,
               reversible_grid=12, seed=4).float()
    src = _ids(3, 5, 2)
    seq = torch.cat([torch.full((3, 1), BOS), _ids(3, 4, 6)], 1)
    seen = []
    m.decoder_norm.register_forward_hook(lambda mod, i, o: seen.append(i[0].detach()))
    with torch.no_grad():
        memory, mask = m.encode(src, None)
        cached = Dg.step_function(m, memory, mask, True, 8)
        for n in range(1, seq.shape[1] + 1):
            got = cached(seq[:, :n])
        a = seen[-1].reshape(3, -1)
        want = Dg.step_function(m, memory, mask, False, 8)(seq)
        b = seen[-1][:, -1]
    unit = 2.0 ** -13
    assert torch.equal(torch.round(a / unit) * unit, a)          # on the grid: started on it
    diff = (a - b).abs()
    assert float(diff.max()) <= unit and int((diff > 0).sum()) <= 2, diff
    ok = torch.isfinite(want)
    assert torch.equal(ok, torch.isfinite(got))
    assert torch.allclose(got[ok], want[ok], rtol=0, atol=1e-3)
