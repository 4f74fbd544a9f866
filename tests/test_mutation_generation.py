"""What the mutation run of ``nets/generation.py`` showed unstated (issue 33): which path each
token takes (the cache by default, at exactly ``max_len`` too, never with ``use_cache=False``),
the caches' size, one new token, the defaults (temperature 1), what a callable that declares
nothing is taken to be, and the bounds of the arguments.
"""

from __future__ import annotations

import pytest
import torch

import splitnet as sn
from splitnet.nets import generation as G

V = 13


def _model(max_len=8, **kw):
    torch.manual_seed(0)
    return sn.SplitTransformer(V, 16, 2, 2, scheme="strang", max_len=max_len, **kw).eval()


def _prompt(b=2, n=3, seed=1):
    return torch.randint(0, V, (b, n), generator=torch.Generator().manual_seed(seed))


def _spy(monkeypatch):
    """Count the cached and the whole-window forwards, and record each cache's capacity."""
    seen = {"cached": 0, "whole": 0, "capacity": []}
    real_cached, real_last = G.forward_cached, G.forward_last

    def cached(*a, **k):
        seen["cached"] += 1
        return real_cached(*a, **k)

    def last(*a, **k):
        seen["whole"] += 1
        return real_last(*a, **k)

    class Recorded(G.GenerationCache):
        def __init__(self, model, capacity):
            seen["capacity"].append(capacity)
            super().__init__(model, capacity)

    monkeypatch.setattr(G, "forward_cached", cached)
    monkeypatch.setattr(G, "forward_last", last)
    monkeypatch.setattr(G, "GenerationCache", Recorded)
    return seen


def test_the_cache_is_used_by_default_and_only_then(monkeypatch):
    m, idx = _model(), _prompt()
    seen = _spy(monkeypatch)
    want = G.generate(m, idx, 4, temperature=0)
    assert (seen["cached"], seen["whole"], seen["capacity"]) == (4, 0, [3 + 4 - 1])
    for use_cache, cached, whole in ((True, 4, 0), (False, 0, 4)):
        seen.update(cached=0, whole=0)
        assert torch.equal(G.generate(m, idx, 4, temperature=0, use_cache=use_cache), want)
        assert (seen["cached"], seen["whole"]) == (cached, whole), use_cache


def test_a_prompt_of_exactly_max_len_is_cached_then_the_window_slides(monkeypatch):
    """T = max_len = 8: the first token from the cache (its prefill), the next ones from the
    slid window (every position moved); the cache holds at most max_len positions."""
    m, idx = _model(), _prompt(n=8)
    seen = _spy(monkeypatch)
    out = G.generate(m, idx, 3, temperature=0)
    assert (seen["cached"], seen["whole"], seen["capacity"]) == (1, 2, [8])
    assert torch.equal(out, G.generate(m, idx, 3, temperature=0, use_cache=False))


def test_one_new_token_and_none():
    m, idx = _model(), _prompt()
    one = G.generate(m, idx, 1, temperature=0)
    assert one.shape == (2, 4) and torch.equal(one[:, :3], idx)
    assert torch.equal(G.generate(m, idx, 0), idx)
    assert list(G.stream(m, idx, 0)) == []


def test_the_default_temperature_is_one():
    m, idx = _model(), _prompt(b=16)

    def draw(**kw):
        return G.generate(m, idx, 6, generator=torch.Generator().manual_seed(3), **kw)
    assert torch.equal(draw(), draw(temperature=1.0))
    assert not torch.equal(draw(), draw(temperature=2.0))
    streamed = G.stream(m, idx, 6, generator=torch.Generator().manual_seed(3))
    assert torch.equal(torch.cat([idx, *streamed], 1), draw())
    logits = torch.randn(500, 7, generator=torch.Generator().manual_seed(4))

    def tok(*a):
        return G.sample(logits, *a, generator=torch.Generator().manual_seed(5))
    assert torch.equal(tok(), tok(1.0)) and not torch.equal(tok(), tok(2.0))


def test_a_callable_that_declares_nothing_mixes_tokens_and_takes_no_cache():
    def field(t, x):
        return x
    assert G.mixes_tokens(field) is True and G.takes_cache(field) is False


def test_a_model_that_cannot_cache_says_why():
    m = _model(causal=False)
    assert G.cache_unsupported(m).startswith("the model is not causal (earlier tokens' states")
    # and a bidirectional model does not generate at all (issue 49 D12), cached or not
    for use_cache in (None, True, False):
        with pytest.raises(ValueError, match=r"^the model is bidirectional \(causal=False"):
            G.generate(m, _prompt(), 2, use_cache=use_cache)


@pytest.mark.parametrize("idx,match", [
    (torch.tensor([[-1, 3]]), r"token ids must lie in \[0, 13\), got \[-1, 3\]"),
    (torch.tensor([[0, V]]), r"token ids must lie in \[0, 13\), got \[0, 13\]"),
    (torch.zeros(0, 3, dtype=torch.long), r"shape \(batch, seq\) with batch >= 1"),
])
def test_prompts_out_of_bounds_are_refused(idx, match):
    with pytest.raises(ValueError, match=match):
        G.generate(_model(), idx, 2)


def test_a_generator_that_is_not_one_is_refused_before_the_first_token():
    with pytest.raises(TypeError, match=r"generator must be a torch\.Generator, got str"):
        G.stream(_model(), _prompt(), 2, generator="seed")


@pytest.mark.parametrize("capacity,ok", [(1, True), (2, True), (0, False), ("3", False),
                                         (True, False), (2.0, False)])
def test_a_cache_capacity_is_a_positive_int(capacity, ok):
    if ok:
        assert G.KVCache(capacity).capacity == capacity
    else:
        with pytest.raises(ValueError, match="capacity must be a positive integer"):
            G.KVCache(capacity)
